/* pipeline.h - the rewrites: pinned, chunked, event-chained copies that keep
 * every promise of the native call (design.md, "The contract").
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

/* Work of the caller's that a pipeline runs once, when its first chunk is
 * on the GPU and before it waits for it, instead of the caller running it
 * before or after the copy (chain.c: the finding's call site). */
struct us_meanwhile {
    void (*fn)(void *arg);
    void *arg;
};

/* `home`: the context the copy is issued in (us_context_this); the
 * pipeline's streams, events and slot events belong to it (or, on other
 * devices, to their primary contexts). NULL: declined. `meanwhile`: NULL,
 * or run as said above; only the D2H, whose caller waits for every copy,
 * takes one. */
bool us_pipeline_peer(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result); /* case A */
bool us_pipeline_h2d(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result);  /* case B */
bool us_pipeline_d2h(const struct us_copy *c, const struct us_ctx *home, const struct us_meanwhile *meanwhile,
                     cudaError_t *result); /* case C */

#endif
