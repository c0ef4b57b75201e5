/* event.c - exported event functions: cudaEventSynchronize is a finding
 * (explicit_sync). A record passes through to the runtime (the shim's
 * rewritten copies are part of the stream, so an event recorded after one
 * completes after it), on the stream legacy_stream moves legacy-stream work
 * to when it is set: an event the program records on stream 0 then marks the
 * moved work (legacy_stream.h). */
#include "export.h"
#include "legacy_stream.h"

US_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    cudaError_t (*real_fn)(cudaEvent_t) = us_real()->cudaEventSynchronize;
    if (!us_entry_acts(real_fn != NULL))
        return real_fn != NULL ? real_fn(event) : US_ERR_NO_REAL;
    struct us_watch w;
    if (!us_watch_begin(&w, US_RULE_explicit_sync, __func__))
        return US_ERR_FORBIDDEN;
    cudaError_t err = real_fn(event);
    us_watch_end(&w, NULL, US_STREAM_USER, -1, 0);
    return err;
}

static cudaError_t record(cudaError_t (*real_fn)(cudaEvent_t, cudaStream_t), bool per_thread, cudaEvent_t event,
                          cudaStream_t stream)
{
    if (!us_entry_acts(real_fn != NULL))
        return real_fn != NULL ? real_fn(event, stream) : US_ERR_NO_REAL;
    /* a record is no work: later work needs no wait for it (no move end) */
    struct us_legacy_move move;
    return real_fn(event, us_legacy_move_begin(stream, per_thread, false, &move));
}

US_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    return record(us_real()->cudaEventRecord, false, event, stream);
}

US_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    return record(us_real()->cudaEventRecord_ptsz, true, event, stream);
}
