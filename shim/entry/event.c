/* event.c - exported event functions: cudaEventSynchronize is a finding
 * (explicit_sync). Recording is not exported: the program's cudaEventRecord
 * reaches the runtime's own (the shim's rewritten copies are part of the
 * stream, so an event recorded after one completes after it). */
#include "export.h"

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
