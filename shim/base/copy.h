/* copy.h - one intercepted copy, as every layer after the entry sees it.
 *
 * An entry fills the call fields; classify.c fills the memory and path;
 * policy.c decides; a pipeline or the native call does it (the chain:
 * chain.h). Nothing here depends on which layer (runtime or driver) the call
 * came in through. */
#ifndef UNSTALL_COPY_H
#define UNSTALL_COPY_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>

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

enum us_copy_api {
#define US_COPY_API_ENUM(id, fn, sync, per_thread, args) id,
    US_COPY_APIS(US_COPY_API_ENUM)
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
    int device; /* device memory: its device; host memory: -1 */
};

struct us_copy {
    /* the call */
    enum us_copy_api api;
    void *dst;
    const void *src;
    size_t bytes;
    enum cudaMemcpyKind kind;
    cudaStream_t stream;  /* as given */
    int peer_dst_device;  /* cudaMemcpyPeer*: as given; else -1 */
    int peer_src_device;
    /* classification */
    struct us_mem dst_mem, src_mem;
    enum us_copy_path path;
    enum us_stream_kind stream_kind;
};

static inline bool us_copy_is_sync(const struct us_copy *c)
{
    switch (c->api) {
#define US_COPY_API_SYNC(id, fn, sync, per_thread, args) case id: return sync;
    US_COPY_APIS(US_COPY_API_SYNC)
#undef US_COPY_API_SYNC
    default: return false;
    }
}

static inline bool us_copy_is_per_thread(const struct us_copy *c)
{
    switch (c->api) {
#define US_COPY_API_PER_THREAD(id, fn, sync, per_thread, args) case id: return per_thread;
    US_COPY_APIS(US_COPY_API_PER_THREAD)
#undef US_COPY_API_PER_THREAD
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

/* The native call, exactly as the program made it. */
cudaError_t us_copy_native(const struct us_copy *c);

#endif
