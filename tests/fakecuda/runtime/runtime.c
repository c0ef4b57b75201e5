/* runtime.c - the simulated libcudart.so.13. Like the real runtime, it
 * holds no device state of its own: it dlopens the driver (libcuda.so.1),
 * takes cuGetProcAddress_v2 with dlsym, looks cuGetProcAddress up through
 * itself, and takes the driver entry points of its copies and stream
 * synchronizations from it, each
 * twice (flags 0, and the per-thread flag for the _ptsz/_ptds variant). So a
 * preload that interposes the driver layer sees the runtime's copies there,
 * as on a real machine.
 *
 * Every other runtime entry point is a trampoline (trampolines.S) into the
 * simulation's own function of that name inside libcuda.so.1 (the
 * simulation keeps one state for both layers), found by name through the
 * driver's private fcdrv_runtime_entry. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ptsz.h"

typedef void (*rt_fn)(void);

#define RT_NAME(name) #name,
static const char *const rt_names[] = {
#include "names.h"
};
#undef RT_NAME

__attribute__((visibility("hidden"))) rt_fn fcrt_slots[sizeof rt_names / sizeof rt_names[0]];

static void *driver_handle;
static cudaError_t (*runtime_error)(cudaError_t err); /* the simulation's fc_ret: the thread's last error */

static void die(const char *what)
{
    fprintf(stderr, "fakecuda libcudart: %s\n", what);
    abort();
}

/* At load: the trampolines must work from the first call on. */
__attribute__((constructor)) static void load_driver(void)
{
    driver_handle = dlopen("libcuda.so.1", RTLD_NOW);
    if (driver_handle == NULL) {
        /* A sanitizer's dlopen interceptor loses this library's RUNPATH
         * ($ORIGIN): take the driver beside it by path. */
        Dl_info self;
        char path[4096];
        const char *slash;
        if (dladdr((void *)load_driver, &self) != 0 && self.dli_fname != NULL &&
            (slash = strrchr(self.dli_fname, '/')) != NULL &&
            snprintf(path, sizeof path, "%.*s/libcuda.so.1", (int)(slash - self.dli_fname), self.dli_fname) <
                (int)sizeof path)
            driver_handle = dlopen(path, RTLD_NOW);
    }
    if (driver_handle == NULL)
        die(dlerror());
    rt_fn (*entry)(const char *) = (rt_fn(*)(const char *))dlsym(driver_handle, "fcdrv_runtime_entry");
    if (entry == NULL)
        die("libcuda.so.1 is not the simulated driver (no fcdrv_runtime_entry)");
    for (size_t i = 0; i < sizeof rt_names / sizeof rt_names[0]; i++)
        if ((fcrt_slots[i] = entry(rt_names[i])) == NULL)
            die(rt_names[i]);
    runtime_error = (cudaError_t(*)(cudaError_t))entry("fc_ret");
    if (runtime_error == NULL)
        die("fc_ret");
}

/* --- the driver entry points, through cuGetProcAddress ------------------------------------ */

struct driver_api {
    CUresult (*htod[2])(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh[2])(void *, CUdeviceptr, size_t);
    CUresult (*dtod[2])(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*copy[2])(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*htod_async[2])(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*dtoh_async[2])(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*dtod_async[2])(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*copy_async[2])(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*peer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
    CUresult (*peer_async)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*stream_sync[2])(CUstream);
};

static struct driver_api drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static _Atomic(CUcontext) primaries[64];

#define RT_CUDA_VERSION 13000

static void take(CUresult (*get)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *),
                 const char *name, cuuint64_t flags, void *slot)
{
    CUdriverProcAddressQueryResult status;
    if (get(name, (void **)slot, RT_CUDA_VERSION, flags, &status) != CUDA_SUCCESS || *(void **)slot == NULL)
        die(name);
}

static void resolve_driver(void)
{
    typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
    getproc_v2_fn first = (getproc_v2_fn)dlsym(driver_handle, "cuGetProcAddress_v2");
    if (first == NULL)
        die("no cuGetProcAddress_v2 in libcuda.so.1");
    getproc_v2_fn get = NULL;
    take(first, "cuGetProcAddress", 0, &get); /* 13000 > 12000: the 5-argument form */
    const cuuint64_t variants[2] = {CU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM};
    for (int pt = 0; pt < 2; pt++) {
        take(get, "cuMemcpyHtoD", variants[pt], &drv.htod[pt]);
        take(get, "cuMemcpyDtoH", variants[pt], &drv.dtoh[pt]);
        take(get, "cuMemcpyDtoD", variants[pt], &drv.dtod[pt]);
        take(get, "cuMemcpy", variants[pt], &drv.copy[pt]);
        take(get, "cuMemcpyHtoDAsync", variants[pt], &drv.htod_async[pt]);
        take(get, "cuMemcpyDtoHAsync", variants[pt], &drv.dtoh_async[pt]);
        take(get, "cuMemcpyDtoDAsync", variants[pt], &drv.dtod_async[pt]);
        take(get, "cuMemcpyAsync", variants[pt], &drv.copy_async[pt]);
        take(get, "cuStreamSynchronize", variants[pt], &drv.stream_sync[pt]);
    }
    /* peer copies are legacy-stream calls even in per-thread builds */
    take(get, "cuMemcpyPeer", CU_GET_PROC_ADDRESS_LEGACY_STREAM, &drv.peer);
    take(get, "cuMemcpyPeerAsync", CU_GET_PROC_ADDRESS_LEGACY_STREAM, &drv.peer_async);
    take(get, "cuDevicePrimaryCtxRetain", 0, &drv.primary_retain);
}

