/* memcpy.c - exported copy functions. Each builds a struct us_copy and hands
 * it to us_copy_run (core/copy.c), which classifies, decides, rewrites or
 * calls the runtime, and records findings. The 2D copies are not rewritten;
 * the synchronous ones are watched (sync_memcpy), the asynchronous ones not
 * exported. */
#include "chain.h"
#include "hot.h"
#include "export.h"

static cudaError_t run(enum us_copy_api api, void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                       cudaStream_t stream)
{
    struct us_copy c = {
        .api = api, .dst = dst, .src = src, .bytes = count, .kind = kind, .stream = stream,
        .peer_dst_device = -1, .peer_src_device = -1,
    };
    return us_copy_run(&c);
}

/* noinline: the rehearsal (below) must run this very code, from its own
 * frame, for its return address to be the program's */
US_EXPORT US_HOT __attribute__((noinline)) cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                                                           enum cudaMemcpyKind kind)
{
    return run(US_API_MEMCPY, dst, src, count, kind, NULL);
}

US_EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return run(US_API_MEMCPY_PTDS, dst, src, count, kind, NULL);
}

US_EXPORT US_HOT __attribute__((noinline)) cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                                                enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return run(US_API_MEMCPY_ASYNC, dst, src, count, kind, stream);
}

/* The rehearsal calls these two exports' own code: through the dynamic
 * symbols it could reach a program's statically linked runtime, which
 * would copy. */
extern __typeof__(cudaMemcpy) us_rehearse_cudaMemcpy __attribute__((hot, alias("cudaMemcpy"), visibility("hidden")));
extern __typeof__(cudaMemcpyAsync) us_rehearse_cudaMemcpyAsync
    __attribute__((hot, alias("cudaMemcpyAsync"), visibility("hidden")));

void us_entry_rehearse_copies(void *device_bytes)
{
    const size_t bytes = sizeof us_copy_rehearsal_bytes;
    (void)us_rehearse_cudaMemcpy(device_bytes, us_copy_rehearsal_bytes, bytes, cudaMemcpyHostToDevice);
    (void)us_rehearse_cudaMemcpyAsync(device_bytes, us_copy_rehearsal_bytes, bytes, cudaMemcpyHostToDevice, NULL);
}

US_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                           cudaStream_t stream)
{
    return run(US_API_MEMCPY_ASYNC_PTSZ, dst, src, count, kind, stream);
}

static cudaError_t run_peer(enum us_copy_api api, void *dst, int dst_device, const void *src, int src_device,
                            size_t count, cudaStream_t stream)
{
    struct us_copy c = {
        .api = api, .dst = dst, .src = src, .bytes = count, .kind = cudaMemcpyDeviceToDevice, .stream = stream,
        .peer_dst_device = dst_device, .peer_src_device = src_device,
    };
    return us_copy_run(&c);
}

US_EXPORT cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
    return run_peer(US_API_MEMCPY_PEER, dst, dstDevice, src, srcDevice, count, NULL);
}

US_EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
                                          cudaStream_t stream)
{
    return run_peer(US_API_MEMCPY_PEER_ASYNC, dst, dstDevice, src, srcDevice, count, stream);
}

/* 2D copies are not rewritten. The synchronous ones that touch host memory
 * are findings (sync_memcpy): they hold the caller until done. The
 * asynchronous ones are not exported: the program reaches the runtime's own. */
typedef cudaError_t (*memcpy2d_fn)(void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind);

static cudaError_t memcpy2d_sync(memcpy2d_fn real_fn, const char *api, bool per_thread, void *dst, size_t dpitch,
                                 const void *src, size_t spitch, size_t width, size_t height,
                                 enum cudaMemcpyKind kind)
{
    if (!us_entry_acts(real_fn != NULL))
        return real_fn != NULL ? real_fn(dst, dpitch, src, spitch, width, height, kind) : US_ERR_NO_REAL;
    if (width == 0 || height == 0 || !us_findings_wanted() || !us_touches_host(dst, src))
        return real_fn(dst, dpitch, src, spitch, width, height, kind);
    struct us_watch w;
    if (!us_watch_begin(&w, US_RULE_sync_memcpy, api))
        return US_ERR_FORBIDDEN;
    cudaError_t err = real_fn(dst, dpitch, src, spitch, width, height, kind);
    us_watch_end(&w, NULL, per_thread ? US_STREAM_PER_THREAD : US_STREAM_LEGACY, us_current_device(), width * height);
    return err;
}

US_EXPORT cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                   size_t height, enum cudaMemcpyKind kind)
{
    return memcpy2d_sync(us_real()->cudaMemcpy2D, __func__, false, dst, dpitch, src, spitch, width, height,
                         kind);
}

US_EXPORT cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                        size_t height, enum cudaMemcpyKind kind)
{
    return memcpy2d_sync(us_real()->cudaMemcpy2D_ptds, __func__, true, dst, dpitch, src, spitch, width,
                         height, kind);
}
