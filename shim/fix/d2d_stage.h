/* d2d_stage.h - the remedy of case D (fix_busy_d2d): a
 * same-device copy whose stream's copies start late behind a busy compute
 * engine (detect/engine_late.h) goes through pinned host memory on the copy
 * engines instead: a D2H into the stream's staging buffer (a slot of the
 * staging pool that the stream keeps), then an H2D from it, both on the
 * program's stream with the program's API (so the _ptsz variant keeps its
 * per-thread stream), in pieces of the buffer's size (2 MiB) for a larger
 * copy. Stream order is the stream's own; the buffer is used only by that
 * stream, so the next piece's or copy's D2H cannot overtake this one's H2D,
 * and the host never waits. */
#ifndef UNSTALL_D2D_STAGE_H
#define UNSTALL_D2D_STAGE_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "config.h"
#include "context.h"
#include "copy.h"
#include "engine_late.h"

/* Stages c when it can (an asynchronous copy API, at most busy_d2d_max_bytes,
 * the stream not capturing, the buffer to be had); *result is the copy's
 * status. `home`: the context the copy is issued in. false: declined (logged
 * once), nothing issued; go native. */
bool us_d2d_stage(const struct us_copy *c, const struct us_config *cfg, const struct us_ctx *home,
                  struct us_engine_call *call, cudaError_t *result);

#endif
