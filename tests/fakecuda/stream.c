/* stream.c - streams: each one a FIFO of operations run in order by a worker
 * thread of its own, started on demand and gone after a while idle.
 * Dependencies between streams are (stream, sequence number) pairs: an op
 * runs once every stream it depends on has completed that number. The legacy
 * default stream's ordering with blocking streams is added here, at submission
 * time. Also the capture state (a flag per stream, with the rules of
 * cudaThreadExchangeStreamCaptureMode) and the stream API. */
#include "fc.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

/* A worker that found nothing to do for this long exits. */
#define FC_WORKER_IDLE_US 200000.0

static __thread struct fc_stream *tls_per_thread[FC_MAX_DEVICES];
static __thread enum cudaStreamCaptureMode tls_capture_mode = cudaStreamCaptureModeGlobal;

/* The simulation's own bookkeeping cannot fail halfway through a call. */
static void *must(void *p)
{
    if (p == NULL) {
        fputs("fakecuda: out of memory\n", stderr);
        abort();
    }
    return p;
}

bool fc_stream_blocking(const struct fc_stream *s)
{
    return s->kind != FC_STREAM_LEGACY && !(s->flags & cudaStreamNonBlocking);
}

struct fc_stream *fc_stream_new_locked(enum fc_stream_kind kind, int device, unsigned flags, int priority)
{
    struct fc_stream *s = NULL;
    /* A destroyed user stream whose work is done is taken again. Its
     * sequence numbers go on, so old dependencies on it stay satisfied. */
    for (size_t i = 0; kind == FC_STREAM_USER && i < fc_g.nall && s == NULL; i++) {
        struct fc_stream *t = fc_g.all[i];
        if (t->kind == FC_STREAM_USER && !t->live && t->head == NULL && t->capture == NULL)
            s = t;
    }
    if (s == NULL) {
        if (fc_g.nall == fc_g.capall) {
            size_t cap = fc_g.capall ? 2 * fc_g.capall : 64;
            struct fc_stream **all = realloc(fc_g.all, cap * sizeof *all);
            if (all == NULL)
                return NULL;
            fc_g.all = all;
            fc_g.capall = cap;
        }
        s = calloc(1, sizeof *s);
        if (s == NULL)
            return NULL;
        fc_cond_init(&s->work);
        s->key = s;
        fc_g.all[fc_g.nall++] = s;
    }
    s->kind = kind;
    s->device = device;
    s->ctx = kind == FC_STREAM_USER ? fc_current_ctx() : &fc_g.primary[device];
    s->flags = flags;
    s->priority = priority;
    s->sticky = cudaSuccess;
    s->armed = cudaSuccess;
    s->capture = NULL;
    if (kind == FC_STREAM_USER) {
        s->live = true;
        HASH_ADD_PTR(fc_g.handles, key, s);
    }
    return s;
}

static struct fc_stream *per_thread_locked(int device)
{
    if (tls_per_thread[device] == NULL)
        tls_per_thread[device] = fc_stream_new_locked(FC_STREAM_PER_THREAD, device, 0, 0);
    return tls_per_thread[device];
}

bool fc_ctx_may_use(const struct fc_ctx *cur, const struct fc_ctx *owner)
{
    return owner == cur || owner->device != cur->device;
}

static cudaError_t stream_lookup(cudaStream_t handle, bool per_thread, bool check_owner, struct fc_stream **out)
{
    struct fc_ctx *ctx = fc_current_ctx();
    int dev = ctx->device;
    struct fc_stream *s = NULL;
    /* a created context's per-thread stream is its legacy stream (not modelled apart) */
    if (handle == NULL)
        s = per_thread && ctx->primary ? per_thread_locked(dev) : ctx->legacy;
    else if (handle == cudaStreamLegacy)
        s = ctx->legacy;
    else if (handle == cudaStreamPerThread)
        s = ctx->primary ? per_thread_locked(dev) : ctx->legacy;
    else
        HASH_FIND_PTR(fc_g.handles, &handle, s);
    if (s == NULL || (check_owner && !fc_ctx_may_use(ctx, s->ctx)))
        return cudaErrorInvalidResourceHandle;
    *out = s;
    return cudaSuccess;
}

cudaError_t fc_stream_get(cudaStream_t handle, bool per_thread, struct fc_stream **out)
{
    return stream_lookup(handle, per_thread, true, out);
}

