/* fakecuda.h - test controls of the simulated CUDA runtime (libcudart.so.13
 * stand-in, tests/fakecuda). Programs use the ordinary CUDA runtime API from
 * <cuda_runtime_api.h>; this header adds what only a simulation can offer:
 * kernels of a given duration, fault injection and counters of what happened.
 * docs/fakecuda.md describes the model these controls steer.
 *
 * Kernels. In fakecuda a kernel is a host function `void kernel(void **args)`
 * passed to cudaLaunchKernel (or cudaLaunchKernel_ptsz) as `func`. It runs on
 * the worker thread of the stream, in stream order, with `args` as given to
 * the launch (or a copy of the argument values, see fakecuda_register_kernel).
 * It may read and write device memory (host memory here) and should spend its
 * simulated time with fakecuda_sleep_us(). While it runs the device's compute
 * engine counts as busy (case D: same-device copies from other streams wait).
 *
 *     static void busy_kernel(void **args)
 *     {
 *         float *out = *(float **)args[0];
 *         double us = *(double *)args[1];
 *         fakecuda_sleep_us(us);
 *         out[0] = 1.0f;
 *     }
 *     ...
 *     size_t sizes[] = {sizeof(float *), sizeof(double)};
 *     fakecuda_register_kernel((const void *)busy_kernel, 2, sizes);
 *     void *args[] = {&dev_ptr, &duration_us};
 *     cudaLaunchKernel((const void *)busy_kernel, dim3_1, dim3_1, args, 0, stream);
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sleeps for `us` simulated microseconds: us * FAKECUDA_TIME_SCALE of real
 * time. For kernel bodies and host functions. */
void fakecuda_sleep_us(double us);

/* Declares the argument sizes of a kernel so that cudaLaunchKernel copies the
 * argument values at launch, as the real runtime does; the caller may then
 * reuse `args` as soon as the launch returns. A kernel that was not
 * registered receives the caller's `args` pointer unchanged: the array and
 * what it points to must stay valid until the kernel has run. Registering
 * the same function again replaces its sizes; nargs <= 32. Returns 0, or -1
 * for bad arguments. */
int fakecuda_register_kernel(const void *func, unsigned nargs, const size_t *arg_sizes);

/* Where a fault can be injected. */
enum fakecuda_fault_site {
    FAKECUDA_FAULT_HOST_ALLOC,    /* cudaHostAlloc, cudaMallocHost   (default cudaErrorMemoryAllocation) */
    FAKECUDA_FAULT_HOST_REGISTER, /* cudaHostRegister                (default cudaErrorMemoryAllocation) */
    FAKECUDA_FAULT_EVENT_CREATE,  /* cudaEventCreate*                (default cudaErrorMemoryAllocation) */
    FAKECUDA_FAULT_STREAM_CREATE, /* cudaStreamCreate*               (default cudaErrorMemoryAllocation) */
    FAKECUDA_FAULT_MALLOC,        /* cudaMalloc                      (default cudaErrorMemoryAllocation) */
    FAKECUDA_FAULT_ASYNC,         /* work queued on any stream: copy, memset, kernel, host function;
                                     fails when it would run, sticky on its stream
                                                                     (default cudaErrorLaunchFailure) */
    FAKECUDA_FAULT_SITES
};

/* Makes calls at `site` fail with `err` (cudaSuccess: the site's default):
 * the nth call from now (1 = the next one) and the `count` calls from it on
 * (count 0: every later call). nth 0 disarms the site. Replaces what the
 * environment (FAKECUDA_FAULT_*) or an earlier call armed there. A failed
 * call has no effect besides returning the error. Returns 0, or -1 for a bad
 * site. */
int fakecuda_set_fault(enum fakecuda_fault_site site, unsigned long nth, unsigned long count, cudaError_t err);

