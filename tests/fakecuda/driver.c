/* driver.c - the simulated driver API (libcuda.so.1): contexts, and the
 * driver entry points that the runtime, driver-API programs and the shim
 * call, on top of the same simulation as the runtime API.
 *
 * Error codes: the simulation returns runtime codes; the driver returns the
 * same numbers, which are the driver's codes for everything it gives here
 * (cudaErrorInvalidValue 1 = CUDA_ERROR_INVALID_VALUE, 400 = INVALID_HANDLE,
 * 600 = NOT_READY, 900 = STREAM_CAPTURE_UNSUPPORTED, ...).
 *
 * cuGetProcAddress follows the real driver's contract: a name without its
 * version suffix, the caller's CUDA version (the newest variant that version
 * knows is returned, with its ABI) and flags (the per-thread-default-stream
 * flag picks the _ptsz/_ptds variant). The table mirrors cudaTypedefs.h:
 * every version of a name the table lists is implemented, so no request gets
 * a function of another ABI. The 32-bit forms before 3.2 (cuMemAlloc of
 * CUDA 2.0, ...) are left out: asking for them finds no symbol of that version. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "fc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CUresult cu(cudaError_t err)
{
    return (CUresult)err;
}

static bool enter(void)
{
    return fc_enter();
}

#define ENTER()                                                               \
    do {                                                                       \
        if (!enter())                                                          \
            return CUDA_ERROR_NOT_INITIALIZED;                                 \
    } while (0)

static struct fc_ctx *ctx_of(CUcontext c)
{
    return (struct fc_ctx *)c;
}

static bool valid_ordinal(CUdevice dev)
{
    return dev >= 0 && dev < fc_g.ndev;
}

/* --- initialization, devices ------------------------------------------------------------ */