cudaError_t fc_stream_get_any(cudaStream_t handle, bool per_thread, struct fc_stream **out)
{
    return stream_lookup(handle, per_thread, false, out);
}

/* --- operations and workers ------------------------------------------------------------- */

struct fc_op *fc_op_new(fc_run_fn run)
{
    struct fc_op *op = must(calloc(1, sizeof *op));
    op->run = run;
    return op;
}

void fc_op_add_dep(struct fc_op *op, struct fc_stream *s, uint64_t seq)
{
    if (s->completed >= seq)
        return;
    if (op->ndeps == op->capdeps) {
        op->capdeps = op->capdeps ? 2 * op->capdeps : 4;
        op->deps = must(realloc(op->deps, op->capdeps * sizeof *op->deps));
    }
    op->deps[op->ndeps++] = (struct fc_dep){s, seq};
}

static bool deps_done(const struct fc_op *op)
{
    for (size_t i = 0; i < op->ndeps; i++)
        if (op->deps[i].stream->completed < op->deps[i].seq)
            return false;
    return true;
}

bool fc_op_startable_locked(const struct fc_op *op)
{
    return op->stream->head == op && deps_done(op) && op->fail == cudaSuccess && op->stream->sticky == cudaSuccess;
}

static void *worker_main(void *arg)
{
    struct fc_stream *s = arg;
    /* Timed waits end when the modelled time does, not up to 50 us later
     * (the default timer slack): a GPU op's span should not depend on it. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    pthread_mutex_lock(&fc_g.mu);
    for (;;) {
        struct fc_op *op = s->head;
        if (op == NULL) {
            double deadline = fc_now_us() + FC_WORKER_IDLE_US;
            while (s->head == NULL && fc_cond_wait_until(&s->work, &fc_g.mu, deadline))
                ;
            if (s->head == NULL)
                break;
            continue;
        }
        while (!deps_done(op))
            pthread_cond_wait(&fc_g.done, &fc_g.mu);
        if (op->fail != cudaSuccess && s->sticky == cudaSuccess) {
            s->sticky = op->fail;
            fc_stat_add(async_errors, 1);
        }
        cudaError_t status = s->sticky;
        pthread_mutex_unlock(&fc_g.mu);

        if (op->run != NULL && (status == cudaSuccess || op->runs_after_error))
            op->run(op, status);

        pthread_mutex_lock(&fc_g.mu);
        s->head = op->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->completed = op->seq;
        if (op->complete != NULL)
            op->complete(op);
        pthread_cond_broadcast(&fc_g.done);
        free(op->deps);
        free(op);
    }
    s->worker_running = false;
    fc_stat_add(workers_running, -1);
    pthread_mutex_unlock(&fc_g.mu);
    return NULL;
}

static void start_worker_locked(struct fc_stream *s)
{
    pthread_attr_t attr;
    pthread_t tid;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, worker_main, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        fprintf(stderr, "fakecuda: cannot start a stream worker thread (error %d)\n", rc);
        abort();
    }
    s->worker_running = true;
    fc_stat_add(workers_started, 1);
    fc_stat_add(workers_running, 1);
}

void fc_op_wait_device_locked(struct fc_op *op, int device, const struct fc_stream *self)
{
    /* the legacy stream of a created context orders with that context's
     * streams; any other caller means the device's primary context */
    const struct fc_ctx *ctx = self != NULL && self->device == device ? self->ctx : &fc_g.primary[device];
    for (size_t i = 0; i < fc_g.nall; i++) {
        struct fc_stream *t = fc_g.all[i];
        if (t != self && t->ctx == ctx && (t->kind == FC_STREAM_LEGACY || fc_stream_blocking(t)))
            fc_op_add_dep(op, t, t->submitted);
    }
}

uint64_t fc_submit_locked(struct fc_stream *s, struct fc_op *op)
{
    /* Legacy default stream: its work waits for earlier work of every
     * blocking stream of the device, and theirs for earlier legacy work. */
    if (s->kind == FC_STREAM_LEGACY) {
        fc_op_wait_device_locked(op, s->device, s);
    } else if (fc_stream_blocking(s)) {
        struct fc_stream *legacy = s->ctx->legacy;
        fc_op_add_dep(op, legacy, legacy->submitted);
    }
    if (s->armed != cudaSuccess) {
        op->fail = s->armed;
        s->armed = cudaSuccess;
    } else if (op->counts_as_work) {
        op->fail = fc_fault(FAKECUDA_FAULT_ASYNC);
    }
    op->stream = s;
    op->seq = ++s->submitted;
    op->next = NULL;
    if (s->tail != NULL)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    if (!s->worker_running)
        start_worker_locked(s);
    else
        pthread_cond_signal(&s->work);
    return op->seq;
}

