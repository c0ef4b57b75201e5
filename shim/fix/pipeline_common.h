/* pipeline_common.h - what the three pipelines share: the checks before a
 * rewrite (capture, stream, device), the capture mode the shim's own calls run
 * in, chunk arithmetic, and events and streams made on a given device.
 *
 * A pipeline brackets its work with us_pipe_begin/us_pipe_end. Between them
 * every CUDA call of the shim on this thread runs in relaxed capture mode
 * (contract.md §7): it cannot invalidate a global-mode capture that
 * another thread has in progress. */
#ifndef UNSTALL_PIPELINE_COMMON_H
#define UNSTALL_PIPELINE_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "context.h"
#include "copy.h"
#include "real.h"
#include "real_driver.h"
#include "staging.h"

struct us_pipe {
    const struct us_real_api *real;
    /* libcuda's functions for the stream and event calls (real_driver.h):
     * set where the stream is in the current context; NULL: the runtime's */
    const struct us_real_driver *drv;
    /* the table the capture mode was exchanged with (NULL: the runtime's), so
     * that us_pipe_end restores it with the same */
    const struct us_real_driver *mode_drv;
    const struct us_copy *copy;
    cudaStream_t stream;  /* us_copy_stream(): explicit, valid for the plain entries */
    int stream_device;    /* the device the stream belongs to */
    int current_device;   /* the caller's, restored after any switch */
    const struct us_ctx *home;       /* the context the copy is issued in (current) */
    const struct us_ctx *stream_ctx; /* the stream's: home, or another device's primary context */
    enum cudaStreamCaptureMode saved_mode;
    unsigned inflight;    /* its entry in the in-flight table (inflight.h) */
};

/* The checks every pipeline makes before it issues anything: the runtime
 * has the functions the pipelines call, the stream is valid and not
 * capturing. Switches this thread to relaxed capture mode and registers the
 * copy's device ranges as in flight (a release waits for them until
 * us_pipe_end). False: declined,
 * the reason logged once, the mode restored; the caller goes native. */
bool us_pipe_begin(struct us_pipe *p, const struct us_copy *c, const struct us_ctx *home);

/* Releases the copy's device ranges and restores the capture mode. The
 * caller records the copy's span (chain.c), from the times it takes around
 * the whole call anyway: two clock reads fewer per rewritten copy, 40 ns each
 * on an H200 host under KVM. */
void us_pipe_end(struct us_pipe *p);

/* Slots of the shared staging pool that one copy holds, with their events in
 * the stream's context, and what each one is when given back. */
struct us_pipe_slots {
    unsigned n;
    size_t piece; /* the slot size the copy asked for: its longest chunk, in a larger slot too */
    struct us_slot *slot[US_STAGING_MAX_CLAIM];
    cudaEvent_t event[US_STAGING_MAX_CLAIM];
    int pending[US_STAGING_MAX_CLAIM]; /* -1 free, a context index (the stream's), or US_STAGING_LOST */
};

/* The chunk that slot k takes from `left` bytes: as long as the slot, and no
 * longer than the piece the copy asked for. A larger slot (the pool's first
 * slots are pinned before any copy: us_staging_warm) carries the same chunks
 * as one of the copy's own size would, so a D2H still overlaps its copy-out
 * with the next chunk's transfer (us_staging_pieces). */
static inline size_t us_pipe_chunk_room(const struct us_pipe_slots *s, unsigned k, size_t left)
{
    size_t room = s->slot[k]->bytes < s->piece ? s->slot[k]->bytes : s->piece;
    return left < room ? left : room;
}

/* The most slots one copy claims: half of pinned_max, at least one. */
unsigned us_pipe_claim_cap(void);

/* How a copy takes its slots; each cycles through fewer than it wants.
 * AVAILABLE: the ready ones, and those missing when they fit the copy's
 * inline budget; else the grower is asked for them, and with none ready, none
 * (an H2D goes native meanwhile). SOME: as AVAILABLE, but with none ready one
 * slot is pinned inside the call (a D2H that must not go native). READY: as
 * AVAILABLE when some slot is ready now, and none at all otherwise (nothing
 * pinned, nothing asked of the grower: the caller decides, us_pipe_grow_later). */
enum us_pipe_claim_mode { US_PIPE_CLAIM_AVAILABLE, US_PIPE_CLAIM_SOME, US_PIPE_CLAIM_READY };

