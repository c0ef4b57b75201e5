/* event.c - exported event functions. Recording passes through (the shim's
 * rewritten copies are part of the stream, so an event recorded after one
 * completes after it); cudaEventSynchronize is a finding (explicit_sync). */
#include "export.h"

US_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    const struct us_real_api *real = us_real();
    return real->cudaEventRecord != NULL ? real->cudaEventRecord(event, stream) : US_ERR_NO_REAL;
}

US_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    const struct us_real_api *real = us_real();
    return real->cudaEventRecord_ptsz != NULL ? real->cudaEventRecord_ptsz(event, stream) : US_ERR_NO_REAL;
}

US_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    const struct us_real_api *real = us_real();
    if (real->cudaEventSynchronize == NULL)
        return US_ERR_NO_REAL;
    if (us_passthrough())
        return real->cudaEventSynchronize(event);
    us_state_note_call();
    struct us_watch w;
    if (!us_watch_begin(&w, US_RULE_explicit_sync, "cudaEventSynchronize"))
        return US_ERR_FORBIDDEN;
    cudaError_t err = real->cudaEventSynchronize(event);
    us_watch_end(&w, NULL, US_STREAM_USER, -1, 0);
    return err;
}