void fc_legacy_follow_locked(int device, struct fc_stream *s, uint64_t seq)
{
    struct fc_op *marker = fc_op_new(NULL);
    fc_op_add_dep(marker, s, seq);
    fc_submit_locked(fc_g.dev[device].legacy, marker);
}

void fc_wait_locked(struct fc_stream *s, uint64_t seq)
{
    while (s->completed < seq)
        pthread_cond_wait(&fc_g.done, &fc_g.mu);
    /* case D (copy.c): the host waited for this context's work, so the
     * context had nothing to run: it is off the engine until its next work */
    if (s->ctx != NULL && s->device >= 0 && fc_g.dev[s->device].slice_owner == s->ctx)
        fc_g.dev[s->device].copy_slice_until = 0;
}

/* Everything issued to s so far. For the legacy stream that includes the
 * earlier work of the device's blocking streams, as on a real device. */
static void drain_locked(struct fc_stream *s)
{
    if (s->kind == FC_STREAM_LEGACY) {
        for (size_t i = 0; i < fc_g.nall; i++) {
            struct fc_stream *t = fc_g.all[i];
            if (t->ctx == s->ctx && fc_stream_blocking(t))
                fc_wait_locked(t, t->submitted);
        }
    }
    fc_wait_locked(s, s->submitted);
}

static bool drained_locked(const struct fc_stream *s)
{
    if (s->kind == FC_STREAM_LEGACY) {
        for (size_t i = 0; i < fc_g.nall; i++) {
            const struct fc_stream *t = fc_g.all[i];
            if (t->ctx == s->ctx && fc_stream_blocking(t) && t->completed < t->submitted)
                return false;
        }
    }
    return s->completed >= s->submitted;
}

cudaError_t fc_device_sync_locked(int device)
{
    cudaError_t err = cudaSuccess;
    for (size_t i = 0; i < fc_g.nall; i++) { /* fc_g.all may grow while we wait */
        struct fc_stream *t = fc_g.all[i];
        if (t->device != device)
            continue;
        fc_wait_locked(t, t->submitted);
        if (err == cudaSuccess)
            err = t->sticky;
    }
    return err;
}

cudaError_t fc_ctx_sync_locked(struct fc_ctx *ctx)
{
    cudaError_t err = cudaSuccess;
    for (size_t i = 0; i < fc_g.nall; i++) {
        struct fc_stream *t = fc_g.all[i];
        if (t->ctx != ctx)
            continue;
        fc_wait_locked(t, t->submitted);
        if (err == cudaSuccess)
            err = t->sticky;
    }
    return err;
}

void fc_device_sync_implicit(int device)
{
    pthread_mutex_lock(&fc_g.mu);
    fc_device_sync_locked(device);
    pthread_mutex_unlock(&fc_g.mu);
    fc_stat_add(implicit_syncs, 1);
}

/* --- capture ------------------------------------------------------------------------------ */

