/* engine_late.c - see engine_late.h. */
#include "engine_late.h"
#include "hot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "context.h"
#include "log.h"
#include "real.h"
#include "state.h"

#define SLOTS 256
#define PROBES 8 /* positions tried from a key's hash */

struct us_engine_slot {
    pthread_mutex_t lock;
    bool used;
    cudaStream_t stream;
    uint64_t ctx_id;          /* the context's us_ctx id: a later context at the same address is another */
    CUcontext context;
    pthread_t thread;         /* the per-thread stream's thread; else unused */
    cudaEvent_t start, end;   /* timing events of `context`; NULL until the first probe */
    bool pending;             /* the pair is recorded around a copy of pending_bytes */
    size_t pending_bytes;
    uint64_t last_probe_ns;
    bool late;                /* the last finished probe was late */
    /* a context that competes for the engine is off it as a whole: the event
     * pair waits with the copy and sees nothing (measured on an H200: a timed
     * copy "took 0.004 ms" in bursts of 2.44 ms), and a host function at the
     * head of an idle stream runs without the engine (0.03-0.2 ms after the
     * call). What sees it: when the program synchronizes the stream, an
     * event recorded at that moment gives the GPU time the stream's work
     * took since the probe began, and the host time from the call to the
     * sync's return, less that, is the wait before it ran. The GPU time is
     * counted from `head`, recorded at the probe's call on a stream of the
     * shim's own in the same context, idle by construction: it runs as soon
     * as the context has the engine, whatever the program's stream had
     * queued before the copy. */
    uint64_t issued_ns;
    cudaStream_t head_stream; /* the shim's, in this slot's context */
    cudaEvent_t head;
    bool wants_sync_reading;  /* a competing context's probe */
    bool tail_recorded;       /* `tail` is recorded at a sync of the stream */
    cudaEvent_t tail;
    uint64_t sync_late_ns;
    struct us_engine_stage stage;
};

static struct us_engine_slot slots[SLOTS];
/* probes waiting for a sync reading: a sync does nothing more while 0 */
static atomic_int sync_readings_wanted;
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;

static void slots_init(void)
{
    for (int i = 0; i < SLOTS; i++)
        pthread_mutex_init(&slots[i].lock, NULL);
}

/* The slot's objects of its context (events, the head stream): left to the
 * context, which may be gone, and never used in another. */
static void drop_context_objects(struct us_engine_slot *sl)
{
    sl->start = sl->end = sl->tail = sl->head = NULL;
    sl->head_stream = NULL;
}

/* A probe's sync reading is over (read, or its slot given up): a
 * synchronization stops looking once none is wanted. */
static void end_sync_reading(struct us_engine_slot *sl)
{
    if (sl->wants_sync_reading)
        atomic_fetch_sub(&sync_readings_wanted, 1);
    sl->wants_sync_reading = sl->tail_recorded = false;
    sl->sync_late_ns = 0;
}

uint64_t us_engine_lateness_ns(double elapsed_ms, size_t bytes)
{
    double expected_ns = 50e3 + (double)bytes / 200.0; /* 200 GB/s = 200 bytes per ns */
    double ns = elapsed_ms * 1e6;
    return ns > expected_ns ? (uint64_t)(ns - expected_ns) : 0;
}

