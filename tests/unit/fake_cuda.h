/* fake_cuda.h - a scripted stand-in for the runtime functions the shim calls
 * (struct us_real_api), for unit tests of the modules that issue CUDA work.
 *
 * Everything is synchronous: a copy is a memmove at call time, a host
 * function runs inside cudaLaunchHostFunc, events are complete once recorded
 * (unless fake_cuda.events_busy). Streams and events are small structs with
 * the device that was current when they were made; cudaEventRecord refuses
 * an event of another device than the stream's, like the runtime. Every call
 * is logged (function, stream, event) so a test can check what was issued and
 * in which order; any function can be made to fail on its nth call.
 *
 * Usage: fake_cuda_reset() in the setup (installs the table with
 * us_real_install), then call the module, then assert on fake_cuda_count(),
 * fake_cuda_find() and fake_cuda.* . */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* The functions the fake implements (and logs): the rows of real_api.def
 * whose column rewrite is 1, the functions the copy rewrites call.
 * FAKE_CUDA_IF_REWRITE_##rewrite(...) keeps its argument for those rows only. */
#define FAKE_CUDA_IF_REWRITE_0(...)
#define FAKE_CUDA_IF_REWRITE_1(...) __VA_ARGS__

enum fake_cuda_fn {
#define US_REAL(ret, name, params, args, rewrite) FAKE_CUDA_IF_REWRITE_##rewrite(FAKE_##name,)
#include "real_api.def"
#undef US_REAL
/* and the driver functions the pipelines call (real_driver.def) */
#define US_REAL_DRV(name, params, args) FAKE_##name,
#include "real_driver.def"
#undef US_REAL_DRV
    FAKE_FN_COUNT
};

#define FAKE_CUDA_MAX_LOG 8192

struct fake_cuda_call {
    enum fake_cuda_fn fn;
    cudaStream_t stream; /* the stream argument, as given; NULL where none */
    cudaEvent_t event;   /* the event argument; NULL where none */
    const void *dst, *src;
    size_t bytes;
    int device;          /* current device at the call */
    bool relaxed;        /* the thread's capture mode was relaxed */
    pthread_t thread;    /* the calling thread */
};

struct fake_cuda_state {
    int devices;                   /* devices cudaSetDevice accepts; default 2 */
    bool events_busy;              /* queries say cudaErrorNotReady; syncs still succeed */
    enum cudaStreamCaptureStatus capture; /* what cudaStreamIsCapturing says for every stream */
    cudaError_t capture_query_error;      /* cudaStreamIsCapturing fails with it (cudaSuccess: no) */
    cudaError_t stream_error;      /* cudaStreamQuery/Synchronize return it (an async failure) */
    bool streams_busy;             /* cudaStreamQuery says cudaErrorNotReady (work queued) */
    size_t host_alloc_bytes;       /* total allocated by cudaHostAlloc */
    unsigned host_alloc_flags;     /* flags of the last cudaHostAlloc */
    unsigned stream_flags;         /* flags of the last stream made */
    unsigned event_flags;          /* flags of the last event made */
    size_t ncalls;
    struct fake_cuda_call calls[FAKE_CUDA_MAX_LOG];
};

extern struct fake_cuda_state fake_cuda;

/* Forgets every stream, event and call, disarms failures, installs the table
 * (with no driver table: the pipelines make the runtime's calls). */
void fake_cuda_reset(void);

/* Installs the driver's table too (real_driver.h): its functions do what the
 * runtime's do, logged under their own names (FAKE_cu...). */
void fake_cuda_use_driver(void);

/* The nth call (1: the next) of fn from now fails with err; `count` calls from
 * it (0: every later one). nth 0 disarms. */
void fake_cuda_fail(enum fake_cuda_fn fn, unsigned nth, unsigned count, cudaError_t err);

/* Calls of fn so far (failed ones included). */
unsigned fake_cuda_count(enum fake_cuda_fn fn);

/* Calls that held the calling thread until GPU work ended: every blocking
 * wait the runtime offers the shim (cudaEventSynchronize,
 * cudaStreamSynchronize). 0 is what "no host wait" means here: the fake runs
 * a copy at call time, so a thread that returns without one of these would,
 * on a GPU, have returned before its copy completed. */
unsigned fake_cuda_host_waits(void);

/* Index in fake_cuda.calls of the nth (0-based) call of fn, or -1. */
int fake_cuda_find(enum fake_cuda_fn fn, unsigned nth);

/* The device a fake stream or event was made on (-1: not a fake handle). */
int fake_cuda_stream_device(cudaStream_t s);
int fake_cuda_event_device(cudaEvent_t e);

/* A user stream of the fake on `device` (made without logging). */
cudaStream_t fake_cuda_user_stream(int device);

/* Calls made while the thread was not in relaxed capture mode (the exchange
 * itself and cudaSetDevice not counted). */
unsigned fake_cuda_calls_not_relaxed(void);

/* --- helpers for the shim's pipeline tests ------------------------------------ */

struct us_copy;

/* Installs a configuration: the defaults with these staging options (the
 * thresholds 0). */
void fake_cuda_config(size_t chunk_bytes, unsigned slots, size_t pinned_max);

/* Captures the shim's log lines from now on (fake_cuda_log_count reads them). */
void fake_cuda_log_capture(void);

/* A test's start: the fake reset, the options set (as fake_cuda_config), the
 * staging pool forgotten, the log captured. fake_cuda_teardown undoes the
 * capture (a cmocka teardown). */
void fake_cuda_begin(size_t chunk_bytes, unsigned slots, size_t pinned_max);
int fake_cuda_teardown(void **state);
/* Grows the staging pool to n free slots of slot_bytes (one allocation
 * each), as n copies of 8 x slot_bytes would. */
void fake_cuda_warm_pool(unsigned n, size_t slot_bytes);
/* fake_cuda_begin, then the pool warmed to nslots slots of chunk_bytes, then
 * the call log and counts cleared: a test of a process past its first copies. */
void fake_cuda_begin_warm(size_t chunk_bytes, unsigned slots, size_t pinned_max, unsigned nslots);
/* Lines captured that contain `text`. */
unsigned fake_cuda_log_count(const char *text);

/* A classified copy as copy.c hands it to a pipeline. Devices -1: host memory
 * (pageable). */
void fake_cuda_copy(struct us_copy *c, int api, void *dst, int dst_device, const void *src, int src_device,
                    size_t bytes, cudaStream_t stream);

/* A pattern that differs at every offset (seeded), and its check. */
/* Copies `bytes` from src+3 (src_device; -1: pageable host) to dst+5
 * (dst_device) through `pipeline`. When it did the copy and succeeded, checks
 * the data, that the source was only read, and that nothing around the
 * destination was touched. Returns the pipeline's answer. */
struct us_ctx;
bool fake_cuda_copy_checked(bool (*pipeline)(const struct us_copy *, const struct us_ctx *, cudaError_t *), int api, size_t bytes,
                            cudaStream_t stream, int src_device, int dst_device, cudaError_t *result);
void fake_cuda_fill(unsigned char *p, size_t n, unsigned seed);
bool fake_cuda_check(const unsigned char *p, size_t n, unsigned seed);

#endif
