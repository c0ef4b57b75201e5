/* copy.h - one intercepted copy, as every layer after the entry sees it.
 *
 * An entry fills the call fields; classify.c fills the memory and path;
 * policy.c decides; a pipeline or the native call does it (the chain:
 * chain.h). Nothing here depends on which layer (runtime or driver) the call
 * came in through. */
#ifndef UNSTALL_COPY_H
#define UNSTALL_COPY_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrtable.h"

/* The APIs a copy comes in through, one row each: the enum name, the runtime
 * function (its name is the API's name; the native call goes to it), whether
 * it is synchronous, whether stream 0 means the per-thread stream, and its
 * arguments taken from a struct us_copy *c. cudaMemcpyPeerAsync has no _ptsz
 * variant. */
#define US_COPY_APIS(X)                                                                                           \
    X(US_API_MEMCPY, cudaMemcpy, true, false, (c->dst, c->src, c->bytes, c->kind))                                 \
    X(US_API_MEMCPY_PTDS, cudaMemcpy_ptds, true, true, (c->dst, c->src, c->bytes, c->kind))                        \
    X(US_API_MEMCPY_ASYNC, cudaMemcpyAsync, false, false, (c->dst, c->src, c->bytes, c->kind, c->stream))          \
    X(US_API_MEMCPY_ASYNC_PTSZ, cudaMemcpyAsync_ptsz, false, true, (c->dst, c->src, c->bytes, c->kind, c->stream)) \
    X(US_API_MEMCPY_PEER, cudaMemcpyPeer, true, false,                                                            \
      (c->dst, c->peer_dst_device, c->src, c->peer_src_device, c->bytes))                                         \
    X(US_API_MEMCPY_PEER_ASYNC, cudaMemcpyPeerAsync, false, false,                                                \
      (c->dst, c->peer_dst_device, c->src, c->peer_src_device, c->bytes, c->stream))

/* The driver's copy functions (libcuda), the driver-layer entry's
 * (shim/entry_driver): the exported name, whether it is synchronous, whether
 * stream 0 means the per-thread stream (the _ptds/_ptsz variants), and its
 * shape (below: parameters, the runtime kind it means, the native call). The
 * native call goes to the real function the entry identified, c->driver_fn.
 * Runtime to driver (CUDA 13): H2D cuMemcpyHtoD[Async]_v2, D2H
 * cuMemcpyDtoH[Async]_v2, D2D cuMemcpyDtoD[Async]_v2, cudaMemcpyDefault
 * cuMemcpy[Async], peer cuMemcpyPeer[Async]. */
#define US_DRIVER_COPY_APIS(X)                                                       \
    X(US_API_CU_HTOD, cuMemcpyHtoD_v2, true, false, HTOD)                           \
    X(US_API_CU_HTOD_PTDS, cuMemcpyHtoD_v2_ptds, true, true, HTOD)                  \
    X(US_API_CU_DTOH, cuMemcpyDtoH_v2, true, false, DTOH)                           \
    X(US_API_CU_DTOH_PTDS, cuMemcpyDtoH_v2_ptds, true, true, DTOH)                  \
    X(US_API_CU_DTOD, cuMemcpyDtoD_v2, true, false, DTOD)                           \
    X(US_API_CU_DTOD_PTDS, cuMemcpyDtoD_v2_ptds, true, true, DTOD)                  \
    X(US_API_CU_MEMCPY, cuMemcpy, true, false, ANY)                                 \
    X(US_API_CU_MEMCPY_PTDS, cuMemcpy_ptds, true, true, ANY)                        \
    X(US_API_CU_PEER, cuMemcpyPeer, true, false, PEER)                              \
    X(US_API_CU_PEER_PTDS, cuMemcpyPeer_ptds, true, true, PEER)                     \
    X(US_API_CU_HTOD_ASYNC, cuMemcpyHtoDAsync_v2, false, false, HTOD_ASYNC)         \
    X(US_API_CU_HTOD_ASYNC_PTSZ, cuMemcpyHtoDAsync_v2_ptsz, false, true, HTOD_ASYNC) \
    X(US_API_CU_DTOH_ASYNC, cuMemcpyDtoHAsync_v2, false, false, DTOH_ASYNC)         \
    X(US_API_CU_DTOH_ASYNC_PTSZ, cuMemcpyDtoHAsync_v2_ptsz, false, true, DTOH_ASYNC) \
    X(US_API_CU_DTOD_ASYNC, cuMemcpyDtoDAsync_v2, false, false, DTOD_ASYNC)         \
    X(US_API_CU_DTOD_ASYNC_PTSZ, cuMemcpyDtoDAsync_v2_ptsz, false, true, DTOD_ASYNC) \
    X(US_API_CU_MEMCPY_ASYNC, cuMemcpyAsync, false, false, ANY_ASYNC)               \
    X(US_API_CU_MEMCPY_ASYNC_PTSZ, cuMemcpyAsync_ptsz, false, true, ANY_ASYNC)      \
    X(US_API_CU_PEER_ASYNC, cuMemcpyPeerAsync, false, false, PEER_ASYNC)            \
    X(US_API_CU_PEER_ASYNC_PTSZ, cuMemcpyPeerAsync_ptsz, false, true, PEER_ASYNC)