CUresult cuInit(unsigned int flags)
{
    ENTER();
    return flags != 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version)
{
    if (version == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 13000;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    ENTER();
    if (count == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *count = fc_g.ndev;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    ENTER();
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    ENTER();
    if (name == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "fakecuda device %d", dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attrib, CUdevice dev)
{
    ENTER();
    /* the runtime's attribute numbers are the driver's */
    return cu(cudaDeviceGetAttribute(value, (enum cudaDeviceAttr)attrib, dev));
}

/* --- contexts ----------------------------------------------------------------------------- */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    ENTER();
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fc_g.mu);
    fc_g.primary[dev].retains++;
    pthread_mutex_unlock(&fc_g.mu);
    *pctx = (CUcontext)&fc_g.primary[dev];
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    ENTER();
    if (!valid_ordinal(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&fc_g.mu);
    if (fc_g.primary[dev].retains > 0)
        fc_g.primary[dev].retains--;
    else
        rc = CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_unlock(&fc_g.mu);
    return rc;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return cuDevicePrimaryCtxRelease(dev);
}

/* Active once retained, or once the runtime worked in it (fc_current_ctx). */
CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    ENTER();
    if (flags == NULL || active == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fc_g.mu);
    *active = fc_g.primary[dev].retains > 0 || __atomic_load_n(&fc_g.primary[dev].used, __ATOMIC_RELAXED);
    *flags = fc_g.primary[dev].flags;
    pthread_mutex_unlock(&fc_g.mu);
    return CUDA_SUCCESS;
}

/* The calling thread's context stack: cuCtxCreate and cuCtxPushCurrent push,
 * cuCtxPopCurrent pops, cuCtxSetCurrent replaces the top. The top is the
 * simulation's current context (fc_set_current_ctx). */
#define CTX_STACK_MAX 32
static __thread struct fc_ctx *tls_stack[CTX_STACK_MAX];
static __thread int tls_depth;

static CUresult push_ctx(struct fc_ctx *ctx)
{
    if (tls_depth == CTX_STACK_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    tls_stack[tls_depth++] = fc_current_ctx();
    fc_set_current_ctx(ctx);
    return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    ENTER();
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    static unsigned long long next_id = 1000; /* under fc_g.mu; primary contexts are 1..devices */
    pthread_mutex_lock(&fc_g.mu);
    /* FAKECUDA_CTX_REUSE=1: a destroyed context's address again, as a real
     * driver's allocator may give it, so that a preload keyed by the handle
     * alone meets its stale entries */
    struct fc_ctx *ctx = NULL;
    bool reused = false;
    if (fc_cfg()->ctx_reuse)
        for (ctx = fc_g.created; ctx != NULL && ctx->live; ctx = ctx->next)
            ;
    if (ctx != NULL)
        reused = true;
    else if ((ctx = calloc(1, sizeof *ctx)) == NULL) {
        pthread_mutex_unlock(&fc_g.mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct fc_ctx *next = reused ? ctx->next : fc_g.created;
    *ctx = (struct fc_ctx){.device = dev, .live = true, .flags = flags, .id = ++next_id, .next = next};
    ctx->legacy = fc_stream_new_locked(FC_STREAM_LEGACY, dev, 0, 0);
    if (ctx->legacy == NULL) {
        ctx->live = false;
        if (!reused)
            free(ctx);
        pthread_mutex_unlock(&fc_g.mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    ctx->legacy->ctx = ctx;
    if (!reused)
        fc_g.created = ctx;
    pthread_mutex_unlock(&fc_g.mu);
    CUresult rc = push_ctx(ctx);
    if (rc == CUDA_SUCCESS)
        *pctx = (CUcontext)ctx;
    return rc;
}

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int nparams, unsigned int flags, CUdevice dev)
{
    (void)params;
    (void)nparams;
    return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
    (void)params;
    return ctx_create(pctx, flags, dev);
}

/* Waits for the context's work, then its streams and events are invalid
 * handles, and the pinned memory allocated (registered) while it was current
 * is freed (unregistered); a thread where it was current falls back to its
 * device's primary context. Its device memory stays (not modelled). */
CUresult cuCtxDestroy_v2(CUcontext c)
{
    ENTER();
    struct fc_ctx *ctx = ctx_of(c);
    if (ctx == NULL || ctx->primary || !ctx->live)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&fc_g.mu);
    (void)fc_ctx_sync_locked(ctx);
    struct fc_stream *s, *stmp;
    HASH_ITER(hh, fc_g.handles, s, stmp) {
        if (s->ctx == ctx) {
            HASH_DEL(fc_g.handles, s);
            s->live = false;
        }
    }
    struct fc_event *e, *etmp;
    HASH_ITER(hh, fc_g.events, e, etmp) {
        if (e->ctx == ctx) {
            HASH_DEL(fc_g.events, e);
            e->gen++;
            e->next_free = fc_g.free_events;
            fc_g.free_events = e;
        }
    }
    ctx->live = false;
    pthread_mutex_unlock(&fc_g.mu);
    fc_stat_add(pinned_released_by_ctx_destroy, fc_mem_release_ctx(ctx));
    if (fc_current_ctx() == ctx)
        fc_set_current_ctx(&fc_g.primary[ctx->device]);
    for (int i = 0; i < tls_depth; i++)
        if (tls_stack[i] == ctx)
            tls_stack[i] = &fc_g.primary[ctx->device];
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy(CUcontext c)
{
    return cuCtxDestroy_v2(c);
}

CUresult cuCtxSetCurrent(CUcontext c)
{
    ENTER();
    struct fc_ctx *ctx = ctx_of(c);
    if (ctx != NULL && !ctx->live)
        return CUDA_ERROR_INVALID_CONTEXT;
    fc_set_current_ctx(ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    ENTER();
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)fc_current_ctx();
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext c)
{
    ENTER();
    struct fc_ctx *ctx = ctx_of(c);
    if (ctx == NULL || !ctx->live)
        return CUDA_ERROR_INVALID_CONTEXT;
    return push_ctx(ctx);
}

CUresult cuCtxPushCurrent(CUcontext c)
{
    return cuCtxPushCurrent_v2(c);
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    ENTER();
    if (tls_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx != NULL)
        *pctx = (CUcontext)fc_current_ctx();
    fc_set_current_ctx(tls_stack[--tls_depth]);
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    return cuCtxPopCurrent_v2(pctx);
}

/* A context's id: unique in the process, also for a context at the address
 * of a destroyed one (FAKECUDA_CTX_REUSE). NULL: the current context. */
CUresult cuCtxGetId(CUcontext c, unsigned long long *id)
{
    ENTER();
    if (id == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *ctx = c != NULL ? ctx_of(c) : fc_current_ctx();
    if (!ctx->live)
        return CUDA_ERROR_INVALID_CONTEXT;
    *id = ctx->id;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    ENTER();
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *device = fc_current_device();
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext c)
{
    ENTER();
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c != NULL ? ctx_of(c)->device : fc_current_device();
    return CUDA_SUCCESS;
}

/* Peer access from the current context's device to peerContext's, as the
 * runtime's cudaDeviceEnablePeerAccess sets it (fakecuda keeps it per device
 * pair; a static runtime's cudaDeviceEnablePeerAccess is this call). */
CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int flags)
{
    ENTER();
    if (peerContext == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    return cu(cudaDeviceEnablePeerAccess(ctx_of(peerContext)->device, flags));
}

CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
    ENTER();
    if (peerContext == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    return cu(cudaDeviceDisablePeerAccess(ctx_of(peerContext)->device));
}

static CUresult ctx_synchronize(struct fc_ctx *ctx)
{
    ENTER();
    if (!ctx->live)
        return CUDA_ERROR_INVALID_CONTEXT;
    cudaError_t err = fc_capture_check();
    if (err != cudaSuccess)
        return cu(err);
    pthread_mutex_lock(&fc_g.mu);
    err = fc_ctx_sync_locked(ctx);
    pthread_mutex_unlock(&fc_g.mu);
    return cu(err);
}

CUresult cuCtxSynchronize(void)
{
    ENTER();
    return ctx_synchronize(fc_current_ctx());
}

CUresult cuCtxSynchronize_v2(CUcontext c)
{
    ENTER();
    return ctx_synchronize(c != NULL ? ctx_of(c) : fc_current_ctx());
}

/* --- streams and events ------------------------------------------------------------------ */

CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    return cu(cudaStreamCreateWithFlags((cudaStream_t *)phStream, flags));
}

CUresult cuStreamDestroy_v2(CUstream s)
{
    return cu(cudaStreamDestroy((cudaStream_t)s));
}

CUresult cuStreamDestroy(CUstream s)
{
    return cuStreamDestroy_v2(s);
}

CUresult cuStreamSynchronize(CUstream s) { return cu(cudaStreamSynchronize((cudaStream_t)s)); }
CUresult cuStreamSynchronize_ptsz(CUstream s) { return cu(cudaStreamSynchronize_ptsz((cudaStream_t)s)); }
CUresult cuStreamQuery(CUstream s) { return cu(cudaStreamQuery((cudaStream_t)s)); }
CUresult cuStreamQuery_ptsz(CUstream s) { return cu(cudaStreamQuery_ptsz((cudaStream_t)s)); }

CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    return cu(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, flags));
}

CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags)
{
    return cu(cudaStreamWaitEvent_ptsz((cudaStream_t)s, (cudaEvent_t)e, flags));
}

CUresult cuStreamGetFlags(CUstream s, unsigned int *flags) { return cu(cudaStreamGetFlags((cudaStream_t)s, flags)); }
CUresult cuStreamGetFlags_ptsz(CUstream s, unsigned int *flags) { return cu(cudaStreamGetFlags_ptsz((cudaStream_t)s, flags)); }

CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    return cu(cudaStreamIsCapturing((cudaStream_t)s, (enum cudaStreamCaptureStatus *)status));
}

CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status)
{
    return cu(cudaStreamIsCapturing_ptsz((cudaStream_t)s, (enum cudaStreamCaptureStatus *)status));
}