/* Arms an asynchronous error on one stream: the next operation queued on it
 * fails when it would run (it does nothing) and the stream keeps the error:
 * from then on cudaStreamSynchronize, cudaStreamQuery, cudaEventSynchronize
 * and cudaEventQuery of events recorded on it, and cudaDeviceSynchronize of
 * its device, return `err` (cudaSuccess: cudaErrorLaunchFailure), and later
 * work on it does not run (stream callbacks still run, with the error as
 * status). The handle means what it means in a plain entry point (0: the
 * legacy stream of the current device). Returns cudaSuccess or
 * cudaErrorInvalidResourceHandle. */
cudaError_t fakecuda_fail_stream(cudaStream_t stream, cudaError_t err);

/* Disarms every fault site and every armed stream, and clears the sticky
 * errors of all streams, so that a test can go on in the same process. */
void fakecuda_reset_faults(void);

/* What the simulation did since load or the last fakecuda_reset_stats().
 * "Held" means the call returned only when its stream had drained and the
 * copy was done. Times are real microseconds (already scaled). */
struct fakecuda_stats {
    /* copies queued (issued and not captured), by path */
    unsigned long copies_pinned;         /* host side pinned or registered (H2D, D2H, H2H) */
    unsigned long copies_pageable;       /* host side pageable (H2D, D2H, H2H) */
    unsigned long copies_d2d;            /* device to device, same device */
    unsigned long copies_peer;           /* across devices, peer access enabled */
    unsigned long copies_staged;         /* across devices, staged through the host */
    unsigned long long bytes_pinned, bytes_pageable, bytes_d2d, bytes_peer, bytes_staged;
    /* the native stalls */
    unsigned long pageable_h2d_snapshots; /* case B, small: source copied at call time, returned at once */
    unsigned long pageable_h2d_waits;     /* case B, large: caller held */
    unsigned long pageable_d2h_waits;     /* case C: caller held under the API lock */
    unsigned long staged_waits;           /* case A: caller held */
    double host_wait_us_max;              /* longest hold of the three above */
    double host_wait_us_total;
    double api_lock_max_hold_us;          /* longest time the process-wide API lock was held */
    double api_lock_max_wait_us;          /* longest time a call waited to take it */
    unsigned long api_lock_waits;         /* calls that found it taken */
    /* case D: same-device copies that waited for the compute engine: a time
     * slice (behind another context's kernel), or until a kernel of their own
     * context that occupies every SM ended */
    unsigned long timeslice_waits;
    double timeslice_wait_us_total;
    unsigned long kernel_end_waits;
    double kernel_end_wait_us_total;
    /* other work */
    unsigned long kernels, host_funcs, memsets, event_records, stream_waits;
    unsigned long implicit_syncs;         /* device synchronizations by cudaFree, cudaHostAlloc, ... */
    unsigned long captured_ops;           /* work issued to a capturing stream (not executed) */
    unsigned long async_errors;           /* operations that failed asynchronously */
    unsigned long faults_injected;        /* API calls failed by a fault site */
    unsigned long streams_created, events_created, pinned_allocs;
    unsigned long pinned_allocs_created_ctx; /* of them, made while a cuCtxCreate context was current: on a GPU
                                              * freed with that context (cuCtxDestroy) */
    unsigned long pinned_released_by_ctx_destroy; /* pinned allocations and registrations cuCtxDestroy released */
    unsigned long host_registers;         /* cudaHostRegister calls that succeeded */
    unsigned long long pinned_alloc_max_bytes; /* largest single cudaHostAlloc/cudaMallocHost */
    unsigned long long host_register_max_bytes; /* largest single cudaHostRegister */
    unsigned long workers_started;        /* stream worker threads started (they exit when idle) */
    int workers_running;                  /* worker threads alive now */
};

void fakecuda_stats(struct fakecuda_stats *out);
void fakecuda_reset_stats(void);

/* Reads the FAKECUDA_* environment again (bandwidths, latency, time scale,
 * limits, peer matrix, faults), for tests that setenv() after the first CUDA
 * call. FAKECUDA_DEVICES keeps the value read at first use. */
void fakecuda_reload_config(void);

#ifdef __cplusplus
}
#endif

#endif /* FAKECUDA_H */