/* The shapes of the driver's copy functions: parameters, the struct us_copy
 * fields they fill (the peer devices come from the contexts, filled by the
 * entry), and the arguments of the native call taken from c. */
#define US_DPTR_OF(p) ((CUdeviceptr)(uintptr_t)(p))
#define US_PTR_OF(d) ((void *)(uintptr_t)(d))
#define US_DRV_PARAMS_HTOD CUdeviceptr dst, const void *src, size_t bytes
#define US_DRV_PARAMS_DTOH void *dst, CUdeviceptr src, size_t bytes
#define US_DRV_PARAMS_DTOD CUdeviceptr dst, CUdeviceptr src, size_t bytes
#define US_DRV_PARAMS_ANY CUdeviceptr dst, CUdeviceptr src, size_t bytes
#define US_DRV_PARAMS_PEER CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t bytes
#define US_DRV_PARAMS_HTOD_ASYNC US_DRV_PARAMS_HTOD, CUstream stream
#define US_DRV_PARAMS_DTOH_ASYNC US_DRV_PARAMS_DTOH, CUstream stream
#define US_DRV_PARAMS_DTOD_ASYNC US_DRV_PARAMS_DTOD, CUstream stream
#define US_DRV_PARAMS_ANY_ASYNC US_DRV_PARAMS_ANY, CUstream stream
#define US_DRV_PARAMS_PEER_ASYNC US_DRV_PARAMS_PEER, CUstream stream
#define US_DRV_FILL_HTOD .dst = US_PTR_OF(dst), .src = src, .bytes = bytes, .kind = cudaMemcpyHostToDevice
#define US_DRV_FILL_DTOH .dst = dst, .src = US_PTR_OF(src), .bytes = bytes, .kind = cudaMemcpyDeviceToHost
#define US_DRV_FILL_DTOD .dst = US_PTR_OF(dst), .src = US_PTR_OF(src), .bytes = bytes, .kind = cudaMemcpyDeviceToDevice
#define US_DRV_FILL_ANY .dst = US_PTR_OF(dst), .src = US_PTR_OF(src), .bytes = bytes, .kind = cudaMemcpyDefault
#define US_DRV_FILL_PEER US_DRV_FILL_DTOD, .peer_dst_ctx = dst_ctx, .peer_src_ctx = src_ctx
#define US_DRV_FILL_HTOD_ASYNC US_DRV_FILL_HTOD, .stream = (cudaStream_t)stream
#define US_DRV_FILL_DTOH_ASYNC US_DRV_FILL_DTOH, .stream = (cudaStream_t)stream
#define US_DRV_FILL_DTOD_ASYNC US_DRV_FILL_DTOD, .stream = (cudaStream_t)stream
#define US_DRV_FILL_ANY_ASYNC US_DRV_FILL_ANY, .stream = (cudaStream_t)stream
#define US_DRV_FILL_PEER_ASYNC US_DRV_FILL_PEER, .stream = (cudaStream_t)stream
#define US_DRV_ARGS_HTOD (US_DPTR_OF(c->dst), c->src, c->bytes)
#define US_DRV_ARGS_DTOH (c->dst, US_DPTR_OF(c->src), c->bytes)
#define US_DRV_ARGS_DTOD (US_DPTR_OF(c->dst), US_DPTR_OF(c->src), c->bytes)
#define US_DRV_ARGS_ANY US_DRV_ARGS_DTOD
#define US_DRV_ARGS_PEER (US_DPTR_OF(c->dst), c->peer_dst_ctx, US_DPTR_OF(c->src), c->peer_src_ctx, c->bytes)
#define US_DRV_ARGS_HTOD_ASYNC (US_DPTR_OF(c->dst), c->src, c->bytes, (CUstream)c->stream)
#define US_DRV_ARGS_DTOH_ASYNC (c->dst, US_DPTR_OF(c->src), c->bytes, (CUstream)c->stream)
#define US_DRV_ARGS_DTOD_ASYNC (US_DPTR_OF(c->dst), US_DPTR_OF(c->src), c->bytes, (CUstream)c->stream)
#define US_DRV_ARGS_ANY_ASYNC US_DRV_ARGS_DTOD_ASYNC
#define US_DRV_ARGS_PEER_ASYNC \
    (US_DPTR_OF(c->dst), c->peer_dst_ctx, US_DPTR_OF(c->src), c->peer_src_ctx, c->bytes, (CUstream)c->stream)

