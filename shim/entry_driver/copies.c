/* copies.c - the wrapped driver copy functions and the device-wide wait.
 *
 * Each copy wrapper fills a struct us_copy from its parameters (copy.h's
 * shapes: the same fields a runtime export fills, the real function to call
 * natively, the driver's per-thread flag of its name) and runs the one chain,
 * us_copy_run. Stream handles mean what they mean to the runtime: 0 is the
 * legacy stream in a plain function and the per-thread stream in a _ptsz/
 * _ptds one, 0x1 (CU_STREAM_LEGACY) and 0x2 (CU_STREAM_PER_THREAD) are those
 * streams everywhere. A call that arrives while the shim is at work on this
 * thread (the dynamic runtime's native copy, the shim's own pipelines), or
 * while the shim steps aside, goes to the real function unchanged. */
#include "driver_layer.h"
#include "hot.h"

#include <pthread.h>

#include "context.h"
#include "device_state.h"
#include "classify.h"
#include "engine_late.h"
#include "log.h"
#include "state.h"
#include "watch.h"

/* The device of a context (us_drv_context_device), for cuMemcpyPeer* and
 * peer access: -2 when it cannot be told (a peer copy's devices then
 * disagree with its pointers: native). */
static CUresult (*get_device_v2)(CUdevice *, CUcontext);
static CUresult (*push)(CUcontext), (*pop)(CUcontext *), (*get_device)(CUdevice *);
static pthread_once_t context_fns_once = PTHREAD_ONCE_INIT;

static void resolve_context_fns(void)
{
    *(void **)&get_device_v2 = us_drv_lookup("cuCtxGetDevice_v2");
    *(void **)&push = us_drv_lookup("cuCtxPushCurrent_v2");
    *(void **)&pop = us_drv_lookup("cuCtxPopCurrent_v2");
    *(void **)&get_device = us_drv_lookup("cuCtxGetDevice");
}

int us_drv_context_device(CUcontext ctx)
{
    pthread_once(&context_fns_once, resolve_context_fns); /* after identification: a wrapper ran */
    CUdevice dev = -2;
    if (ctx == NULL)
        return get_device != NULL && get_device(&dev) == CUDA_SUCCESS ? dev : -2;
    if (get_device_v2 != NULL && get_device_v2(&dev, ctx) == CUDA_SUCCESS)
        return dev;
    /* drivers before CUDA 13: make it current for a moment on this thread */
    if (push == NULL || pop == NULL || get_device == NULL || push(ctx) != CUDA_SUCCESS)
        return -2;
    if (get_device(&dev) != CUDA_SUCCESS)
        dev = -2;
    CUcontext popped;
    pop(&popped);
    return dev;
}

static CUresult run_copy(struct us_copy *c, const void *caller)
{
    static int logged_inside_runtime;
    if (c->driver_fn == NULL)
        return CUDA_ERROR_NOT_FOUND; /* never handed out before its real function is known */
    if (us_passthrough())
        return (CUresult)us_copy_native(c);
    us_state_note_driver_layer(); /* the report says once what this layer cannot reach */
    /* classification and pipelines are runtime calls: a program without a
     * dynamic runtime gets one loaded for the shim's work, else native */
    if (!us_drv_runtime_ready())
        return (CUresult)us_copy_native(c);
    if (us_drv_inside_runtime(caller)) {
        us_log_once(&logged_inside_runtime, US_LOG_INFO,
                    "driver layer: a copy the CUDA runtime makes inside one of its own calls that unstall does not "
                    "intercept (%s, e.g. from cudaMemcpyToSymbol) goes native: rewriting it would re-enter the runtime",
                    us_copy_api_name(c->api));
        return (CUresult)us_copy_native(c);
    }
    if (us_copy_is_peer(c)) {
        c->peer_dst_device = c->peer_dst_ctx != NULL ? us_drv_context_device(c->peer_dst_ctx) : -2;
        c->peer_src_device = c->peer_src_ctx != NULL ? us_drv_context_device(c->peer_src_ctx) : -2;
    }
    return (CUresult)us_copy_run(c);
}

/* A call made while the shim is at work on this thread (the dynamic
 * runtime's native copy that the runtime layer made) is passed on before
 * anything else: every such copy comes through here a second time. */