/* Claims up to `want` slots for the copy (us_staging_claim_for_copy: all
 * free now, nobody waits for anything; no more than hold the whole copy;
 * pinned inside the call only within the copy's inline budget, else by the
 * grower thread) and their events in the stream's context. false: none to be
 * had, declined (logged once, unless READY found none ready); nothing is
 * held. */
bool us_pipe_claim(const struct us_pipe *p, unsigned want, enum us_pipe_claim_mode mode, struct us_pipe_slots *s);

/* Asks the grower thread for the slots the copy wants, for the copies to
 * come (us_staging_grow_later). false: it cannot grow in the background. */
bool us_pipe_grow_later(const struct us_pipe *p, unsigned want);

/* Whether nothing already queued can make a native copy on the pipe's
 * stream wait: the stream has no work left (cudaStreamQuery), and a stream
 * that synchronizes with others (the legacy stream, blocking streams, the
 * per-thread stream) none that it would wait for either: for a blocking or
 * per-thread stream the legacy stream is idle; for the legacy stream, every
 * blocking stream the program created on the device is (up to 8 of them,
 * and only where the shim saw them created: a copy through the runtime
 * layer). Asks nothing of a stream that is being captured. False when it
 * cannot tell, and for a stream of a device that is not current. */
bool us_pipe_stream_idle(const struct us_pipe *p);

/* Whether a copy of up to `limit` bytes goes native because its stream has
 * no work queued (us_pipe_stream_idle): the stall its rewrite is for is the
 * wait for queued work, and the driver's own path waits for nothing then
 * (options h2d_idle_native_bytes, peer_idle_native_bytes). When it does, logs
 * `why` once (per *logged) and ends the pipe: the caller declines. */
bool us_pipe_native_when_idle(struct us_pipe *p, size_t limit, int *logged, const char *why);

/* Gives the slots back, as s->pending says. */
void us_pipe_release(struct us_pipe_slots *s);

/* Chunk arithmetic. Chunks of `chunk` bytes, the last one shorter. */
static inline size_t us_pipe_chunks(size_t bytes, size_t chunk)
{
    return bytes / chunk + (bytes % chunk != 0);
}

static inline size_t us_pipe_chunk_len(size_t bytes, size_t chunk, size_t index)
{
    size_t off = index * chunk;
    return bytes - off < chunk ? bytes - off : chunk;
}

/* The chunk size of a staged peer copy through a ring of `ring_bytes`:
 * `slot_bytes` as long as that makes at most `max_chunks` chunks, else larger
 * (4 KiB multiples) so that the host time in the call stays bounded, but never
 * more than half the ring (two chunks in flight at least). */
size_t us_pipe_peer_chunk(size_t bytes, size_t slot_bytes, size_t ring_bytes, unsigned max_chunks);

/* The pipeline's copy of one chunk on its stream (kind: host to device or
 * device to host) through slot k of s (a pieced slot's copy in parts that end
 * where its pieces end; a part refused after others were queued makes the
 * slot lost), and its event's record there: libcuda's function where
 * p->drv is set, else the runtime's; a driver call that fails is made again
 * through the runtime (nothing was queued), whose error the caller returns as
 * the native call would. */
cudaError_t us_pipe_copy_chunk(const struct us_pipe *p, struct us_pipe_slots *s, unsigned k, void *dst,
                               const void *src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t us_pipe_record(const struct us_pipe *p, cudaEvent_t event);

/* A host function on the pipe's stream, in stream order (as the chunk copies:
 * libcuda's where p->drv is set, else the runtime's). CUDA skips it when the
 * context has failed, and runs it on a thread of its own that must make no
 * CUDA call. */
cudaError_t us_pipe_host_func(const struct us_pipe *p, cudaHostFn_t fn, void *data);

/* Waits until the shim's own event completed; returns cudaSuccess or the
 * error the event reports: cuEventSynchronize or cudaEventSynchronize, as
 * above (pipeline_common.c says what polling cost). Its cost follows the
 * scheduling flags the program chose (spin, yield, blocking sync), as the
 * program's own waits do. */
cudaError_t us_pipe_wait(const struct us_pipe *p, cudaEvent_t event);

/* The error a CUDA call failed with, or `err` when it is cudaSuccess: for
 * chaining "first error wins". */
static inline cudaError_t us_pipe_first(cudaError_t first, cudaError_t err)
{
    return first != cudaSuccess ? first : err;
}

#endif
