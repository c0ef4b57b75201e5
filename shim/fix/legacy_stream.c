/* legacy_stream.c - moving the program's legacy-stream work elsewhere
 * (legacy_stream.h says where, and what each mode keeps).
 *
 * ordered keeps, per context (context.h's table: a context made again at a
 * destroyed one's address gets another id, so nothing of the old one is
 * used), one non-blocking stream for the moved work, made on first need
 * under a mutex and read without one after; and per thread and context one
 * event that marks the end of the thread's latest moved operation for the
 * legacy stream to wait on (the wait takes the event's state when it is
 * enqueued, so the thread records it again next time). Handles of a gone
 * context are never called: an entry whose id differs is made anew. */
#include "legacy_stream.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "classify.h"
#include "config.h"
#include "context.h"
#include "log.h"
#include "real.h"

static atomic_ullong moved;

struct ordered_stream {
    _Atomic uint64_t ctx_id; /* 0: none yet; written after stream */
    cudaStream_t stream;
};
static struct ordered_stream ordered_streams[US_MAX_CONTEXTS];
static pthread_mutex_t ordered_mu = PTHREAD_MUTEX_INITIALIZER;

struct thread_event {
    uint64_t ctx_id;
    cudaEvent_t event;
};
static __thread struct thread_event thread_events[US_MAX_CONTEXTS];

static cudaStream_t ordered_stream_of(const struct us_ctx *ctx)
{
    struct ordered_stream *slot = &ordered_streams[ctx->index];
    if (atomic_load_explicit(&slot->ctx_id, memory_order_acquire) == ctx->id)
        return slot->stream;
    cudaStream_t stream = NULL;
    pthread_mutex_lock(&ordered_mu);
    if (atomic_load_explicit(&slot->ctx_id, memory_order_relaxed) == ctx->id) {
        stream = slot->stream;
    } else if (us_real()->cudaStreamCreateWithFlags != NULL &&
               us_real()->cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess) {
        slot->stream = stream;
        atomic_store_explicit(&slot->ctx_id, ctx->id, memory_order_release);
    } else {
        stream = NULL;
    }
    pthread_mutex_unlock(&ordered_mu);
    return stream;
}

static cudaEvent_t thread_event_of(const struct us_ctx *ctx)
{
    struct thread_event *te = &thread_events[ctx->index];
    if (te->ctx_id == ctx->id)
        return te->event;
    cudaEvent_t event = NULL;
    if (us_real()->cudaEventCreateWithFlags == NULL ||
        us_real()->cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess)
        return NULL;
    *te = (struct thread_event){.ctx_id = ctx->id, .event = event};
    return event;
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

cudaStream_t us_legacy_move_begin(cudaStream_t stream, bool per_thread, bool via_driver, struct us_legacy_move *m)
{
    *m = (struct us_legacy_move){.ordered = false, .to = stream, .done = NULL};
    int mode = us_config()->legacy_stream;
    if (mode == US_LEGACY_KEEP || us_stream_kind_of(stream, per_thread) != US_STREAM_LEGACY)
        return stream;
    if (mode == US_LEGACY_ORDERED && via_driver) {
        static int logged;
        us_log_once(&logged, US_LOG_WARN,
                    "legacy_stream=ordered moves nothing in this program: its stream-0 work reaches unstall at the "
                    "driver layer (static CUDA runtime or driver API), where kernel launches and event waits are not "
                    "seen, and a moved copy could pass them; legacy_stream=per_thread is safe there (docs/findings.md, "
                    "case E)");
        return stream;
    }
    if (mode == US_LEGACY_PER_THREAD) {
        m->to = cudaStreamPerThread;
    } else {
        const struct us_ctx *ctx = us_context_this();
        cudaStream_t to = ctx != NULL ? ordered_stream_of(ctx) : NULL;
        cudaEvent_t done = to != NULL ? thread_event_of(ctx) : NULL;
        if (done == NULL)
            return stream; /* nothing made: the call stays where it was */
        m->to = to;
        m->done = done;
        m->ordered = true;
    }
    log_first_move(mode);
    atomic_fetch_add_explicit(&moved, 1, memory_order_relaxed);
    return m->to;
}

void us_legacy_move_end(const struct us_legacy_move *m, bool issued)
{
    if (!m->ordered || !issued)
        return;
    if (us_real()->cudaEventRecord(m->done, m->to) != cudaSuccess ||
        us_real()->cudaStreamWaitEvent(cudaStreamLegacy, m->done, 0) != cudaSuccess) {
        static int logged;
        us_log_once(&logged, US_LOG_WARN,
                    "legacy_stream=ordered: the legacy stream could not be made to wait for moved work; later "
                    "blocking-stream work may not wait for it");
    }
}

bool us_legacy_streamless_to_per_thread(bool per_thread)
{
    if (per_thread || us_config()->legacy_stream != US_LEGACY_PER_THREAD)
        return false;
    log_first_move(US_LEGACY_PER_THREAD);
    atomic_fetch_add_explicit(&moved, 1, memory_order_relaxed);
    return true;
}

unsigned long long us_legacy_moved_count(void)
{
    return atomic_load_explicit(&moved, memory_order_relaxed);
}
