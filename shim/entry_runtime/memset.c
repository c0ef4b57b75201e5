/* memset.c - exported memset functions. The synchronous cudaMemset is a
 * finding (sync_memset); either on a contended legacy stream is one too
 * (legacy_stream). Both run natively, on the stream legacy_stream moves
 * legacy-stream work to when it is set (legacy_stream.h). */
#include "export.h"
#include "legacy_stream.h"

static cudaError_t memset_sync(cudaError_t (*real_fn)(void *, int, size_t), const char *api, bool per_thread,
                               void *ptr, int value, size_t count)
{
    if (!us_entry_acts(real_fn != NULL))
        return real_fn != NULL ? real_fn(ptr, value, count) : US_ERR_NO_REAL;
    if (us_legacy_streamless_to_per_thread(per_thread) && us_real()->cudaMemset_ptds != NULL) {
        real_fn = us_real()->cudaMemset_ptds;
        per_thread = true;
    }
    /* runs on the default stream: a legacy one may also serialize */
    enum us_stream_kind kind = per_thread ? US_STREAM_PER_THREAD : US_STREAM_LEGACY;
    bool contended = us_legacy_contended(kind);
    struct us_watch sync, legacy;
    if (!us_watch_begin(&sync, US_RULE_sync_memset, api) ||
        (contended && !us_watch_begin(&legacy, US_RULE_legacy_stream, api)))
        return US_ERR_FORBIDDEN;
    cudaError_t err = real_fn(ptr, value, count);
    int device = us_current_device();
    us_watch_end(&sync, NULL, kind, device, count);
    if (contended)
        us_watch_end(&legacy, NULL, kind, device, count);
    return err;
}

US_EXPORT cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    return memset_sync(us_real()->cudaMemset, __func__, false, devPtr, value, count);
}

US_EXPORT cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    return memset_sync(us_real()->cudaMemset_ptds, __func__, true, devPtr, value, count);
}

static cudaError_t memset_async(cudaError_t (*real_fn)(void *, int, size_t, cudaStream_t), const char *api,
                                bool per_thread, void *ptr, int value, size_t count, cudaStream_t stream)
{
    if (!us_entry_acts(real_fn != NULL))
        return real_fn != NULL ? real_fn(ptr, value, count, stream) : US_ERR_NO_REAL;
    struct us_legacy_move move;
    stream = us_legacy_move_begin(stream, per_thread, false, &move);
    enum us_stream_kind kind = us_stream_kind_of(stream, per_thread);
    cudaError_t err;
    if (!us_legacy_contended(kind)) {
        err = real_fn(ptr, value, count, stream);
    } else {
        struct us_watch w;
        if (!us_watch_begin(&w, US_RULE_legacy_stream, api))
            return US_ERR_FORBIDDEN;
        err = real_fn(ptr, value, count, stream);
        us_watch_end(&w, stream, kind, us_current_device(), count);
    }
    us_legacy_move_end(&move, err == cudaSuccess);
    return err;
}

US_EXPORT cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return memset_async(us_real()->cudaMemsetAsync, __func__, false, devPtr, value, count, stream);
}

US_EXPORT cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return memset_async(us_real()->cudaMemsetAsync_ptsz, __func__, true, devPtr, value, count, stream);
}
