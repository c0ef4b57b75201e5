/* pipeline_d2h.c - case C: a device-to-host copy into pageable memory, which
 * the driver does holding a lock that other threads' launches wait for (a
 * program where the copy waits for work another thread must launch hangs:
 * the stream-0 D2H deadlock, case_c_pageable_d2h's deadlock test).
 *
 * Chunks go device-to-pinned on the user stream (stream order by
 * construction), each followed by its slot's event; the host waits for each
 * chunk's event with us_pipe_wait, and copies it out with us_hostcopy while
 * the next `slots` chunks are in flight. The call returns with the data in
 * place, as native does. 3 calls per chunk: cuMemcpyDtoHAsync, cuEventRecord,
 * cuEventSynchronize where the stream is in the current context, else the
 * runtime's (pipeline_common.h).
 *
 * It runs with fewer slots than it wants while the grower thread adds the
 * rest (staging.h). With none ready (a process's first D2H), it goes native
 * when its stream is idle, and else pins one slot inside the call: a native
 * D2H can deadlock a program whose stream waits for another thread's launch
 * (the stream-0 D2H deadlock), which an idle stream cannot (claim_slots). The
 * idle check is made only then: it costs two to four runtime calls, and on an
 * H100 host sending every small D2H on an idle stream to the native call
 * that way made them 4 us slower than the rewrite (docs/performance.md).
 *
 * There is no mode that returns before the data is in place (d2h_deferred
 * was removed): correctly ordered code that reads the buffer, or copies from
 * it on the same stream, right after the call would see stale bytes, and a
 * range check on every later host-memory copy would still miss a program
 * that reads the buffer directly. */
#include "pipeline.h"
#include "hot.h"

#include "classify.h"
#include "config.h"
#include "hostcopy.h"
#include "log.h"
#include "pipeline_common.h"
#include "probe.h"

static int logged_idle_native, logged_hugepages;

/* D2H of the chunk at `off`, `len` bytes, into slot k, then the slot's
 * event. *issued: the D2H was. */
