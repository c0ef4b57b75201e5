/* copy.h - one intercepted copy, as every layer after the entry sees it.
 *
 * The entry (shim/entry/memcpy.c) fills the call fields; classify.c fills the
 * memory and path; policy.c decides; a pipeline or the native call does it.
 * Nothing here depends on which layer (runtime or, later, driver) the call
 * came in through. */
#ifndef UNSTALL_COPY_H
#define UNSTALL_COPY_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>

#include "ptrtable.h"

/* The API a copy came in through: decides the native call and the semantics
 * (synchronous or not; what stream 0 means). */
enum us_copy_api {
    US_API_MEMCPY,            /* cudaMemcpy: synchronous, legacy stream */
    US_API_MEMCPY_PTDS,       /* cudaMemcpy_ptds: synchronous, per-thread stream */
    US_API_MEMCPY_ASYNC,      /* cudaMemcpyAsync */
    US_API_MEMCPY_ASYNC_PTSZ, /* cudaMemcpyAsync_ptsz: stream 0 is per-thread */
    US_API_MEMCPY_PEER,       /* cudaMemcpyPeer: synchronous, legacy stream */
    US_API_MEMCPY_PEER_ASYNC, /* cudaMemcpyPeerAsync (no _ptsz variant exists) */
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
    return c->api == US_API_MEMCPY || c->api == US_API_MEMCPY_PTDS || c->api == US_API_MEMCPY_PEER;
}

static inline bool us_copy_is_per_thread(const struct us_copy *c)
{
    return c->api == US_API_MEMCPY_PTDS || c->api == US_API_MEMCPY_ASYNC_PTSZ;
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

/* The whole chain for one copy: classify, decide, pipeline or native, record.
 * The only function an entry calls. */
cudaError_t us_copy_run(struct us_copy *c);

#endif
