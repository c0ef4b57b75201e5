/* export.h - what every entry file needs. Entries are thin: they check that
 * the real function exists, step aside when the shim passes through, and
 * hand the call to a lower layer. Only symbols marked US_EXPORT leave the
 * library (it is built with -fvisibility=hidden); a function the shim only
 * forwards is not exported at all (the program reaches the runtime's own). */
#ifndef UNSTALL_ENTRY_EXPORT_H
#define UNSTALL_ENTRY_EXPORT_H

#include <cuda_runtime_api.h>

#include "classify.h"
#include "context.h"
#include "device_state.h"
#include "real.h"
#include "state.h"
#include "watch.h"

#define US_EXPORT __attribute__((visibility("default")))

/* The opening of an export that acts on its call: true when the real
 * function exists (has_real) and the shim does not pass through (disabled,
 * forked child, re-entry: state.h); the call is then noted (the report says
 * when no hook was reached). When it is false the export does the native
 * call or, without a real function, returns US_ERR_NO_REAL:
 *
 *     if (!us_entry_acts(real_fn != NULL))
 *         return real_fn != NULL ? real_fn(args) : US_ERR_NO_REAL;
 *
 * A watched export then begins its watch (watch.h) and returns
 * US_ERR_FORBIDDEN where strict mode refuses the call. */
static inline bool us_entry_acts(bool has_real)
{
    if (!has_real || us_passthrough())
        return false;
    us_state_note_call();
    return true;
}

/* The program's first pageable H2D copies, rehearsed once through
 * cudaMemcpy and cudaMemcpyAsync with nothing issued and nothing recorded
 * (us_copy_rehearsal_bytes, chain.h): inside the program's first device
 * allocation, after us_copy_warm, whose device_bytes they name. */
void us_entry_rehearse_copies(void *device_bytes);

#endif
