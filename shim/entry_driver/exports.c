/* exports.c - the wrapped libcuda functions under their own names, for
 * programs and libraries linked against libcuda (-lcuda) that call them
 * directly: the dynamic linker binds those calls to the first definition in
 * search order, the preloaded shim's. Each export is the wrapper the
 * resolvers hand out (symbols.c): a call before the layer identified
 * libcuda identifies it from the next definition of the same name
 * (us_drv_real). NVIDIA's driver-API samples (vectorAddDrv, matrixMulDrv)
 * are such programs; so is a cuCtxDestroy that a runtime program links
 * directly. With the layer off the exports call the real function at once. */
#include "driver_layer.h"

#include "config.h"

/* cuda.h names some of these by macro (cuCtxDestroy -> cuCtxDestroy_v2, and
 * the per-thread variants when a build asks for them): the exports are the
 * exact symbols */
#undef cuMemcpyHtoD
#undef cuMemcpyDtoH
#undef cuMemcpyDtoD
#undef cuMemcpyHtoDAsync
#undef cuMemcpyDtoHAsync
#undef cuMemcpyDtoDAsync
#undef cuMemcpy
#undef cuMemcpyAsync
#undef cuMemcpyPeer
#undef cuMemcpyPeerAsync
#undef cuCtxDestroy
#undef cuCtxSynchronize
#undef cuGetProcAddress
#undef cuStreamSynchronize
#undef cuMemHostRegister

/* the parameters of copy.h's shapes, by name */
#define EXPORT_ARGS_HTOD dst, src, bytes
#define EXPORT_ARGS_DTOH dst, src, bytes
#define EXPORT_ARGS_DTOD dst, src, bytes
#define EXPORT_ARGS_ANY dst, src, bytes
#define EXPORT_ARGS_PEER dst, dst_ctx, src, src_ctx, bytes
#define EXPORT_ARGS_HTOD_ASYNC EXPORT_ARGS_HTOD, stream
#define EXPORT_ARGS_DTOH_ASYNC EXPORT_ARGS_DTOH, stream
#define EXPORT_ARGS_DTOD_ASYNC EXPORT_ARGS_DTOD, stream
#define EXPORT_ARGS_ANY_ASYNC EXPORT_ARGS_ANY, stream
#define EXPORT_ARGS_PEER_ASYNC EXPORT_ARGS_PEER, stream

#define EXPORT_COPY(id, fn, sync, per_thread, shape)                                  \
    US_DRIVER_EXPORT CUresult fn(US_DRV_PARAMS_##shape);                              \
    US_DRIVER_EXPORT CUresult fn(US_DRV_PARAMS_##shape)                               \
    {                                                                                 \
        if (!us_drv_layer_on()) {                                                     \
            CUresult (*real)(US_DRV_PARAMS_##shape);                                  \
            *(void **)&real = us_drv_real(US_DRV_FN_##fn);                            \
            return real != NULL ? real(EXPORT_ARGS_##shape) : CUDA_ERROR_NOT_FOUND;   \
        }                                                                             \
        return us_drv_wrap_##fn(EXPORT_ARGS_##shape);                                 \
    }
US_DRIVER_COPY_APIS(EXPORT_COPY)
#undef EXPORT_COPY

#define EXPORT_OTHER(fn, params, args)                                                \
    US_DRIVER_EXPORT CUresult fn params;                                              \
    US_DRIVER_EXPORT CUresult fn params                                               \
    {                                                                                 \
        if (!us_drv_layer_on()) {                                                     \
            CUresult(*real) params;                                                   \
            *(void **)&real = us_drv_real(US_DRV_FN_##fn);                            \
            return real != NULL ? real args : CUDA_ERROR_NOT_FOUND;                   \
        }                                                                             \
        return us_drv_wrap_##fn args;                                                 \
    }
EXPORT_OTHER(cuCtxSynchronize, (void), ())
EXPORT_OTHER(cuCtxSynchronize_v2, (CUcontext ctx), (ctx))
EXPORT_OTHER(cuCtxEnablePeerAccess, (CUcontext peer, unsigned int flags), (peer, flags))
EXPORT_OTHER(cuCtxDisablePeerAccess, (CUcontext peer), (peer))
EXPORT_OTHER(cuStreamSynchronize, (CUstream stream), (stream))
EXPORT_OTHER(cuStreamSynchronize_ptsz, (CUstream stream), (stream))
EXPORT_OTHER(cuCtxDestroy, (CUcontext ctx), (ctx))
EXPORT_OTHER(cuCtxDestroy_v2, (CUcontext ctx), (ctx))
EXPORT_OTHER(cuGetProcAddress, (const char *symbol, void **pfn, int version, cuuint64_t flags),
             (symbol, pfn, version, flags))
EXPORT_OTHER(cuGetProcAddress_v2,
             (const char *symbol, void **pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult *status),
             (symbol, pfn, version, flags, status))
#define EXPORT_MAPPING(fn, params, args) EXPORT_OTHER(fn, params, args)
US_DRIVER_MAPPING_FNS(EXPORT_MAPPING)
#undef EXPORT_MAPPING
#undef EXPORT_OTHER