US_HOT static cudaError_t issue_chunk(const struct us_pipe *p, struct us_pipe_slots *s, size_t off, size_t len,
                               unsigned k, bool *issued)
{
    const struct us_copy *c = p->copy;
    cudaError_t err = us_pipe_copy_chunk(p, s, k, s->slot[k]->ptr, (const char *)c->src + off, len,
                                         cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return err;
    *issued = true;
    err = us_pipe_record(p, s->event[k]);
    US_PROBE_STAMP(issued);
    s->pending[k] = err == cudaSuccess ? (int)p->stream_ctx->index : US_STAGING_LOST;
    return err;
}

/* The first chunks, one per slot: chunk j goes to slot j % s->n and is as
 * long as that slot allows (us_pipe_chunk_room: slots differ in size,
 * staging.h). run->issued: whether any chunk was. */
static void issue_first(struct us_d2h_run *run)
{
    const struct us_pipe *p = &run->p;
    struct us_pipe_slots *s = &run->s;
    const struct us_copy *c = p->copy;
    run->next = run->queued = 0;
    run->err = cudaSuccess;
    run->issued = false;
    for (unsigned k = 0; k < s->n && run->next < c->bytes && run->err == cudaSuccess; k++, run->queued++) {
        run->off[k] = run->next;
        run->len[k] = us_pipe_chunk_room(s, k, c->bytes - run->next);
        run->next += run->len[k];
        run->err = issue_chunk(p, s, run->off[k], run->len[k], k, &run->issued);
    }
}

/* Waits for each chunk in turn, copies it out and issues the next one into
 * its slot: returns with the data in place. */
static cudaError_t copy_rest(struct us_d2h_run *run)
{
    const struct us_pipe *p = &run->p;
    struct us_pipe_slots *s = &run->s;
    const struct us_copy *c = p->copy;
    cudaError_t err = run->err;
    for (size_t i = 0; i < run->queued && err == cudaSuccess; i++) {
        unsigned k = (unsigned)(i % s->n);
        err = us_pipe_wait(p, s->event[k]);
        if (err != cudaSuccess)
            break;
        s->pending[k] = -1;
        us_hostcopy((char *)c->dst + run->off[k], s->slot[k]->ptr, run->len[k]);
        US_PROBE_STAMP(host_copied);
        if (run->next < c->bytes) {
            run->off[k] = run->next;
            run->len[k] = us_pipe_chunk_room(s, k, c->bytes - run->next);
            run->next += run->len[k];
            run->queued++;
            err = issue_chunk(p, s, run->off[k], run->len[k], k, &run->issued);
        }
    }
    return err;
}

/* The slots the copy runs with. When none is ready (the process's first D2H,
 * or every slot busy), pinning one inside the call costs far more than a
 * small native copy (64 KiB took 0.25 ms on an H100 host, against 8-10 us for
 * a native 4 B D2H). The native call is safe where nothing already queued can
 * make it wait (us_pipe_stream_idle): the deadlock a native D2H causes needs a
 * stream that waits for another thread, as the stream-0 D2H deadlock's waits
 * for an event.
 * But it holds the runtime lock other threads' launches wait on for as long
 * as it copies: so only a copy of up to US_STAGING_INLINE_MAX (1 MiB: 0.14 ms
 * natively, less than pinning its slot) goes native then, while the grower
 * pins the slots; a larger one, or one behind queued work, pins one slot here,
 * as before (a first 256 MiB D2H sent native held another thread's launch
 * 243 ms: make torch-test's d2h_vs_launch case on an H100). */
static bool claim_slots(const struct us_pipe *p, unsigned want, struct us_pipe_slots *s)
{
    if (us_pipe_claim(p, want, US_PIPE_CLAIM_READY, s))
        return true;
    if (p->copy->bytes <= US_STAGING_INLINE_MAX && us_pipe_stream_idle(p) && us_pipe_grow_later(p, want)) {
        us_log_once(&logged_idle_native, US_LOG_INFO,
                    "a D2H found no pinned slot ready and its stream idle: it went native (it cannot wait for "
                    "another thread then) while a background thread pins the slots");
        return false;
    }
    return us_pipe_claim(p, want, US_PIPE_CLAIM_SOME, s);
}

US_HOT bool us_pipeline_d2h_start(const struct us_copy *c, const struct us_ctx *home, struct us_d2h_run *run)
{
    struct us_pipe *p = &run->p;
    if (!us_pipe_begin(p, c, home))
        return false;
    unsigned want = us_config()->slots;
    if (!claim_slots(p, want, &run->s)) {
        us_pipe_end(p);
        return false;
    }
    if (us_hostcopy_advise_fresh(c->dst, c->bytes))
        us_log_once(&logged_hugepages, US_LOG_INFO,
                    "a D2H into memory not yet mapped advised huge pages for its destination before copying into it "
                    "(option d2h_hugepages)");
    /* the first chunk's host copy comes after its DMA: sleeping copy
     * threads wake meanwhile */
    us_hostcopy_expect(us_pipe_chunk_room(&run->s, 0, c->bytes));
    issue_first(run);
    /* A destination taken as pageable on a remembered answer (hostpages.h)
     * is asked about now, while the first chunk is on the GPU. Pinned after
     * all, the native call copies it, queued after the chunk: asynchronous as
     * the program asked, where the rewrite would wait. The slots go back
     * with their chunks' events (staging.h). */
    bool refuted = run->issued && c->dst_mem.remembered && !us_classify_confirm_pageable(c->dst);
    if (!run->issued || refuted) { /* a refused first chunk: the native call gives the native error */
        us_pipe_release(&run->s);
        us_pipe_end(p);
        return false;
    }
    return true;
}

US_HOT cudaError_t us_pipeline_d2h_finish(struct us_d2h_run *run)
{
    cudaError_t err = copy_rest(run);
    us_pipe_release(&run->s);
    us_pipe_end(&run->p);
    return err;
}

bool us_pipeline_d2h(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result)
{
    struct us_d2h_run run;
    if (!us_pipeline_d2h_start(c, home, &run))
        return false;
    *result = us_pipeline_d2h_finish(&run);
    return true;
}