/* The driver copies' function types, one per shape, and their parameters'
 * names as the arguments of a call (a wrapper passing its call on as it
 * came). */
typedef CUresult (*us_drv_HTOD_fn)(US_DRV_PARAMS_HTOD);
typedef CUresult (*us_drv_DTOH_fn)(US_DRV_PARAMS_DTOH);
typedef CUresult (*us_drv_DTOD_fn)(US_DRV_PARAMS_DTOD);
typedef CUresult (*us_drv_ANY_fn)(US_DRV_PARAMS_ANY);
typedef CUresult (*us_drv_PEER_fn)(US_DRV_PARAMS_PEER);
typedef CUresult (*us_drv_HTOD_ASYNC_fn)(US_DRV_PARAMS_HTOD_ASYNC);
typedef CUresult (*us_drv_DTOH_ASYNC_fn)(US_DRV_PARAMS_DTOH_ASYNC);
typedef CUresult (*us_drv_DTOD_ASYNC_fn)(US_DRV_PARAMS_DTOD_ASYNC);
typedef CUresult (*us_drv_ANY_ASYNC_fn)(US_DRV_PARAMS_ANY_ASYNC);
typedef CUresult (*us_drv_PEER_ASYNC_fn)(US_DRV_PARAMS_PEER_ASYNC);
#define US_DRV_NAMES_HTOD (dst, src, bytes)
#define US_DRV_NAMES_DTOH (dst, src, bytes)
#define US_DRV_NAMES_DTOD (dst, src, bytes)
#define US_DRV_NAMES_ANY (dst, src, bytes)
#define US_DRV_NAMES_PEER (dst, dst_ctx, src, src_ctx, bytes)
#define US_DRV_NAMES_HTOD_ASYNC (dst, src, bytes, stream)
#define US_DRV_NAMES_DTOH_ASYNC (dst, src, bytes, stream)
#define US_DRV_NAMES_DTOD_ASYNC (dst, src, bytes, stream)
#define US_DRV_NAMES_ANY_ASYNC (dst, src, bytes, stream)
#define US_DRV_NAMES_PEER_ASYNC (dst, dst_ctx, src, src_ctx, bytes, stream)

enum us_copy_api {
#define US_COPY_API_ENUM(id, fn, sync, per_thread, args) id,
    US_COPY_APIS(US_COPY_API_ENUM)
    US_DRIVER_COPY_APIS(US_COPY_API_ENUM)
#undef US_COPY_API_ENUM
    US_API_COUNT
};

