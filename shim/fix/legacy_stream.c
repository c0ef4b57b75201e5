/* legacy_stream.c - moving the program's legacy-stream work elsewhere
 * (legacy_stream.h says where, and what each mode keeps).
 *
 * ordered keeps, per context (context.h's table: a context made again at a
 * destroyed one's address gets another id, so nothing of the old one is
 * used), one non-blocking stream for the moved work and one event that marks
 * the end of the latest moved operation for the legacy stream to wait on,
 * made on first need under a mutex and read without one after. The record
 * and the wait are one step under the context's mutex (the wait takes the
 * event's state when it is enqueued, so it can be recorded again at once);
 * only programs that asked for ordered take it. Handles of a gone context
 * are never called: an entry whose id differs is made anew. */
#include "legacy_stream.h"
#include "hot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "classify.h"
#include "config.h"
#include "context.h"
#include "log.h"
#include "real.h"
#include "state.h"

struct ordered_target {
    _Atomic uint64_t ctx_id; /* 0: none yet; written after the handles */
    cudaStream_t stream;
    cudaEvent_t done;
    pthread_mutex_t mark_mu; /* one record-and-wait at a time */
};
static struct ordered_target targets[US_MAX_CONTEXTS];
static pthread_mutex_t make_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t targets_once = PTHREAD_ONCE_INIT;

static void init_targets(void)
{
    for (unsigned i = 0; i < US_MAX_CONTEXTS; i++)
        pthread_mutex_init(&targets[i].mark_mu, NULL);
}

static bool make_target(struct ordered_target *t, uint64_t ctx_id)
{
    const struct us_real_api *real = us_real();
    cudaStream_t stream = NULL;
    cudaEvent_t done = NULL;
    if (real->cudaStreamCreateWithFlags == NULL || real->cudaEventCreateWithFlags == NULL ||
        real->cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
        return false;
    if (real->cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess) {
        real->cudaStreamDestroy(stream);
        return false;
    }
    t->stream = stream;
    t->done = done;
    atomic_store_explicit(&t->ctx_id, ctx_id, memory_order_release);
    return true;
}

/* The context's target, made on first need; NULL when it cannot be made. */
static struct ordered_target *target_of(const struct us_ctx *ctx)
{
    struct ordered_target *t = &targets[ctx->index];
    if (atomic_load_explicit(&t->ctx_id, memory_order_acquire) == ctx->id)
        return t;
    pthread_once(&targets_once, init_targets);
    pthread_mutex_lock(&make_mu);
    bool ready = atomic_load_explicit(&t->ctx_id, memory_order_relaxed) == ctx->id || make_target(t, ctx->id);
    pthread_mutex_unlock(&make_mu);
    return ready ? t : NULL;
}

static void log_first_move(int mode)
{
    static int logged;
    us_log_once(&logged, US_LOG_INFO,
                "legacy_stream=%s: the program's work on the legacy default stream now goes to %s (docs/findings.md, "
                "case E)",
                mode == US_LEGACY_ORDERED ? "ordered" : "per_thread",
                mode == US_LEGACY_ORDERED ? "a non-blocking stream of unstall's, which the legacy stream waits for"
                                          : "each thread's per-thread default stream");
}

US_HOT cudaStream_t us_legacy_move_begin(cudaStream_t stream, bool per_thread, bool via_driver, struct us_legacy_move *m)
{
    *m = (struct us_legacy_move){.ordered = false, .to = stream, .target = NULL};
    int mode = us_config()->legacy_stream;
    if (mode == US_LEGACY_KEEP || us_stream_kind_of(stream, per_thread) != US_STREAM_LEGACY)
        return stream;
    if (mode == US_LEGACY_ORDERED && via_driver) {
        static int logged;
        us_log_once(&logged, US_LOG_WARN,
                    "legacy_stream=ordered leaves stream-0 copies that reach unstall at the driver layer (a static CUDA "
                    "runtime's or a driver-API call's) where they are: kernel launches and event waits on stream 0 "
                    "are not seen there, and a moved copy could pass them; legacy_stream=per_thread moves them "
                    "safely (docs/findings.md, case E)");
        return stream;
    }
    if (mode == US_LEGACY_PER_THREAD) {
        m->to = cudaStreamPerThread;
    } else {
        const struct us_ctx *ctx = us_context_this();
        struct ordered_target *t = ctx != NULL ? target_of(ctx) : NULL;
        if (t == NULL)
            return stream; /* nothing made: the call stays where it was */
        m->to = t->stream;
        m->target = t;
        m->ordered = true;
    }
    log_first_move(mode);
    us_state_note_legacy_moved();
    return m->to;
}

US_HOT void us_legacy_move_end(const struct us_legacy_move *m, bool issued)
{
    if (!m->ordered || !issued)
        return;
    struct ordered_target *t = m->target;
    const struct us_real_api *real = us_real();
    pthread_mutex_lock(&t->mark_mu);
    bool marked = real->cudaEventRecord(t->done, t->stream) == cudaSuccess &&
                  real->cudaStreamWaitEvent(cudaStreamLegacy, t->done, 0) == cudaSuccess;
    pthread_mutex_unlock(&t->mark_mu);
    if (!marked) {
        static int logged;
        us_log_once(&logged, US_LOG_WARN,
                    "legacy_stream=ordered: the legacy stream could not be made to wait for moved work; later "
                    "blocking-stream work may not wait for it");
    }
}

US_HOT bool us_legacy_streamless_to_per_thread(bool per_thread)
{
    if (per_thread || us_config()->legacy_stream != US_LEGACY_PER_THREAD)
        return false;
    log_first_move(US_LEGACY_PER_THREAD);
    us_state_note_legacy_moved();
    return true;
}