static size_t key_hash(cudaStream_t s, uint64_t ctx, bool per_thread)
{
    uint64_t h = (uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ull ^ ctx * 0xC2B2AE3D27D4EB4Full;
    if (per_thread)
        h ^= (uint64_t)pthread_self() * 0x165667B19E3779F9ull;
    return (size_t)(h >> 17) % SLOTS;
}

static bool key_is(const struct us_engine_slot *sl, cudaStream_t s, uint64_t ctx, bool per_thread)
{
    return sl->stream == s && sl->ctx_id == ctx && (!per_thread || pthread_equal(sl->thread, pthread_self()));
}

/* The slot of (stream, context[, thread]), locked; NULL when busy or none.
 * A slot of another key is taken over only when nothing of it is in flight
 * and it owns no staging buffer (a buffer may still be read by its stream). */
static struct us_engine_slot *slot_take(cudaStream_t s, uint64_t ctx, bool per_thread)
{
    pthread_once(&slots_once, slots_init);
    size_t h = key_hash(s, ctx, per_thread);
    struct us_engine_slot *spare = NULL;
    for (size_t i = 0; i < PROBES; i++) {
        struct us_engine_slot *sl = &slots[(h + i) % SLOTS];
        if (pthread_mutex_trylock(&sl->lock) != 0)
            continue;
        if (sl->used && key_is(sl, s, ctx, per_thread)) {
            if (spare != NULL)
                pthread_mutex_unlock(&spare->lock);
            return sl;
        }
        if (spare == NULL && (!sl->used || (!sl->pending && sl->stage.host == NULL))) {
            spare = sl; /* kept locked */
            continue;
        }
        pthread_mutex_unlock(&sl->lock);
    }
    if (spare == NULL)
        return NULL;
    if (spare->used && spare->ctx_id != ctx)
        drop_context_objects(spare);
    spare->used = true;
    spare->stream = s;
    spare->ctx_id = ctx;
    spare->thread = pthread_self();
    spare->pending = false;
    end_sync_reading(spare);
    spare->late = false;
    /* a stream's first copy is not timed: recording the timing event before
     * it was, in a fresh stream, the stream's first work, which costs what
     * setting the stream up costs (a process's first same-device copy took
     * 59.7 us under the shim against 33.4 natively on an H200, the first
     * record alone 6-24 us); the first timed copy comes busy_d2d_probe_ms
     * later, at the stream's first copy after that */
    spare->last_probe_ns = us_now_ns();
    return spare;
}

/* The shim's own calls run in relaxed capture mode (contract.md §7). */
static bool relax(const struct us_real_api *real, enum cudaStreamCaptureMode *saved)
{
    *saved = cudaStreamCaptureModeRelaxed;
    return real->cudaThreadExchangeStreamCaptureMode != NULL &&
           real->cudaThreadExchangeStreamCaptureMode(saved) == cudaSuccess;
}

static void unrelax(const struct us_real_api *real, bool relaxed, enum cudaStreamCaptureMode *saved)
{
    if (relaxed)
        real->cudaThreadExchangeStreamCaptureMode(saved);
}

/* A pair of timing events made inside the program's first device
 * allocation, in its context, for the first slot of that context that times
 * a copy: made inside that copy instead, the process's first event creations
 * cost it about 4 us on an H200 host. ctx_id 0: none (context ids start at 1). */
static struct {
    pthread_mutex_t lock;
    uint64_t ctx_id;
    cudaEvent_t start, end;
} ready_pair = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void take_ready_pair(uint64_t ctx_id, cudaEvent_t *start, cudaEvent_t *end)
{
    pthread_mutex_lock(&ready_pair.lock);
    bool taken = ready_pair.ctx_id == ctx_id; /* a context's id is never 0 */
    if (taken) {
        *start = ready_pair.start;
        *end = ready_pair.end;
        ready_pair.ctx_id = 0;
    }
    pthread_mutex_unlock(&ready_pair.lock);
    if (taken)
        us_log(US_LOG_DEBUG, "busy_engine_d2d: a stream's first timed copy takes the timing events made at the "
                             "first device allocation");
}

/* The pair of a context that is gone went with it; a reset forgets it too. */
static void forget_ready_pair(uint64_t ctx_id)
{
    pthread_mutex_lock(&ready_pair.lock);
    if (ctx_id == 0 || ready_pair.ctx_id == ctx_id)
        ready_pair.ctx_id = 0;
    pthread_mutex_unlock(&ready_pair.lock);
}

/* Whether the timed copies and their remedy are both off: nothing to time,
 * nothing to prepare. */
static bool engine_off(const struct us_config *cfg)
{
    return cfg->busy_d2d_probe_ms == 0 && !cfg->fix_busy_d2d;
}

static atomic_bool prepared; /* us_engine_prepare ran (us_engine_reset clears it) */

void us_engine_prepare(const struct us_config *cfg)
{
    if (engine_off(cfg) || atomic_exchange(&prepared, true))
        return;
    pthread_once(&slots_once, slots_init);
    const struct us_real_api *real = us_real();
    const struct us_ctx *home = us_context_this();
    if (home == NULL || real->cudaEventCreateWithFlags == NULL || real->cudaEventDestroy == NULL)
        return;
    enum cudaStreamCaptureMode saved;
    bool relaxed = relax(real, &saved);
    cudaEvent_t start = NULL, end = NULL;
    bool ok = real->cudaEventCreateWithFlags(&start, cudaEventDefault) == cudaSuccess;
    if (ok && real->cudaEventCreateWithFlags(&end, cudaEventDefault) != cudaSuccess) {
        real->cudaEventDestroy(start);
        ok = false;
    }
    unrelax(real, relaxed, &saved);
    if (!ok)
        return;
    pthread_mutex_lock(&ready_pair.lock);
    ready_pair.ctx_id = home->id;
    ready_pair.start = start;
    ready_pair.end = end;
    pthread_mutex_unlock(&ready_pair.lock);
}

/* A pending probe is read no sooner than this after it was issued: reading
 * it costs a capture-mode exchange and an event read, and on an idle H200
 * doing that on every copy of a burst of 8 x 1 MiB D2D made each copy about
 * 2.4 us slower (burst 0.054 ms against 0.035 native). An on-time 1 MiB copy
 * takes about 40 us and a late one busy_d2d_late_us or more, so nothing is
 * learned sooner. */
#define ENGINE_READ_AFTER_NS 200000u

/* Reads a pending probe if its end event is done (never waits). */
static void read_probe(struct us_engine_slot *sl, const struct us_config *cfg, struct us_engine_call *call)
{
    const struct us_real_api *real = us_real();
    if (real->cudaEventElapsedTime == NULL) {
        sl->pending = false;
        return;
    }
    /* one call, no query first: the pair not done yet answers
     * cudaErrorNotReady, which leaves the thread's last error as it was
     * (conformance event_elapsed_not_ready); a query first cost 1.5 us more */
    float ms = 0;
    cudaError_t q = real->cudaEventElapsedTime(&ms, sl->start, sl->end);
    if (q == cudaErrorNotReady)
        return;
    sl->pending = false;
    bool sync_reading = sl->wants_sync_reading;
    uint64_t sync_late = sl->sync_late_ns;
    end_sync_reading(sl);
    if (q != cudaSuccess)
        return; /* lost (a reset, a destroyed context): the next probe tells */
    uint64_t late = us_engine_lateness_ns(ms, sl->pending_bytes);
    if (sync_reading && sync_late > late)
        late = sync_late;
    /* UNSTALL_LOG_LEVEL=debug: every timed copy, to tell on a GPU whether
     * the event pair sees the wait at all (a descheduled context's events
     * may wait with its copies) */
    us_log(US_LOG_DEBUG, "busy_engine_d2d: a timed copy of %zu bytes took %.3f ms (late %.3f ms) in context %p",
           sl->pending_bytes, (double)ms, (double)late / 1e6, (void *)sl->context);
    call->finished = true;
    sl->late = late >= (uint64_t)cfg->busy_d2d_late_us * 1000u;
    call->late_ns = sl->late ? late : 0;
    call->late_bytes = sl->pending_bytes;
}

/* Whether a timed copy may go on this stream now: not capturing, on the
 * device of the current context `home`, whose events the slot records (an
 * event records only on a stream of its own device; the context's device
 * asks the runtime nothing, where cudaGetDevice cost a timed copy 1 us). */
static bool probe_allowed(const struct us_copy *c, cudaStream_t s, const struct us_ctx *home)
{
    const struct us_real_api *real = us_real();
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (real->cudaStreamIsCapturing == NULL || real->cudaStreamIsCapturing(s, &st) != cudaSuccess ||
        st != cudaStreamCaptureStatusNone)
        return false;
    return home->device == c->src_mem.device;
}

void us_engine_begin(const struct us_copy *c, const struct us_config *cfg, const struct us_ctx *home,
                     struct us_engine_call *call)
{
    *call = (struct us_engine_call){0};
    if (engine_off(cfg))
        return;
    if (home == NULL)
        return; /* no context to key the timing events by */
    call->stream = us_copy_stream(c);
    call->context = home->handle;
    bool per_thread = call->stream == cudaStreamPerThread;
    struct us_engine_slot *sl = slot_take(call->stream, home->id, per_thread);
    if (sl == NULL)
        return;
    sl->context = home->handle;
    call->slot = sl;
    const struct us_real_api *real = us_real();
    enum cudaStreamCaptureMode saved;
    bool relaxed = false;
    uint64_t now = us_now_ns();
    bool due = cfg->busy_d2d_probe_ms > 0 && now - sl->last_probe_ns >= (uint64_t)cfg->busy_d2d_probe_ms * 1000000u;
    bool read_now = sl->pending && now - sl->last_probe_ns >= ENGINE_READ_AFTER_NS;
    if (read_now || due)
        relaxed = relax(real, &saved);
    if (read_now)
        read_probe(sl, cfg, call);
    /* while late and staged, a timed native copy costs a time slice: check
     * seldom (busy_d2d_recheck_ms) */
    if (due && sl->late && cfg->fix && cfg->fix_busy_d2d)
        due = now - sl->last_probe_ns >= (uint64_t)cfg->busy_d2d_recheck_ms * 1000000u;
    if (!sl->pending && due && probe_allowed(c, call->stream, home)) {
        if (sl->start == NULL && sl->end == NULL)
            take_ready_pair(home->id, &sl->start, &sl->end);
        if (sl->start == NULL && real->cudaEventCreateWithFlags(&sl->start, cudaEventDefault) != cudaSuccess)
            sl->start = NULL;
        if (sl->start != NULL && sl->end == NULL &&
            real->cudaEventCreateWithFlags(&sl->end, cudaEventDefault) != cudaSuccess)
            sl->end = NULL;
        call->probe = sl->start != NULL && sl->end != NULL;
        sl->last_probe_ns = now;
        /* a created context while the device's primary one is active */
        call->sync_probe = call->probe && !home->primary && us_context_primary(home->device) != NULL;
        if (call->sync_probe && sl->head_stream == NULL &&
            real->cudaStreamCreateWithFlags(&sl->head_stream, cudaStreamNonBlocking) != cudaSuccess)
            sl->head_stream = NULL;
        if (call->sync_probe && sl->head == NULL && real->cudaEventCreateWithFlags(&sl->head, cudaEventDefault) != cudaSuccess)
            sl->head = NULL;
        call->sync_probe = call->sync_probe && sl->head_stream != NULL && sl->head != NULL;
    }
    unrelax(real, relaxed, &saved);
    /* a timed copy goes native even while late: that is how the verdict
     * learns that the engine is free again */
    call->stage = sl->late && !call->probe;
}

cudaError_t us_engine_native(const struct us_copy *c, struct us_engine_call *call)
{
    if (!call->probe)
        return us_copy_native(c);
    struct us_engine_slot *sl = call->slot;
    const struct us_real_api *real = us_real();
    enum cudaStreamCaptureMode saved;
    bool relaxed = relax(real, &saved);
    uint64_t issued_ns = us_now_ns();
    bool headed = call->sync_probe && real->cudaEventRecord(sl->head, sl->head_stream) == cudaSuccess;
    bool started = real->cudaEventRecord(sl->start, call->stream) == cudaSuccess;
    unrelax(real, relaxed, &saved);
    cudaError_t err = us_copy_native(c);
    if (started && err == cudaSuccess) {
        relaxed = relax(real, &saved);
        if (real->cudaEventRecord(sl->end, call->stream) == cudaSuccess) {
            sl->pending = true;
            sl->pending_bytes = c->bytes;
            if (headed) {
                sl->issued_ns = issued_ns;
                sl->wants_sync_reading = true;
                sl->tail_recorded = false;
                sl->sync_late_ns = 0;
                atomic_fetch_add(&sync_readings_wanted, 1);
            }
        }
        unrelax(real, relaxed, &saved);
    }
    return err;
}

US_HOT void us_engine_end(struct us_engine_call *call)
{
    if (call->slot != NULL)
        pthread_mutex_unlock(&call->slot->lock);
    call->slot = NULL;
}

struct us_engine_stage *us_engine_stage_of(struct us_engine_call *call)
{
    return call->slot != NULL ? &call->slot->stage : NULL;
}

void us_engine_forget_context(const struct us_ctx *gone)
{
    forget_ready_pair(gone->id);
    pthread_once(&slots_once, slots_init);
    for (int i = 0; i < SLOTS; i++) {
        struct us_engine_slot *sl = &slots[i];
        pthread_mutex_lock(&sl->lock);
        if (sl->used && sl->ctx_id == gone->id) {
            /* its events and head stream went with the context; its staging
             * buffer (primary context memory) stays with the slot for the
             * next stream */
            sl->used = sl->pending = sl->late = false;
            end_sync_reading(sl);
            drop_context_objects(sl);
        }
        pthread_mutex_unlock(&sl->lock);
    }
}

void us_engine_reset(void)
{
    forget_ready_pair(0);
    atomic_store(&prepared, false);
    pthread_once(&slots_once, slots_init);
    for (int i = 0; i < SLOTS; i++) {
        pthread_mutex_lock(&slots[i].lock);
        struct us_engine_slot *sl = &slots[i];
        sl->used = sl->pending = sl->late = false;
        end_sync_reading(sl);
        drop_context_objects(sl);
        sl->stage = (struct us_engine_stage){0};
        sl->last_probe_ns = 0;
        pthread_mutex_unlock(&slots[i].lock);
    }
    atomic_store(&sync_readings_wanted, 0);
}

/* The slot of (stream, context[, thread]) if it has one, locked; never takes
 * one over. NULL when none or busy. */
static struct us_engine_slot *slot_find(cudaStream_t s, uint64_t ctx, bool per_thread)
{
    pthread_once(&slots_once, slots_init);
    size_t h = key_hash(s, ctx, per_thread);
    for (size_t i = 0; i < PROBES; i++) {
        struct us_engine_slot *sl = &slots[(h + i) % SLOTS];
        if (pthread_mutex_trylock(&sl->lock) != 0)
            continue;
        if (sl->used && key_is(sl, s, ctx, per_thread))
            return sl;
        pthread_mutex_unlock(&sl->lock);
    }
    return NULL;
}

US_HOT void us_engine_sync_begin(cudaStream_t stream, bool per_thread_api, struct us_engine_sync *sync)
{
    sync->armed = false;
    if (atomic_load_explicit(&sync_readings_wanted, memory_order_relaxed) == 0)
        return;
    if (stream == NULL)
        stream = per_thread_api ? cudaStreamPerThread : cudaStreamLegacy;
    sync->stream = stream;
    sync->per_thread = stream == cudaStreamPerThread;
    const struct us_ctx *home = us_context_this();
    if (home == NULL)
        return;
    sync->ctx_id = home->id;
    struct us_engine_slot *sl = slot_find(stream, sync->ctx_id, sync->per_thread);
    if (sl == NULL)
        return;
    if (sl->pending && sl->wants_sync_reading && !sl->tail_recorded) {
        const struct us_real_api *real = us_real();
        enum cudaStreamCaptureMode saved;
        bool relaxed = relax(real, &saved);
        if (sl->tail == NULL && real->cudaEventCreateWithFlags(&sl->tail, cudaEventDefault) != cudaSuccess)
            sl->tail = NULL;
        sl->tail_recorded = sl->tail != NULL && real->cudaEventRecord(sl->tail, stream) == cudaSuccess;
        sync->armed = sl->tail_recorded;
        unrelax(real, relaxed, &saved);
    }
    pthread_mutex_unlock(&sl->lock);
}

US_HOT void us_engine_sync_end(const struct us_engine_sync *sync, bool synchronized)
{
    if (!sync->armed)
        return;
    uint64_t done_ns = us_now_ns();
    struct us_engine_slot *sl = slot_find(sync->stream, sync->ctx_id, sync->per_thread);
    if (sl == NULL)
        return;
    const struct us_real_api *real = us_real();
    float gpu_ms = 0;
    if (synchronized && sl->pending && sl->tail_recorded && real->cudaEventElapsedTime != NULL) {
        enum cudaStreamCaptureMode saved;
        bool relaxed = relax(real, &saved);
        if (real->cudaEventElapsedTime(&gpu_ms, sl->head, sl->tail) == cudaSuccess)
            sl->sync_late_ns = us_engine_sync_delay_ns(sl->issued_ns, done_ns, gpu_ms);
        unrelax(real, relaxed, &saved);
    }
    pthread_mutex_unlock(&sl->lock);
}

uint64_t us_engine_sync_delay_ns(uint64_t issued_ns, uint64_t synced_ns, double gpu_ms)
{
    const uint64_t completion_ns = 50000; /* the sync's own return, the launch of the first piece */
    uint64_t gpu_ns = (uint64_t)(gpu_ms * 1e6);
    if (synced_ns <= issued_ns || synced_ns - issued_ns <= gpu_ns + completion_ns)
        return 0;
    return synced_ns - issued_ns - gpu_ns - completion_ns;
}