/* The context a stream belongs to: a user stream's own, the legacy and
 * per-thread handles' the current one (tests/driver stream_ctx checks the
 * GPU answers the same). */
static CUresult stream_get_ctx(CUstream s, CUcontext *pctx, bool per_thread)
{
    ENTER();
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *fs;
    cudaError_t err = fc_stream_get_any((cudaStream_t)s, per_thread, &fs);
    if (err == cudaSuccess)
        *pctx = (CUcontext)fs->ctx;
    pthread_mutex_unlock(&fc_g.mu);
    return cu(err);
}

CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx) { return stream_get_ctx(s, pctx, false); }
CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext *pctx) { return stream_get_ctx(s, pctx, true); }

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    return cu(cudaThreadExchangeStreamCaptureMode((enum cudaStreamCaptureMode *)mode));
}

CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data) { return cu(cudaLaunchHostFunc((cudaStream_t)s, fn, data)); }
CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *data) { return cu(cudaLaunchHostFunc_ptsz((cudaStream_t)s, fn, data)); }

CUresult cuEventCreate(CUevent *phEvent, unsigned int flags)
{
    return cu(cudaEventCreateWithFlags((cudaEvent_t *)phEvent, flags));
}

CUresult cuEventDestroy_v2(CUevent e) { return cu(cudaEventDestroy((cudaEvent_t)e)); }
CUresult cuEventDestroy(CUevent e) { return cuEventDestroy_v2(e); }
CUresult cuEventRecord(CUevent e, CUstream s) { return cu(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s)); }
CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return cu(cudaEventRecord_ptsz((cudaEvent_t)e, (cudaStream_t)s)); }
CUresult cuEventSynchronize(CUevent e) { return cu(cudaEventSynchronize((cudaEvent_t)e)); }
CUresult cuEventQuery(CUevent e) { return cu(cudaEventQuery((cudaEvent_t)e)); }

