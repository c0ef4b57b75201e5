/* pipeline_h2d.c - case B: a host-to-device copy from pageable memory, which
 * the driver makes wait for the stream to drain before it reads the source.
 *
 * The source is copied (us_hostcopy_to_staging: several threads when large,
 * stores that bypass the cache) into pinned slots the copy claims from the
 * shared pool, chunk by chunk, and each chunk goes to the device with a
 * cudaMemcpyAsync on the user stream itself, followed by its slot's event.
 * The call returns once the source is consumed, without waiting for earlier
 * work on the stream; the transfers follow in stream order. The user stream
 * itself (not a lane) because it is stream order by construction (legacy
 * and per-thread semantics included), costs 2 calls per chunk instead of 6,
 * and an asynchronous failure of a chunk is an error of the user stream,
 * exactly where the native one would be.
 *
 * The copy claims slots that hold it whole (up to half of pinned_max, at
 * most 64 slots; growth follows the copies, staging.h), all free at claim
 * time, so the host waits for the GPU only when a copy is larger than that:
 * then it reuses its own slots, waiting for its own earlier chunks (never for
 * another stream's work). While the pool grows it runs with the slots that
 * are ready, cycling through them as a larger copy does; with none ready it
 * goes native while the grower thread adds them (no free slot and no room to
 * grow: native). It did go native until all its slots were there: measured on
 * an H100, a 256 MiB cudaMemcpy repeated 16 times went native every time
 * (44 ms each, as native), since each native copy held the driver that the
 * grower's registrations wait for, and the pool never caught up. Cycling
 * fewer slots waits only for the copy's own earlier chunks, so no longer than
 * a native pageable H2D, which waits for the stream's earlier work too; its
 * speed with few slots was not measured apart (make bench's 256 MiB rows ran
 * with the pool as it grew: 12.1 ms against 34.3 natively on an H100).
 *
 * cudaMemcpy (synchronous): the same, then the host waits for the last
 * chunk's event, so the call returns when the copy is done, as native does.
 *
 * A copy of up to h2d_idle_native_bytes (0 by default: none) goes native
 * when its stream has no work queued: the stall it is rewritten for is the
 * wait for queued work, and where the driver's own staging is the faster on
 * an idle GPU (an H200 host was, before the slots were written with
 * non-temporal stores: option h2d_idle_native_bytes says what was measured)
 * nothing is lost then. A synchronous one of that size never comes here
 * (policy.c): it waits for that work rewritten too, and the stream is seldom
 * idle right after one, since a native synchronous pageable H2D returns
 * before its last transfer ends (with the idle check alone every other copy
 * of a loop was rewritten, 299 of 600 on an H200). */
#include "pipeline.h"

#include "classify.h"
#include "config.h"
#include "hostcopy.h"
#include "log.h"
#include "pipeline_common.h"
#include "probe.h"

static int logged_idle_native;

bool us_pipeline_h2d(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result)
{
    /* a source taken as pageable on a remembered answer (hostpages.h) is
     * asked about before anything is issued: the rewrite waits for its
     * slots, where the native copy from pinned memory would return at once */
    if (c->src_mem.remembered && !us_classify_confirm_pageable(c->src))
        return false;
    struct us_pipe p;
    if (!us_pipe_begin(&p, c, home))
        return false;
    if (c->bytes <= us_config()->h2d_idle_native_bytes && us_pipe_stream_idle(&p)) {
        us_log_once(&logged_idle_native, US_LOG_INFO,
                    "a pageable H2D of up to h2d_idle_native_bytes on a stream with no work queued went native: "
                    "the driver waits for nothing then, and is as fast");
        us_pipe_end(&p);
        return false;
    }
    unsigned cap = us_pipe_claim_cap();
    struct us_pipe_slots s;
    if (!us_pipe_claim(&p, cap, US_PIPE_CLAIM_AVAILABLE, &s)) {
        us_pipe_end(&p);
        return false;
    }

    /* chunk i goes to slot i % s.n and is as long as that slot allows
     * (us_pipe_chunk_room: slots differ in size, staging.h) */
    cudaError_t err = cudaSuccess;
    size_t i = 0, off = 0;
    unsigned k = 0;
    for (; off < c->bytes; i++) {
        k = (unsigned)(i % s.n);
        size_t len = us_pipe_chunk_room(&s, k, c->bytes - off);
        if (s.pending[k] >= 0) { /* our own chunk i - s.n is still on its way */
            err = us_pipe_wait(&p, s.event[k]);
            if (err != cudaSuccess)
                break;
            s.pending[k] = -1;
        }
        us_hostcopy_to_staging(s.slot[k]->ptr, (const char *)c->src + off, len);
        US_PROBE_STAMP(host_copied);
        err = us_pipe_copy_chunk(&p, (char *)c->dst + off, s.slot[k]->ptr, len, cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            break;
        off += len;
        err = us_pipe_record(&p, s.event[k]);
        US_PROBE_STAMP(issued);
        s.pending[k] = err == cudaSuccess ? (int)p.stream_ctx->index : US_STAGING_LOST;
        if (err != cudaSuccess) {
            i++;
            break;
        }
    }
    if (i == 0) { /* the first chunk was refused: the native call gives the native error */
        us_pipe_release(&s);
        us_pipe_end(&p);
        return false;
    }
    if (err == cudaSuccess && us_copy_is_sync(c)) /* before release: nobody re-records it */
        err = us_pipe_wait(&p, s.event[k]);
    us_pipe_release(&s);
    *result = err;
    us_pipe_end(&p);
    return true;
}