static const struct driver_api *driver(void)
{
    pthread_once(&drv_once, resolve_driver);
    return &drv;
}

/* A driver result as the runtime returns it: the simulated driver's codes
 * are the runtime's numbers, and a failure is also the thread's last error
 * (cudaGetLastError), as the real runtime records it after the driver call. */
static cudaError_t rt(CUresult rc)
{
    return rc == CUDA_SUCCESS ? cudaSuccess : runtime_error((cudaError_t)rc);
}

#define DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

/* cudaMemcpy[_ptds]: the synchronous driver copy of kind's direction;
 * host-to-host and cudaMemcpyDefault take cuMemcpy (the pointers decide). */
static cudaError_t copy_sync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, int pt)
{
    const struct driver_api *d = driver();
    switch (kind) {
    case cudaMemcpyHostToDevice: return rt(d->htod[pt](DPTR(dst), src, n));
    case cudaMemcpyDeviceToHost: return rt(d->dtoh[pt](dst, DPTR(src), n));
    case cudaMemcpyDeviceToDevice: return rt(d->dtod[pt](DPTR(dst), DPTR(src), n));
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault: return rt(d->copy[pt](DPTR(dst), DPTR(src), n));
    default: return runtime_error(cudaErrorInvalidMemcpyDirection);
    }
}

static cudaError_t copy_async(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s, int pt)
{
    const struct driver_api *d = driver();
    CUstream cs = (CUstream)s;
    switch (kind) {
    case cudaMemcpyHostToDevice: return rt(d->htod_async[pt](DPTR(dst), src, n, cs));
    case cudaMemcpyDeviceToHost: return rt(d->dtoh_async[pt](dst, DPTR(src), n, cs));
    case cudaMemcpyDeviceToDevice: return rt(d->dtod_async[pt](DPTR(dst), DPTR(src), n, cs));
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault: return rt(d->copy_async[pt](DPTR(dst), DPTR(src), n, cs));
    default: return runtime_error(cudaErrorInvalidMemcpyDirection);
    }
}

/* The runtime names devices, the driver their primary contexts (retained
 * once, held for the life of the process, as the runtime does). */
static cudaError_t primary_of(int device, CUcontext *out)
{
    if (device < 0 || device >= (int)(sizeof primaries / sizeof primaries[0]))
        return runtime_error(cudaErrorInvalidDevice);
    CUcontext ctx = primaries[device];
    if (ctx == NULL) {
        CUresult rc = driver()->primary_retain(&ctx, device);
        if (rc != CUDA_SUCCESS)
            return runtime_error(rt(rc));
        CUcontext expected = NULL;
        if (!__atomic_compare_exchange_n(&primaries[device], &expected, ctx, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            ctx = expected; /* another thread retained it first; ours stays retained, harmlessly */
    }
    *out = ctx;
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return copy_sync(dst, src, count, kind, 0);
}

cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return copy_sync(dst, src, count, kind, 1);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return copy_async(dst, src, count, kind, stream, 0);
}

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return copy_async(dst, src, count, kind, stream, 1);
}

/* cudaStreamSynchronize[_ptsz]: cuStreamSynchronize of the same variant, as
 * the real runtime does (a preload at the driver layer sees the wait there). */
cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    return rt(driver()->stream_sync[0]((CUstream)stream));
}

cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    return rt(driver()->stream_sync[1]((CUstream)stream));
}

cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
    CUcontext dctx, sctx;
    cudaError_t err = primary_of(dstDevice, &dctx);
    if (err == cudaSuccess)
        err = primary_of(srcDevice, &sctx);
    if (err != cudaSuccess)
        return err;
    return rt(driver()->peer(DPTR(dst), dctx, DPTR(src), sctx, count));
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count, cudaStream_t stream)
{
    CUcontext dctx, sctx;
    cudaError_t err = primary_of(dstDevice, &dctx);
    if (err == cudaSuccess)
        err = primary_of(srcDevice, &sctx);
    if (err != cudaSuccess)
        return err;
    return rt(driver()->peer_async(DPTR(dst), dctx, DPTR(src), sctx, count, (CUstream)stream));
}