/* --- memory ----------------------------------------------------------------------------- */

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    if (dptr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaSuccess)
        *dptr = (CUdeviceptr)p;
    return cu(err);
}

CUresult cuMemFree_v2(CUdeviceptr p) { return cu(cudaFree((void *)p)); }
CUresult cuMemAllocHost_v2(void **pp, size_t bytes) { return cu(cudaMallocHost(pp, bytes)); }
/* CU_MEMHOSTALLOC_* are cudaHostAlloc* */
CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) { return cu(cudaHostAlloc(pp, bytes, flags)); }
CUresult cuMemFreeHost(void *p) { return cu(cudaFreeHost(p)); }
/* CU_MEMHOSTREGISTER_* are cudaHostRegister*; the first form is the one
 * before CUDA 6.5, the same function (cuda.h names it the second) */
#undef cuMemHostRegister
CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags) { return cu(cudaHostRegister(p, bytes, flags)); }
CUresult cuMemHostRegister(void *p, size_t bytes, unsigned int flags) { return cuMemHostRegister_v2(p, bytes, flags); }
CUresult cuMemHostUnregister(void *p) { return cu(cudaHostUnregister(p)); }

/* --- copies: each the runtime copy of the same direction ----------------------------------- */

#define DPTR(p) ((void *)(uintptr_t)(p))

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) { return cu(cudaMemcpy(DPTR(dst), src, n, cudaMemcpyHostToDevice)); }
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n) { return cu(cudaMemcpy_ptds(DPTR(dst), src, n, cudaMemcpyHostToDevice)); }
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) { return cu(cudaMemcpy(dst, DPTR(src), n, cudaMemcpyDeviceToHost)); }
CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) { return cu(cudaMemcpy_ptds(dst, DPTR(src), n, cudaMemcpyDeviceToHost)); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) { return cu(cudaMemcpy(DPTR(dst), DPTR(src), n, cudaMemcpyDeviceToDevice)); }
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { return cu(cudaMemcpy_ptds(DPTR(dst), DPTR(src), n, cudaMemcpyDeviceToDevice)); }
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { return cu(cudaMemcpy(DPTR(dst), DPTR(src), n, cudaMemcpyDefault)); }
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { return cu(cudaMemcpy_ptds(DPTR(dst), DPTR(src), n, cudaMemcpyDefault)); }

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) { return cu(cudaMemcpyAsync(DPTR(dst), src, n, cudaMemcpyHostToDevice, (cudaStream_t)s)); }
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s) { return cu(cudaMemcpyAsync_ptsz(DPTR(dst), src, n, cudaMemcpyHostToDevice, (cudaStream_t)s)); }
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) { return cu(cudaMemcpyAsync(dst, DPTR(src), n, cudaMemcpyDeviceToHost, (cudaStream_t)s)); }
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s) { return cu(cudaMemcpyAsync_ptsz(dst, DPTR(src), n, cudaMemcpyDeviceToHost, (cudaStream_t)s)); }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return cu(cudaMemcpyAsync(DPTR(dst), DPTR(src), n, cudaMemcpyDeviceToDevice, (cudaStream_t)s)); }
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return cu(cudaMemcpyAsync_ptsz(DPTR(dst), DPTR(src), n, cudaMemcpyDeviceToDevice, (cudaStream_t)s)); }
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return cu(cudaMemcpyAsync(DPTR(dst), DPTR(src), n, cudaMemcpyDefault, (cudaStream_t)s)); }
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return cu(cudaMemcpyAsync_ptsz(DPTR(dst), DPTR(src), n, cudaMemcpyDefault, (cudaStream_t)s)); }