#define DEFINE_COPY_WRAPPER(id, fn, sync, per_thread, shape)                                                    \
    US_HOT CUresult us_drv_wrap_##fn(US_DRV_PARAMS_##shape)                                                          \
    {                                                                                                         \
        const void *real = us_drv_real(US_DRV_FN_##fn);                                                       \
        if (real != NULL && us_passthrough())                                                                 \
            return ((us_drv_##shape##_fn)real) US_DRV_NAMES_##shape;                                          \
        struct us_copy c = {                                                                                  \
            .api = id, US_DRV_FILL_##shape, .peer_dst_device = -1, .peer_src_device = -1, .driver_fn = real,  \
        };                                                                                                    \
        return run_copy(&c, __builtin_return_address(0));                                                     \
    }
US_DRIVER_COPY_APIS(DEFINE_COPY_WRAPPER)
#undef DEFINE_COPY_WRAPPER

/* cuCtxSynchronize[_v2]: the explicit wait cudaDeviceSynchronize is (the
 * runtime's own call of it arrives marked and passes through). */
static CUresult watched_sync(const char *api, CUresult (*sync0)(void), CUresult (*sync1)(CUcontext), CUcontext ctx)
{
    if (sync0 == NULL && sync1 == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (us_passthrough() || !us_drv_runtime_ready())
        return sync0 != NULL ? sync0() : sync1(ctx);
    us_state_note_call();
    us_state_note_driver_layer();
    struct us_watch w;
    if (!us_watch_begin(&w, US_RULE_explicit_sync, api))
        return (CUresult)US_ERR_FORBIDDEN;
    CUresult rc = sync0 != NULL ? sync0() : sync1(ctx);
    us_watch_end(&w, NULL, US_STREAM_USER, us_current_device(), 0);
    return rc;
}

CUresult us_drv_wrap_cuCtxSynchronize(void)
{
    CUresult (*real)(void);
    *(void **)&real = us_drv_real(US_DRV_FN_cuCtxSynchronize);
    return watched_sync("cuCtxSynchronize", real, NULL, NULL);
}

CUresult us_drv_wrap_cuCtxSynchronize_v2(CUcontext ctx)
{
    CUresult (*real)(CUcontext);
    *(void **)&real = us_drv_real(US_DRV_FN_cuCtxSynchronize_v2);
    return watched_sync("cuCtxSynchronize_v2", NULL, real, ctx);
}

/* cuStreamSynchronize[_ptsz]: the explicit wait cudaStreamSynchronize is in
 * a static runtime or a driver-API program, and where busy_engine_d2d reads
 * a probe of a competing context (engine_late.h). The dynamic runtime's own
 * call arrives marked (its cudaStreamSynchronize is the shim's) or from
 * inside it, and passes through. */
US_HOT static CUresult watched_stream_sync(const char *api, CUresult (*real)(CUstream), CUstream stream, bool per_thread,
                                    const void *caller)
{
    if (real == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (us_passthrough() || !us_drv_runtime_ready() || us_drv_inside_runtime(caller))
        return real(stream);
    us_state_note_call();
    us_state_note_driver_layer();
    struct us_watch w;
    if (!us_watch_begin(&w, US_RULE_explicit_sync, api))
        return (CUresult)US_ERR_FORBIDDEN;
    struct us_engine_sync engine;
    us_engine_sync_begin((cudaStream_t)stream, per_thread, &engine);
    CUresult rc = real(stream);
    us_engine_sync_end(&engine, rc == CUDA_SUCCESS);
    us_watch_end(&w, (cudaStream_t)stream, us_stream_kind_of((cudaStream_t)stream, per_thread), -1, 0);
    return rc;
}

US_HOT CUresult us_drv_wrap_cuStreamSynchronize(CUstream stream)
{
    CUresult (*real)(CUstream);
    *(void **)&real = us_drv_real(US_DRV_FN_cuStreamSynchronize);
    return watched_stream_sync("cuStreamSynchronize", real, stream, false, __builtin_return_address(0));
}

CUresult us_drv_wrap_cuStreamSynchronize_ptsz(CUstream stream)
{
    CUresult (*real)(CUstream);
    *(void **)&real = us_drv_real(US_DRV_FN_cuStreamSynchronize_ptsz);
    return watched_stream_sync("cuStreamSynchronize_ptsz", real, stream, true, __builtin_return_address(0));
}
