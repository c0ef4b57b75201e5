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
 * time, so the host waits for nothing when the pool has them. While the pool
 * grows it gets fewer (a process's first copies of a size: the grower
 * thread pins the rest meanwhile); with none ready it goes native at once
 * (no free slot and no room to grow: native too). What its slots cannot take
 * then:
 *  - behind queued work (an asynchronous copy whose stream, or a stream it
 *    waits for, is not idle): the bytes are copied into spill memory
 *    (spill.h: ordinary memory, at host-memory speed, on the copy threads)
 *    and the call returns; for each further chunk a host function on the
 *    user stream copies it from there into its slot, which the chunk before
 *    it in the same slot has left by then (stream order), then the transfer
 *    and the slot's event follow it. The caller is freed after reading its
 *    source once, whatever the pool holds: before, it cycled through the
 *    slots it had, waiting for its own earlier chunks, which wait for the
 *    queue (a process's first 16 MiB copy behind a 200 ms kernel held its
 *    caller 200 ms on an H100, docs/pipelines.md).
 *  - on an idle stream, or without spill memory (spill_max): it cycles
 *    through its slots, waiting for its own earlier chunks (never another
 *    stream's work), as fast as the transfers go; behind queued work that
 *    wait holds the caller, and the copy is reported held, not fixed.
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

#include <stdatomic.h>

#include "classify.h"
#include "config.h"
#include "grower.h"
#include "hostcopy.h"
#include "log.h"
#include "pipeline_common.h"
#include "probe.h"
#include "spill.h"

static int logged_idle_native;

/* The spilled part of one copy, and a host function's argument per chunk
 * that is fed from it. The issuing call holds one reference and every host
 * function it enqueued one; the last to let go gives the spill back. A host
 * function that never runs (CUDA skips them in a failed context) keeps its
 * reference: that spill stays taken, within spill_max. The feed and its
 * chunks live in the spill, past the spilled bytes. */
struct feed;
struct feed_chunk {
    struct feed *feed;
    char *slot;
    const char *from;
    size_t len;
};
struct feed {
    atomic_uint refs;
    struct us_spill *spill;
    size_t spilled_from; /* the copy's offset of the spill's first byte */
    struct feed_chunk chunk[];
};

static void feed_put(struct feed *f)
{
    if (atomic_fetch_sub(&f->refs, 1) == 1)
        us_spill_give(f->spill); /* the feed with it */
}

/* A host function on the user stream: the chunk's bytes into its slot. No
 * CUDA call, no logging (it runs on CUDA's thread). */
static void CUDART_CB feed_chunk(void *arg)
{
    struct feed_chunk *c = arg;
    us_hostcopy_to_staging(c->slot, c->from, c->len);
    feed_put(c->feed);
}

/* The bytes the claimed slots take at once, one chunk each. */
static size_t slots_room(const struct us_pipe_slots *s, size_t *least)
{
    size_t room = 0;
    *least = SIZE_MAX;
    for (unsigned k = 0; k < s->n; k++) {
        size_t r = us_pipe_chunk_room(s, k, SIZE_MAX);
        room += r;
        if (r < *least)
            *least = r;
    }
    return room;
}

/* A feed for the copy's bytes past its slots' first round, when they cannot
 * take it whole and it may not wait for them: an asynchronous copy behind
 * queued work (*behind_queue; a stream the shim cannot tell idle counts as
 * busy). NULL: none needed, or none to be had (the copy cycles). */
static struct feed *feed_for(struct us_pipe *p, const struct us_copy *c, const struct us_pipe_slots *s,
                             bool *behind_queue)
{
    size_t least, room = slots_room(s, &least);
    *behind_queue = room < c->bytes && !us_copy_is_sync(c) && !us_pipe_stream_idle(p);
    US_PROBE_STAMP(queue_known);
    if (!*behind_queue || us_config()->spill_max == 0)
        return NULL;
    /* the feed lives in the spill, past its bytes: no malloc, which may
     * grow the heap and wait, as an mmap does, for the grower's page
     * population (1.4 ms on an H100 host) */
    size_t chunks = (c->bytes - room) / least + 1;
    size_t at = (c->bytes - room + _Alignof(struct feed) - 1) / _Alignof(struct feed) * _Alignof(struct feed);
    struct us_spill *spill;
    if (!us_spill_take(at + sizeof(struct feed) + chunks * sizeof(struct feed_chunk), &spill))
        return NULL;
    US_PROBE_STAMP(spill_taken);
    struct feed *f = (struct feed *)(us_spill_memory(spill) + at);
    f->spill = spill;
    atomic_init(&f->refs, 1);
    f->spilled_from = room;
    return f;
}

/* Chunk i's bytes, `len` from `off`, into slot k: by the caller now (after
 * its own chunk before it in that slot, if any, is done: *waited), or, fed
 * (feed set and past the slots' first round), by a host function on the
 * stream, from the spill, which the caller fills on the first such chunk. */
static cudaError_t fill_chunk(struct us_pipe *p, const struct us_copy *c, struct us_pipe_slots *s, struct feed *feed,
                              size_t i, unsigned k, size_t off, size_t len, bool *waited)
{
    if (feed == NULL || i < s->n) {
        if (s->pending[k] >= 0) { /* our own chunk i - s->n is still on its way */
            *waited = true;
            cudaError_t err = us_pipe_wait(p, s->event[k]);
            if (err != cudaSuccess)
                return err;
            s->pending[k] = -1;
        }
        us_hostcopy_to_staging(s->slot[k]->ptr, (const char *)c->src + off, len);
        return cudaSuccess;
    }
    char *spill = us_spill_memory(feed->spill);
    if (i == s->n) { /* the rest of the source, once; read again only by the host functions */
        if (us_spill_fresh(feed->spill)) /* parts of whole huge pages: each faults in on one thread */
            us_hostcopy_to_fresh(spill, (const char *)c->src + off, c->bytes - off);
        else
            us_hostcopy_to_staging(spill, (const char *)c->src + off, c->bytes - off);
        US_PROBE_STAMP(spilled);
    }
    struct feed_chunk *fc = &feed->chunk[i - s->n];
    *fc = (struct feed_chunk){.feed = feed, .slot = s->slot[k]->ptr, .from = spill + (off - feed->spilled_from),
                              .len = len};
    atomic_fetch_add(&feed->refs, 1);
    cudaError_t err = us_pipe_host_func(p, feed_chunk, fc);
    if (err != cudaSuccess)
        atomic_fetch_sub(&feed->refs, 1);
    US_PROBE_STAMP(fed);
    return err;
}

/* One round: every chunk in a slot of its own (the slots hold the copy
 * whole), or the slots' first round and the spill for the rest (a feed). The
 * whole host side is one job of the copy threads (us_hostcopy_segments_to_
 * staging: a segment per chunk, and the spill), and each chunk's transfer is
 * issued as soon as its bytes are in, while the threads copy the next: with
 * a job per chunk they waited at every chunk's end for its last part and for
 * the caller's CUDA calls. A copy that cycles through its slots (issue) keeps
 * its count of chunks issued here too, and issues each the same way
 * (issue_chunk). */
struct round {
    struct us_pipe *p;
    const struct us_copy *c;
    struct us_pipe_slots *s;
    struct feed *feed;
    unsigned nslotted;     /* chunks in the first round: segments 0 .. nslotted - 1 */
    size_t off[US_STAGING_MAX_CLAIM], len[US_STAGING_MAX_CLAIM];
    size_t spilled_from;   /* the rest, in the spill segment (feed set) */
    size_t issued;         /* chunks issued */
    unsigned last_slot;    /* of the last chunk issued */
    cudaError_t err;
};

static bool issue_chunk(struct round *r, unsigned k, size_t off, size_t len)
{
    r->err = us_pipe_copy_chunk(r->p, r->s, k, (char *)r->c->dst + off, r->s->slot[k]->ptr, len, cudaMemcpyHostToDevice);
    if (r->err != cudaSuccess)
        return false;
    r->issued++;
    r->last_slot = k;
    r->err = us_pipe_record(r->p, r->s->event[k]);
    US_PROBE_STAMP(issued);
    r->s->pending[k] = r->err == cudaSuccess ? (int)r->p->stream_ctx->index : US_STAGING_LOST;
    return r->err == cudaSuccess;
}

/* The spilled bytes are in: each further chunk is fed into its slot by a
 * host function on the stream, then transferred. */
static bool feed_rest(struct round *r)
{
    struct us_pipe_slots *s = r->s;
    char *spill = us_spill_memory(r->feed->spill);
    size_t off = r->spilled_from;
    for (size_t i = s->n; off < r->c->bytes; i++) {
        unsigned k = (unsigned)(i % s->n);
        size_t len = us_pipe_chunk_room(s, k, r->c->bytes - off);
        struct feed_chunk *fc = &r->feed->chunk[i - s->n];
        *fc = (struct feed_chunk){.feed = r->feed, .slot = s->slot[k]->ptr, .from = spill + (off - r->spilled_from),
                                  .len = len};
        atomic_fetch_add(&r->feed->refs, 1);
        r->err = us_pipe_host_func(r->p, feed_chunk, fc);
        if (r->err != cudaSuccess) {
            atomic_fetch_sub(&r->feed->refs, 1);
            return false;
        }
        US_PROBE_STAMP(fed);
        if (!issue_chunk(r, k, off, len))
            return false;
        off += len;
    }
    return true;
}

static bool round_segment_ready(void *arg, unsigned segment)
{
    struct round *r = arg;
    US_PROBE_STAMP(host_copied);
    if (segment < r->nslotted)
        return issue_chunk(r, segment, r->off[segment], r->len[segment]);
    US_PROBE_STAMP(spilled);
    return feed_rest(r);
}

/* Plans and runs the round; false (nothing planned) when a slot would take
 * two chunks, which then cycle. */
static bool issue_round(struct round *r)
{
    struct us_pipe_slots *s = r->s;
    struct us_hostcopy_segment seg[US_STAGING_MAX_CLAIM + 1];
    size_t off = 0;
    unsigned k = 0;
    for (; k < s->n && off < r->c->bytes; k++) {
        r->off[k] = off;
        r->len[k] = us_pipe_chunk_room(s, k, r->c->bytes - off);
        seg[k] = (struct us_hostcopy_segment){.dst = s->slot[k]->ptr, .src = (const char *)r->c->src + off,
                                              .bytes = r->len[k]};
        off += r->len[k];
    }
    r->nslotted = k;
    unsigned nsegs = k;
    if (off < r->c->bytes) {
        if (r->feed == NULL)
            return false;
        r->spilled_from = off;
        seg[nsegs++] = (struct us_hostcopy_segment){.dst = us_spill_memory(r->feed->spill),
                                                    .src = (const char *)r->c->src + off,
                                                    .bytes = r->c->bytes - off,
                                                    .fresh = us_spill_fresh(r->feed->spill)};
    }
    (void)us_hostcopy_segments_to_staging(seg, nsegs, round_segment_ready, r);
    return true;
}

static bool issue(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result, bool *held);

bool us_pipeline_h2d_held(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result, bool *held)
{
    *held = false;
    /* a source taken as pageable on a remembered answer (hostpages.h) is
     * asked about before anything is issued: the rewrite waits for its
     * slots, where the native copy from pinned memory would return at once */
    if (c->src_mem.remembered && !us_classify_confirm_pageable(c->src))
        return false;
    us_grower_yield_begin();
    bool done = issue(c, home, result, held);
    us_grower_yield_end();
    return done;
}

static bool issue(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result, bool *held)
{
    struct us_pipe p;
    if (!us_pipe_begin(&p, c, home))
        return false;
    if (us_pipe_native_when_idle(&p, us_config()->h2d_idle_native_bytes, &logged_idle_native,
                                 "a pageable H2D of up to h2d_idle_native_bytes on a stream with no work queued went "
                                 "native: the driver waits for nothing then, and is as fast"))
        return false;
    us_spill_warm_start(); /* the program copies pageable memory to the device: its first large spill may come */
    unsigned cap = us_pipe_claim_cap();
    struct us_pipe_slots s;
    if (!us_pipe_claim(&p, cap, US_PIPE_CLAIM_AVAILABLE, &s)) {
        us_pipe_end(&p);
        return false;
    }
    bool behind_queue;
    struct feed *feed = feed_for(&p, c, &s, &behind_queue);

    bool waited = false;
    struct round r = {.p = &p, .c = c, .s = &s, .feed = feed, .err = cudaSuccess};
    if (!issue_round(&r)) {
        /* chunk i goes to slot i % s.n, which it shares with chunks before
         * it, and is as long as that slot allows (us_pipe_chunk_room: slots
         * differ in size, staging.h) */
        for (size_t off = 0; off < c->bytes;) {
            unsigned k = (unsigned)(r.issued % s.n);
            size_t len = us_pipe_chunk_room(&s, k, c->bytes - off);
            r.err = fill_chunk(&p, c, &s, feed, r.issued, k, off, len, &waited);
            if (r.err != cudaSuccess)
                break;
            US_PROBE_STAMP(host_copied);
            if (!issue_chunk(&r, k, off, len)) /* its copy refused, or its event not recorded */
                break;
            off += len;
        }
    }
    if (feed != NULL)
        feed_put(feed);
    if (r.issued == 0) { /* the first chunk was refused: the native call gives the native error */
        us_pipe_release(&s);
        us_pipe_end(&p);
        return false;
    }
    cudaError_t err = r.err;
    if (err == cudaSuccess && us_copy_is_sync(c)) /* before release: nobody re-records it */
        err = us_pipe_wait(&p, s.event[r.last_slot]);
    /* an asynchronous copy that waited for its own chunks behind queued work
     * (no spill) held its caller as the native copy would have */
    *held = waited && behind_queue;
    us_pipe_release(&s);
    *result = err;
    us_pipe_end(&p);
    return true;
}

bool us_pipeline_h2d(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result)
{
    bool held;
    return us_pipeline_h2d_held(c, home, result, &held);
}
