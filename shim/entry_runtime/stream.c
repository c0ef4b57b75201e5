/* stream.c - exported stream functions. Creation and destruction keep the
 * per-device count of blocking streams that the legacy-stream rule needs
 * (core/streams.c remembers each stream's device and flags at creation);
 * synchronization is a finding (explicit_sync) with the time actually
 * waited.
 *
 * Graph capture: creation and destruction ask the runtime nothing about the
 * stream. Programs create and destroy streams inside a capture (NVIDIA's
 * graphMemoryNodes sample destroys a stream that joined the capture before
 * cudaStreamEndCapture); a query of such a stream could invalidate the
 * capture. A new stream is on the current device, which cudaGetDevice tells
 * without touching any stream.
 *
 * Queries are not exported: the program reaches the runtime's own, and they
 * observe the shim's rewritten copies because those are ordered into the
 * program's stream. A cross-stream wait passes through, on the stream
 * legacy_stream moves legacy-stream work to when it is set (later moved work
 * must wait too: legacy_stream.h). */
#include "context.h"
#include "device_state.h"
#include "hot.h"
#include "engine_late.h"
#include "export.h"
#include "legacy_stream.h"
#include "streams.h"

static bool is_blocking(unsigned flags) { return (flags & cudaStreamNonBlocking) == 0; }

/* After a successful creation: remember it, and report a blocking stream
 * made while the device's legacy stream is in use. */
static void note_created(cudaStream_t stream, unsigned flags)
{
    int device = us_current_device();
    us_streams_note_created(stream, device, is_blocking(flags));
    if (is_blocking(flags) && us_device_legacy_used(device)) {
        struct us_watch w;
        if (us_watch_begin(&w, US_RULE_blocking_stream, "cudaStreamCreate"))
            us_watch_end(&w, stream, US_STREAM_USER, device, 0);
    }
}

US_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    const struct us_real_api *real = us_real();
    if (real->cudaStreamCreate == NULL)
        return US_ERR_NO_REAL;
    cudaError_t err = real->cudaStreamCreate(pStream);
    if (err == cudaSuccess && us_entry_acts(true))
        note_created(*pStream, cudaStreamDefault);
    return err;
}

US_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    const struct us_real_api *real = us_real();
    if (real->cudaStreamCreateWithFlags == NULL)
        return US_ERR_NO_REAL;
    cudaError_t err = real->cudaStreamCreateWithFlags(pStream, flags);
    if (err == cudaSuccess && us_entry_acts(true))
        note_created(*pStream, flags);
    return err;
}

US_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    const struct us_real_api *real = us_real();
    if (real->cudaStreamCreateWithPriority == NULL)
        return US_ERR_NO_REAL;
    cudaError_t err = real->cudaStreamCreateWithPriority(pStream, flags, priority);
    if (err == cudaSuccess && us_entry_acts(true))
        note_created(*pStream, flags);
    return err;
}

US_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    const struct us_real_api *real = us_real();
    if (real->cudaStreamDestroy == NULL)
        return US_ERR_NO_REAL;
    /* forgotten first: once destroyed, another thread's new stream may get
     * the same handle and be noted before we would get here */
    if (!us_passthrough())
        us_streams_note_destroyed(stream);
    return real->cudaStreamDestroy(stream);
}

US_HOT static cudaError_t stream_sync(cudaError_t (*real_fn)(cudaStream_t), const char *api, bool per_thread,
                               cudaStream_t stream)
{
    if (!us_entry_acts(real_fn != NULL))
        return real_fn != NULL ? real_fn(stream) : US_ERR_NO_REAL;
    struct us_watch w;
    if (!us_watch_begin(&w, US_RULE_explicit_sync, api))
        return US_ERR_FORBIDDEN;
    struct us_engine_sync engine;
    us_engine_sync_begin(stream, per_thread, &engine);
    cudaError_t err = real_fn(stream);
    us_engine_sync_end(&engine, err == cudaSuccess);
    us_watch_end(&w, stream, us_stream_kind_of(stream, per_thread), -1, 0);
    return err;
}

US_HOT US_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    return stream_sync(us_real()->cudaStreamSynchronize, __func__, false, stream);
}

US_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    return stream_sync(us_real()->cudaStreamSynchronize_ptsz, __func__, true, stream);
}

static cudaError_t wait_event(cudaError_t (*real_fn)(cudaStream_t, cudaEvent_t, unsigned), bool per_thread,
                              cudaStream_t stream, cudaEvent_t event, unsigned flags)
{
    if (!us_entry_acts(real_fn != NULL))
        return real_fn != NULL ? real_fn(stream, event, flags) : US_ERR_NO_REAL;
    struct us_legacy_move move;
    cudaError_t err = real_fn(us_legacy_move_begin(stream, per_thread, false, &move), event, flags);
    us_legacy_move_end(&move, err == cudaSuccess);
    return err;
}

US_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    return wait_event(us_real()->cudaStreamWaitEvent, false, stream, event, flags);
}

US_EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    return wait_event(us_real()->cudaStreamWaitEvent_ptsz, true, stream, event, flags);
}
