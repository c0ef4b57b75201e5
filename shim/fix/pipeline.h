/* pipeline.h - the rewrites: pinned, chunked, event-chained copies that keep
 * every promise of the native call (docs/contract.md).
 *
 * Each returns true when it did the copy (*result is what the call returns:
 * cudaSuccess or the error a native call would give) and false when it
 * declined (no pinned memory, no events, capture in progress, anything
 * uncertain): the caller then makes the native call, and the pipeline has
 * logged why, once per reason. A pipeline never declines after it started to
 * issue work. */
#ifndef UNSTALL_PIPELINE_H
#define UNSTALL_PIPELINE_H

#include <stdbool.h>

#include "context.h"
#include "copy.h"
#include "pipeline_common.h"

/* `home`: the context the copy is issued in (us_context_this); the
 * pipeline's streams, events and slot events belong to it (or, on other
 * devices, to their primary contexts). NULL: declined. */
bool us_pipeline_peer(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result); /* case A */
bool us_pipeline_h2d(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result);  /* case B */
bool us_pipeline_d2h(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result);  /* case C */

/* Case B, saying whether the caller was held: *held is true when the copy,
 * asynchronous, waited for its own chunks behind queued work on its stream
 * (its slots could not take it whole, and its bytes could not be spilled:
 * spill.h); the chain reports such a copy held, not fixed. us_pipeline_h2d
 * is this without the answer. */
bool us_pipeline_h2d_held(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result, bool *held);

/* Case C in two steps, for a caller with work to do while the first chunks are
 * on the GPU (chain.c: the finding's call site; a 4-byte copy's wait is most
 * of its time, 4.6-4.9 us of 7.5-8.3 on an H200). Start: the checks, the
 * slots, the first chunks issued; false: declined with nothing issued and
 * nothing held. Finish (only after a start that returned true): waits, copies
 * out, issues the rest, gives the slots back; returns what the call returns.
 * us_pipeline_d2h is the two in a row. */
struct us_d2h_run {
    struct us_pipe p;
    struct us_pipe_slots s;
    size_t off[US_STAGING_MAX_CLAIM], len[US_STAGING_MAX_CLAIM]; /* each slot's chunk */
    size_t next, queued;
    cudaError_t err;
    bool issued;
};
bool us_pipeline_d2h_start(const struct us_copy *c, const struct us_ctx *home, struct us_d2h_run *run);
cudaError_t us_pipeline_d2h_finish(struct us_d2h_run *run);

#endif
