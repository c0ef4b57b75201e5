/* engine_late.h - whether same-device D2D copies start late because the
 * compute engine is busy (case D, rule busy_engine_d2d).
 *
 * A same-device copy runs as a kernel. Behind a kernel of its own context
 * that holds every SM it waits until that kernel ends; behind any kernel of
 * another context, a time slice (2 ms by default) per burst (measured on
 * H200s: 197.9 ms for the first burst behind a 200 ms kernel of the same
 * context; 2.44 ms every burst of 8 x 1 MiB in a created context, instead
 * of 40 us). Whether that happens is not known at the call: it is
 * measured. Now and then (at most once per busy_d2d_probe_ms per stream) a
 * copy is timed by a pair of timing events around it on its own stream; a
 * later copy of that stream reads the pair with cudaEventQuery (never a
 * wait) and learns how much longer the copy took than its size explains:
 * how late it started. In a context that competes with another one for the
 * device (cuCtxCreate beside an active primary context) the whole context is
 * off the engine while the other one runs, and its events wait with its
 * copies (measured on an H200): there a probe on an idle stream is read at
 * the program's next synchronization of the stream (us_engine_sync_begin):
 * the host time from the call to the sync's return, less the GPU time of the
 * stream's work, is how late. The verdict is kept per stream, and the remedy
 * (fix/d2d_stage.c) follows it.
 *
 * Per stream (and context, and thread for the per-thread stream) one slot of
 * a small table, each with its own lock, taken with trylock: a copy that
 * finds its slot busy or the table full is neither timed nor staged. Cost of
 * a copy when no probe is due: a hash, a trylock (the context is the chain's,
 * us_context_this: one cuCtxGetCurrent for the whole copy). */
#ifndef UNSTALL_ENGINE_LATE_H
#define UNSTALL_ENGINE_LATE_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "context.h"
#include "copy.h"

struct us_engine_slot;

/* One same-device copy's dealings with its stream's slot, from
 * us_engine_begin to us_engine_end. */
struct us_engine_call {
    struct us_engine_slot *slot; /* held for this copy; NULL: nothing to do */
    cudaStream_t stream;         /* explicit handle (us_copy_stream) */
    CUcontext context;           /* the issuing context */
    bool probe;                  /* time this copy natively */
    bool sync_probe;             /* and read it at a sync of its stream (a competing context) */
    bool stage;                  /* this stream's copies are late: the remedy may stage this one */
    bool finished;               /* a probe of this stream finished now */
    uint64_t late_ns;            /* finished late: how late its copy started; 0: on time */
    size_t late_bytes;           /* the size of that copy */
};

/* Before a same-device D2D copy `c` issued in context `home` (NULL: nothing
 * to do). Reads the stream's pending probe if its events are done, and
 * decides whether to time this copy. */
void us_engine_begin(const struct us_copy *c, const struct us_config *cfg, const struct us_ctx *home,
                     struct us_engine_call *call);

/* Inside the program's first device allocation: the slot table set up (its
 * 48 KiB first touched: 11 us on an H200 host when that was inside a
 * process's first same-device copy), and a pair of timing events made in
 * the current context for its first timed copy (about 4 us there). Once a
 * process, nothing when timed copies and their remedy are off (cfg); the
 * pair goes with its context. */
void us_engine_prepare(const struct us_config *cfg);

/* After a context is gone: its streams' slots are forgotten (their timing
 * events went with it; never called again). */
void us_engine_forget_context(const struct us_ctx *gone);

/* The copy natively, timed when call->probe (an event pair on its stream). */
cudaError_t us_engine_native(const struct us_copy *c, struct us_engine_call *call);

/* After the copy: gives the slot back. */
void us_engine_end(struct us_engine_call *call);

/* The staging buffer of the slot (fix/d2d_stage.c owns what is in it):
 * pinned host memory that only this stream's copies use, in stream order. */
struct us_engine_stage {
    void *host;
    size_t bytes;
};
struct us_engine_stage *us_engine_stage_of(struct us_engine_call *call);

/* How late a timed copy of `bytes` started, given its event-measured time:
 * what exceeds what its size explains (a same-device copy moves at least
 * 200 GB/s, plus 50 us), 0 when nothing. Pure (unit tested). */
uint64_t us_engine_lateness_ns(double elapsed_ms, size_t bytes);

/* A synchronization of a stream (cudaStreamSynchronize): where a probe of a
 * competing context waits for it, an event recorded at the call and the
 * host time at its return give how long the stream's work waited before it
 * ran (a context off the engine waits as a whole: its events too, and its
 * host functions run without it). One atomic load when no probe waits. */
struct us_engine_sync {
    bool armed;
    bool per_thread;
    cudaStream_t stream;
    uint64_t ctx_id; /* us_context_this()->id */
};
void us_engine_sync_begin(cudaStream_t stream, bool per_thread_api, struct us_engine_sync *sync);
void us_engine_sync_end(const struct us_engine_sync *sync, bool synchronized);

/* How long a stream waited before its work ran: the host time from the
 * probe's call to the sync's return, less the GPU time of the stream's work
 * from the probe to the sync (its events), less 50 us for the sync's own
 * return. Pure (unit tested). */
uint64_t us_engine_sync_delay_ns(uint64_t issued_ns, uint64_t synced_ns, double gpu_ms);

/* Tests: forget every slot (the events and buffers are leaked on purpose:
 * they may belong to contexts gone by now). */
void us_engine_reset(void);

#endif
