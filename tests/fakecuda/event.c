/* event.c - events: a record is a marker op on the stream; the event is the
 * (stream, sequence number) of its last record, complete once the stream got
 * there. An event never recorded is complete. Event structs are never freed:
 * a destroyed one goes to a free list and its generation number tells stale
 * record ops to leave it alone. */
#include "fc.h"

#include <stdlib.h>

#define FC_EVENT_FLAGS (cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess)

static struct fc_event *event_get_locked(cudaEvent_t handle)
{
    struct fc_event *e = NULL;
    if (handle != NULL)
        HASH_FIND_PTR(fc_g.events, &handle, e);
    return e;
}

/* The capture sequence an event was last recorded in, if still going on. */
static struct fc_capture *event_capture_locked(const struct fc_event *e)
{
    return e->capture_id != 0 ? fc_capture_find_locked(e->capture_id) : NULL;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (event == NULL || (flags & ~(unsigned)FC_EVENT_FLAGS) != 0 ||
        ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)))
        return fc_ret(cudaErrorInvalidValue);
    cudaError_t err = fc_fault(FAKECUDA_FAULT_EVENT_CREATE);
    if (err != cudaSuccess)
        return fc_ret(err);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_event *e = fc_g.free_events;
    if (e != NULL)
        fc_g.free_events = e->next_free;
    else
        e = calloc(1, sizeof *e);
    if (e != NULL) {
        uint64_t gen = e->gen;
        fc_front_clear(&e->front);
        free(e->front.nodes);
        *e = (struct fc_event){.key = e, .device = fc_current_device(), .ctx = fc_current_ctx(), .flags = flags, .gen = gen + 1};
        HASH_ADD_PTR(fc_g.events, key, e);
    }
    pthread_mutex_unlock(&fc_g.mu);
    if (e == NULL)
        return fc_ret(cudaErrorMemoryAllocation);
    fc_stat_add(events_created, 1);
    *event = (cudaEvent_t)e;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_event *e = event_get_locked(event);
    if (e != NULL) {
        HASH_DEL(fc_g.events, e);
        e->gen++;
        e->next_free = fc_g.free_events;
        fc_g.free_events = e;
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(e != NULL ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

static void record_run(struct fc_op *op, cudaError_t status)
{
    (void)status;
    fc_engine_slice_wait(op, op->stream->device);
    op->u.record.t_us = fc_now_us();
}

static void record_complete(struct fc_op *op)
{
    struct fc_event *e = op->u.record.event;
    if (e->gen == op->u.record.gen && op->u.record.t_us != 0) {
        e->t_us = op->u.record.t_us;
        e->timed = true;
    }
}

static cudaError_t event_record(cudaEvent_t event, cudaStream_t stream, bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    fc_api_touch();
    pthread_mutex_lock(&fc_g.mu);
    struct fc_event *e = event_get_locked(event);
    struct fc_stream *s = NULL;
    cudaError_t err = e != NULL ? fc_stream_get(stream, per_thread, &s) : cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess && s->ctx != e->ctx)
        err = cudaErrorInvalidResourceHandle; /* an event is recorded only in its own context (device) */
    if (err == cudaSuccess && s->capture != NULL) {
        /* Recorded into the capture: it stands for the stream's front, and
         * a stream that waits for it joins the capture. */
        e->gen++;
        e->recorded = false;
        e->capture_id = s->capture->id;
        fc_front_copy(&e->front, &s->front);
    } else if (err == cudaSuccess) {
        struct fc_op *op = fc_op_new(record_run);
        op->complete = record_complete;
        op->u.record.event = e;
        op->u.record.gen = ++e->gen;
        e->seq = fc_submit_locked(s, op);
        e->stream = s;
        e->recorded = true;
        e->timed = false;
        e->capture_id = 0;
        fc_stat_add(event_records, 1);
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    return event_record(event, stream, false);
}

cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    return event_record(event, stream, true);
}

static cudaError_t stream_wait_event(cudaStream_t stream, cudaEvent_t event, unsigned flags, bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if ((flags & ~(unsigned)cudaEventWaitExternal) != 0)
        return fc_ret(cudaErrorInvalidValue);
    fc_api_touch();
    pthread_mutex_lock(&fc_g.mu);
    struct fc_event *e = event_get_locked(event);
    struct fc_stream *s = NULL;
    cudaError_t err = e != NULL ? fc_stream_get(stream, per_thread, &s) : cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess) {
        struct fc_capture *c = event_capture_locked(e);
        if (c != NULL && s->capture != NULL && s->capture != c) {
            /* two capture sequences cannot be merged */
            c->invalidated = true;
            s->capture->invalidated = true;
            err = cudaErrorStreamCaptureMerge;
        } else if (c != NULL) {
            if (s->capture == NULL) { /* the stream joins the capture of the event */
                s->capture = c;
                fc_front_clear(&s->front);
            }
            fc_front_union(&s->front, &e->front);
        } else if (s->capture != NULL && e->recorded) {
            /* an event recorded outside the capture: a dependency across its
             * boundary, refused and the capture ended (measured on an H100) */
            s->capture->invalidated = true;
            err = cudaErrorStreamCaptureIsolation;
        } else if (s->capture != NULL) {
            /* an event never recorded: nothing to wait for in the graph */
        } else if (e->recorded && e->stream->completed < e->seq) {
            struct fc_op *op = fc_op_new(NULL); /* a marker: only its dependency matters */
            fc_op_add_dep(op, e->stream, e->seq);
            fc_submit_locked(s, op);
        }
        if (err == cudaSuccess)
            fc_stat_add(stream_waits, 1);
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    return stream_wait_event(stream, event, flags, false);
}

cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    return stream_wait_event(stream, event, flags, true);
}

/* The checks that cudaEventQuery and cudaEventSynchronize share. */
static cudaError_t event_check_locked(cudaEvent_t event, struct fc_event **out)
{
    struct fc_event *e = event_get_locked(event);
    if (e == NULL)
        return cudaErrorInvalidResourceHandle;
    struct fc_capture *c = event_capture_locked(e);
    if (c != NULL) { /* and the capture is over (H100: EndCapture then gives 901) */
        c->invalidated = true;
        return cudaErrorCapturedEvent;
    }
    cudaError_t err = fc_capture_check_locked();
    if (err == cudaSuccess)
        *out = e;
    return err;
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_event *e;
    cudaError_t err = event_check_locked(event, &e);
    if (err == cudaSuccess && e->recorded) {
        if (e->stream->sticky != cudaSuccess)
            err = e->stream->sticky;
        else if (e->stream->completed < e->seq)
            err = cudaErrorNotReady;
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_event *e;
    cudaError_t err = event_check_locked(event, &e);
    if (err == cudaSuccess && e->recorded) {
        fc_wait_locked(e->stream, e->seq);
        err = e->stream->sticky;
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (ms == NULL)
        return fc_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_event *a = event_get_locked(start), *b = event_get_locked(end);
    cudaError_t err = cudaSuccess;
    if (a == NULL || b == NULL || ((a->flags | b->flags) & cudaEventDisableTiming) || !a->recorded || !b->recorded)
        err = cudaErrorInvalidResourceHandle;
    else if (a->stream->completed < a->seq || b->stream->completed < b->seq)
        err = cudaErrorNotReady;
    else if (!a->timed || !b->timed) /* the record did not run: its stream failed */
        err = a->stream->sticky != cudaSuccess ? a->stream->sticky
              : b->stream->sticky != cudaSuccess ? b->stream->sticky : cudaErrorUnknown;
    else
        *ms = (float)((b->t_us - a->t_us) / 1000.0);
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}