enum us_copy_path {
    US_PATH_UNKNOWN = 0,  /* not classified with certainty: native */
    US_PATH_H2H,
    US_PATH_H2D_PINNED,
    US_PATH_H2D_PAGEABLE,
    US_PATH_D2H_PINNED,
    US_PATH_D2H_PAGEABLE,
    US_PATH_D2D_SAME,     /* one device */
    US_PATH_D2D_PEER,     /* two devices, peer access enabled */
    US_PATH_D2D_STAGED,   /* two devices, no peer access: the driver stages it */
};

enum us_stream_kind { US_STREAM_USER, US_STREAM_LEGACY, US_STREAM_PER_THREAD };

struct us_mem {
    enum us_mem_kind kind;
    int device;      /* device memory: its device; host memory: -1 */
    bool remembered; /* pageable by a remembered answer (hostpages.h), not asked this call */
};

struct us_copy {
    /* the call */
    enum us_copy_api api;
    void *dst;
    const void *src;
    size_t bytes;
    enum cudaMemcpyKind kind;
    cudaStream_t stream;  /* as given */
    int peer_dst_device;  /* cudaMemcpyPeer*: as given; cuMemcpyPeer*: the contexts' devices; else -1 */
    int peer_src_device;
    CUcontext peer_dst_ctx; /* cuMemcpyPeer*: as given */
    CUcontext peer_src_ctx;
    const void *driver_fn;  /* a driver copy: the real function the program would have called */
    /* classification */
    struct us_mem dst_mem, src_mem;
    enum us_copy_path path;
    enum us_stream_kind stream_kind;
    bool src_unlisted, dst_unlisted; /* us_classify_host_unknown found it absent from the table (classify.h) */
    bool rehearsal; /* a copy from us_copy_rehearsal_bytes (chain.h): nothing issued, nothing recorded */
};

static inline bool us_copy_is_sync(const struct us_copy *c)
{
    switch (c->api) {
#define US_COPY_API_SYNC(id, fn, sync, per_thread, args) case id: return sync;
    US_COPY_APIS(US_COPY_API_SYNC)
    US_DRIVER_COPY_APIS(US_COPY_API_SYNC)
#undef US_COPY_API_SYNC
    default: return false;
    }
}

static inline bool us_copy_is_per_thread(const struct us_copy *c)
{
    switch (c->api) {
#define US_COPY_API_PER_THREAD(id, fn, sync, per_thread, args) case id: return per_thread;
    US_COPY_APIS(US_COPY_API_PER_THREAD)
    US_DRIVER_COPY_APIS(US_COPY_API_PER_THREAD)
#undef US_COPY_API_PER_THREAD
    default: return false;
    }
}

/* A copy between devices named by the call (cudaMemcpyPeer*, cuMemcpyPeer*):
 * the pointers must agree with peer_src_device and peer_dst_device. */
static inline bool us_copy_is_peer(const struct us_copy *c)
{
    switch (c->api) {
    case US_API_MEMCPY_PEER:
    case US_API_MEMCPY_PEER_ASYNC:
    case US_API_CU_PEER:
    case US_API_CU_PEER_PTDS:
    case US_API_CU_PEER_ASYNC:
    case US_API_CU_PEER_ASYNC_PTSZ: return true;
    default: return false;
    }
}

/* The stream handle with "0" made explicit, valid for the plain entry points:
 * cudaStreamPerThread for per-thread APIs, cudaStreamLegacy otherwise. */
static inline cudaStream_t us_copy_stream(const struct us_copy *c)
{
    if (c->stream != NULL)
        return c->stream;
    return us_copy_is_per_thread(c) ? cudaStreamPerThread : cudaStreamLegacy;
}

const char *us_copy_api_name(enum us_copy_api api);
const char *us_copy_path_name(enum us_copy_path path);

/* The native call, exactly as the program made it; none for a rehearsal
 * (c->rehearsal: the first copies', chain.h), which returns cudaSuccess. */
cudaError_t us_copy_native(const struct us_copy *c);

#endif