cudaError_t fc_capture_check_locked(void)
{
    if (tls_capture_mode == cudaStreamCaptureModeRelaxed)
        return cudaSuccess;
    pthread_t self = pthread_self();
    bool forbidden = false;
    for (struct fc_capture *c = fc_g.captures; c != NULL; c = c->next) {
        bool mine = pthread_equal(c->thread, self);
        if ((mine && c->mode != cudaStreamCaptureModeRelaxed) ||
            (!mine && c->mode == cudaStreamCaptureModeGlobal && tls_capture_mode == cudaStreamCaptureModeGlobal)) {
            c->invalidated = true;
            forbidden = true;
        }
    }
    return forbidden ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

cudaError_t fc_capture_check(void)
{
    pthread_mutex_lock(&fc_g.mu);
    cudaError_t err = fc_capture_check_locked();
    pthread_mutex_unlock(&fc_g.mu);
    return err;
}

struct fc_capture *fc_capture_find_locked(uint64_t id)
{
    struct fc_capture *c = fc_g.captures;
    while (c != NULL && c->id != id)
        c = c->next;
    return c;
}

/* Ends capture c: no stream captures into it any more; what it recorded
 * and nobody took (cudaStreamEndCapture takes the graph) goes. */
static void capture_end_locked(struct fc_capture *c)
{
    for (size_t i = 0; i < fc_g.nall; i++) {
        if (fc_g.all[i]->capture == c) {
            fc_g.all[i]->capture = NULL;
            fc_front_clear(&fc_g.all[i]->front);
        }
    }
    if (c->graph != NULL)
        fc_graph_release_locked(c->graph);
    for (struct fc_capture **p = &fc_g.captures; *p != NULL; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    free(c);
}

static cudaError_t begin_capture(cudaStream_t stream, enum cudaStreamCaptureMode mode, bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if ((unsigned)mode > cudaStreamCaptureModeRelaxed)
        return fc_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    cudaError_t err = fc_stream_get(stream, per_thread, &s);
    if (err == cudaSuccess && s->kind == FC_STREAM_LEGACY)
        err = cudaErrorStreamCaptureUnsupported;
    else if (err == cudaSuccess && s->capture != NULL)
        err = cudaErrorIllegalState;
    if (err == cudaSuccess) {
        struct fc_capture *c = must(calloc(1, sizeof *c));
        c->id = ++fc_g.next_capture_id;
        c->mode = mode;
        c->thread = pthread_self();
        c->origin = s;
        c->graph = fc_graph_new_locked();
        c->next = fc_g.captures;
        fc_g.captures = c;
        s->capture = c;
        fc_front_clear(&s->front);
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

static cudaError_t end_capture(cudaStream_t stream, cudaGraph_t *graph, bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (graph == NULL)
        return fc_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    cudaError_t err = fc_stream_get(stream, per_thread, &s);
    struct fc_capture *c = err == cudaSuccess ? s->capture : NULL;
    if (err == cudaSuccess && c == NULL) {
        err = cudaErrorIllegalState;
    } else if (c != NULL && c->mode != cudaStreamCaptureModeRelaxed && !pthread_equal(c->thread, pthread_self())) {
        err = cudaErrorStreamCaptureWrongThread;
    } else if (c != NULL && c->origin != s) {
        c->invalidated = true;
        err = cudaErrorStreamCaptureUnmatched;
    } else if (c != NULL) {
        /* every stream that joined must have been joined back into the origin */
        err = c->invalidated                ? cudaErrorStreamCaptureInvalidated
              : !fc_capture_joined_locked(c) ? cudaErrorStreamCaptureUnjoined
                                             : cudaSuccess;
        *graph = NULL;
        if (err == cudaSuccess) {
            *graph = fc_graph_hand_out_locked(c->graph);
            c->graph = NULL;
        }
        capture_end_locked(c);
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

static cudaError_t is_capturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status, bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (status == NULL)
        return fc_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    cudaError_t err = fc_stream_get_any(stream, per_thread, &s);
    if (err == cudaSuccess)
        *status = s->capture == NULL       ? cudaStreamCaptureStatusNone
                  : s->capture->invalidated ? cudaStreamCaptureStatusInvalidated
                                            : cudaStreamCaptureStatusActive;
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return begin_capture(stream, mode, false);
}

cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return begin_capture(stream, mode, true);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    return end_capture(stream, graph, false);
}

cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *graph)
{
    return end_capture(stream, graph, true);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status)
{
    return is_capturing(stream, status, false);
}

cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *status)
{
    return is_capturing(stream, status, true);
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    if (mode == NULL || (unsigned)*mode > cudaStreamCaptureModeRelaxed)
        return fc_ret(cudaErrorInvalidValue);
    enum cudaStreamCaptureMode old = tls_capture_mode;
    tls_capture_mode = *mode;
    *mode = old;
    return cudaSuccess;
}

/* --- the stream API ----------------------------------------------------------------------- */

static cudaError_t stream_create(cudaStream_t *out, unsigned flags, int priority)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (out == NULL || (flags & ~(unsigned)cudaStreamNonBlocking) != 0)
        return fc_ret(cudaErrorInvalidValue);
    cudaError_t err = fc_fault(FAKECUDA_FAULT_STREAM_CREATE);
    if (err != cudaSuccess)
        return fc_ret(err);
    /* priorities of an H100: -5 (greatest) to 0; others are clamped */
    priority = priority < -5 ? -5 : priority > 0 ? 0 : priority;
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s = fc_stream_new_locked(FC_STREAM_USER, fc_current_device(), flags, priority);
    pthread_mutex_unlock(&fc_g.mu);
    if (s == NULL)
        return fc_ret(cudaErrorMemoryAllocation);
    fc_stat_add(streams_created, 1);
    *out = (cudaStream_t)s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
    return stream_create(stream, cudaStreamDefault, 0);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    return stream_create(stream, flags, 0);
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *stream, unsigned int flags, int priority)
{
    return stream_create(stream, flags, priority);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s = NULL;
    if (stream != NULL && stream != cudaStreamLegacy && stream != cudaStreamPerThread)
        HASH_FIND_PTR(fc_g.handles, &stream, s);
    if (s != NULL) {
        /* Queued work still runs, as on a real device. A stream that joined
         * a capture may go before the capture ends (NVIDIA's graphMemoryNodes
         * sample does): what it captured stays in the graph, and its front
         * still has to be joined back. The origin's capture ends with it. */
        if (s->capture != NULL && s->capture->origin == s)
            capture_end_locked(s->capture);
        HASH_DEL(fc_g.handles, s);
        s->live = false;
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(s != NULL ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

/* What cudaStreamSynchronize and cudaStreamQuery check first, under
 * fc_g.mu: the handle, and that neither a capture of the stream nor the
 * capture mode forbids looking at it. */
static cudaError_t stream_observable_locked(cudaStream_t stream, bool per_thread, struct fc_stream **out)
{
    struct fc_stream *s;
    cudaError_t err = fc_stream_get_any(stream, per_thread, &s);
    if (err == cudaSuccess && s->capture != NULL) {
        s->capture->invalidated = true;
        err = cudaErrorStreamCaptureUnsupported;
    }
    if (err == cudaSuccess)
        err = fc_capture_check_locked();
    if (err == cudaSuccess)
        *out = s;
    return err;
}

static cudaError_t stream_synchronize(cudaStream_t stream, bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    cudaError_t err = stream_observable_locked(stream, per_thread, &s);
    if (err == cudaSuccess) {
        drain_locked(s);
        err = s->sticky;
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

static cudaError_t stream_query(cudaStream_t stream, bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    cudaError_t err = stream_observable_locked(stream, per_thread, &s);
    if (err == cudaSuccess)
        err = s->sticky != cudaSuccess ? s->sticky : drained_locked(s) ? cudaSuccess : cudaErrorNotReady;
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    return stream_synchronize(stream, false);
}

cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    return stream_synchronize(stream, true);
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    return stream_query(stream, false);
}

cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream)
{
    return stream_query(stream, true);
}

/* Asking a capturing stream (or one joined to a capture) for its flags or
 * its device ends the capture: measured on an H100 (CUDA 13.0, driver 580),
 * both return cudaErrorStreamCaptureUnsupported and cudaStreamEndCapture
 * then returns cudaErrorStreamCaptureInvalidated (tests/capture, cases
 * global_get_{flags,device}_{capturing,joined}). cudaStreamGetFlags is what
 * unstall's cudaStreamDestroy hook asked when NVIDIA's graphMemoryNodes
 * sample failed under it. */
static cudaError_t capture_forbids_query_locked(struct fc_stream *s)
{
    s->capture->invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
}

static cudaError_t stream_get_flags(cudaStream_t stream, unsigned *flags, bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (flags == NULL)
        return fc_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    cudaError_t err = fc_stream_get_any(stream, per_thread, &s);
    if (err == cudaSuccess && s->capture != NULL)
        err = capture_forbids_query_locked(s);
    if (err == cudaSuccess)
        *flags = s->flags;
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

static cudaError_t stream_get_device(cudaStream_t stream, int *device, bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (device == NULL)
        return fc_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    cudaError_t err = fc_stream_get_any(stream, per_thread, &s);
    if (err == cudaSuccess && s->capture != NULL)
        err = capture_forbids_query_locked(s);
    if (err == cudaSuccess)
        *device = s->device;
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int *flags)
{
    return stream_get_flags(stream, flags, false);
}

cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t stream, unsigned int *flags)
{
    return stream_get_flags(stream, flags, true);
}

cudaError_t cudaStreamGetDevice(cudaStream_t stream, int *device)
{
    return stream_get_device(stream, device, false);
}

cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t stream, int *device)
{
    return stream_get_device(stream, device, true);
}

cudaError_t cudaDeviceSynchronize(void)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    pthread_mutex_lock(&fc_g.mu);
    cudaError_t err = fc_capture_check_locked();
    if (err == cudaSuccess)
        err = fc_device_sync_locked(fc_current_device());
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}