/* Peer copies name contexts; the simulation's peer copy takes their devices.
 * The per-thread variants take the same path (the runtime has none). */
static int ctx_device(CUcontext c)
{
    return c != NULL ? ctx_of(c)->device : -1;
}

CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n)
{
    return cu(cudaMemcpyPeer(DPTR(dst), ctx_device(dctx), DPTR(src), ctx_device(sctx), n));
}

CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n)
{
    return cuMemcpyPeer(dst, dctx, src, sctx, n);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream s)
{
    return cu(cudaMemcpyPeerAsync(DPTR(dst), ctx_device(dctx), DPTR(src), ctx_device(sctx), n, (cudaStream_t)s));
}

CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream s)
{
    return cuMemcpyPeerAsync(dst, dctx, src, sctx, n, s);
}

/* --- pointer attributes ------------------------------------------------------------------- */

static CUresult pointer_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr, bool lenient)
{
    struct fc_mem_info m;
    fc_mem_lookup(DPTR(ptr), &m);
    bool known = m.kind != FC_MEM_PAGEABLE;
    if (!known && !lenient)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = known ? (CUcontext)&fc_g.primary[m.device] : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = !known ? 0 : m.kind == FC_MEM_DEVICE ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = known ? ptr : 0;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *(void **)data = known && m.kind != FC_MEM_DEVICE ? DPTR(ptr) : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = known ? m.device : -2;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(unsigned *)data = 0;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    ENTER();
    if (data == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return pointer_attribute(data, attr, ptr, false);
}

/* Unlike cuPointerGetAttribute, unknown memory is no error: its attributes read 0. */
CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data, CUdeviceptr ptr)
{
    ENTER();
    if (attrs == NULL || data == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        CUresult rc = pointer_attribute(data[i], attrs[i], ptr, true);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

/* --- errors --------------------------------------------------------------------------------- */

static const struct { CUresult code; const char *name, *text; } error_names[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
};

static const char *error_field(CUresult err, bool name)
{
    for (size_t i = 0; i < sizeof error_names / sizeof error_names[0]; i++)
        if (error_names[i].code == err)
            return name ? error_names[i].name : error_names[i].text;
    return NULL;
}

CUresult cuGetErrorName(CUresult err, const char **out)
{
    if (out == NULL || (*out = error_field(err, true)) == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult err, const char **out)
{
    if (out == NULL || (*out = error_field(err, false)) == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* --- cuGetProcAddress ----------------------------------------------------------------------- */

/* One row per (name, version) of cudaTypedefs.h: `legacy` is the plain
 * variant, `per_thread` the _ptsz/_ptds one (NULL: the same function). */
struct proc_row {
    const char *name;
    int version;
    void *legacy, *per_thread;
};

#define ROW(name, version, fn) {name, version, (void *)fn, NULL}
#define ROW_PT(name, version, fn, pt) {name, version, (void *)fn, (void *)pt}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status);

static const struct proc_row proc_rows[] = {
    ROW("cuGetProcAddress", 11030, cuGetProcAddress),
    ROW("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    ROW("cuInit", 2000, cuInit),
    ROW("cuDriverGetVersion", 2020, cuDriverGetVersion),
    ROW("cuDeviceGet", 2000, cuDeviceGet),
    ROW("cuDeviceGetCount", 2000, cuDeviceGetCount),
    ROW("cuDeviceGetName", 2000, cuDeviceGetName),
    ROW("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    ROW("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    ROW("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    ROW("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    ROW("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
    ROW("cuCtxCreate", 2000, cuCtxCreate),
    ROW("cuCtxCreate", 3020, cuCtxCreate_v2),
    ROW("cuCtxCreate", 11040, cuCtxCreate_v3),
    ROW("cuCtxCreate", 12050, cuCtxCreate_v4),
    ROW("cuCtxDestroy", 2000, cuCtxDestroy),
    ROW("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    ROW("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    ROW("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    ROW("cuCtxPushCurrent", 2000, cuCtxPushCurrent),
    ROW("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    ROW("cuCtxPopCurrent", 2000, cuCtxPopCurrent),
    ROW("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    ROW("cuCtxGetId", 12000, cuCtxGetId),
    ROW("cuCtxGetDevice", 2000, cuCtxGetDevice),
    ROW("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
    ROW("cuCtxEnablePeerAccess", 4000, cuCtxEnablePeerAccess),
    ROW("cuCtxDisablePeerAccess", 4000, cuCtxDisablePeerAccess),
    ROW("cuCtxSynchronize", 2000, cuCtxSynchronize),
    ROW("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
    ROW("cuStreamCreate", 2000, cuStreamCreate),
    ROW("cuStreamDestroy", 2000, cuStreamDestroy),
    ROW("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    ROW_PT("cuStreamSynchronize", 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
    ROW_PT("cuStreamQuery", 2000, cuStreamQuery, cuStreamQuery_ptsz),
    ROW_PT("cuStreamWaitEvent", 3020, cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
    ROW_PT("cuStreamGetFlags", 5050, cuStreamGetFlags, cuStreamGetFlags_ptsz),
    ROW_PT("cuStreamIsCapturing", 10000, cuStreamIsCapturing, cuStreamIsCapturing_ptsz),
    ROW("cuThreadExchangeStreamCaptureMode", 10010, cuThreadExchangeStreamCaptureMode),
    ROW_PT("cuLaunchHostFunc", 10000, cuLaunchHostFunc, cuLaunchHostFunc_ptsz),
    ROW("cuEventCreate", 2000, cuEventCreate),
    ROW("cuEventDestroy", 2000, cuEventDestroy),
    ROW("cuEventDestroy", 4000, cuEventDestroy_v2),
    ROW_PT("cuEventRecord", 2000, cuEventRecord, cuEventRecord_ptsz),
    ROW("cuEventSynchronize", 2000, cuEventSynchronize),
    ROW("cuEventQuery", 2000, cuEventQuery),
    ROW("cuMemAlloc", 3020, cuMemAlloc_v2),
    ROW("cuMemFree", 3020, cuMemFree_v2),
    ROW("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    ROW("cuMemHostAlloc", 2020, cuMemHostAlloc),
    ROW("cuMemFreeHost", 2000, cuMemFreeHost),
    ROW("cuMemHostRegister", 4000, cuMemHostRegister),
    ROW("cuMemHostRegister", 6050, cuMemHostRegister_v2),
    ROW("cuMemHostUnregister", 4000, cuMemHostUnregister),
    ROW_PT("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds),
    ROW_PT("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds),
    ROW_PT("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds),
    ROW_PT("cuMemcpy", 4000, cuMemcpy, cuMemcpy_ptds),
    ROW_PT("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz),
    ROW_PT("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz),
    ROW_PT("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz),
    ROW_PT("cuMemcpyAsync", 4000, cuMemcpyAsync, cuMemcpyAsync_ptsz),
    ROW_PT("cuMemcpyPeer", 4000, cuMemcpyPeer, cuMemcpyPeer_ptds),
    ROW_PT("cuMemcpyPeerAsync", 4000, cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz),
    ROW("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
    ROW("cuPointerGetAttributes", 7000, cuPointerGetAttributes),
    ROW("cuGetErrorName", 6000, cuGetErrorName),
    ROW("cuGetErrorString", 6000, cuGetErrorString),
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    if (symbol == NULL || pfn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    const struct proc_row *best = NULL;
    bool named = false;
    for (size_t i = 0; i < sizeof proc_rows / sizeof proc_rows[0]; i++) {
        const struct proc_row *r = &proc_rows[i];
        if (strcmp(r->name, symbol) != 0)
            continue;
        named = true;
        if (r->version <= version && (best == NULL || r->version > best->version))
            best = r;
    }
    if (status != NULL)
        *status = best != NULL ? CU_GET_PROC_ADDRESS_SUCCESS
                  : named      ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                               : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (best == NULL)
        return CUDA_ERROR_NOT_FOUND;
    bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    *pfn = per_thread && best->per_thread != NULL ? best->per_thread : best->legacy;
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
