/* copy.c - cudaMemcpy* and cudaMemset*: argument checks, the path of a copy
 * (from the pointers, not the kind), its modelled duration, and the native
 * stalls:
 *   A  cross-device copy without peer access: staged through the host, and
 *      every staged copy in the process waits for the one issued before it
 *      (one staging queue); the caller is held until the copy is done
 *      (FAKECUDA_STAGED_HOLD=1, as a user reported) or not (0, as measured
 *      on H200s);
 *   B  pageable H2D: up to FAKECUDA_PAGEABLE_H2D_ASYNC_MAX the source is
 *      copied at call time and the call returns; above, the caller is held;
 *   C  pageable D2H: the caller is held, and holds the API lock all along;
 *   D  same-device D2D: waits until a kernel of its own context that
 *      occupies every SM ends, and a time slice per burst while a kernel of
 *      another context runs on the device;
 *   E  the legacy stream's ordering (stream.c, at submission); a copy on a
 *      legacy stream touching another device's memory is ordered with that
 *      device's legacy stream as well (legacy_other_devices).
 * A copy op memcpy's the bytes, then sleeps for what is left of its time. */
#include "fc.h"

#include <stdlib.h>
#include <string.h>

/* Modelled duration of `bytes` at `gbps`, with the per-copy latency, scaled. */
static double fc_copy_duration_us(size_t bytes, double gbps)
{
    const struct fc_config *c = fc_cfg();
    /* GB/s = 1e3 bytes per microsecond */
    return (c->latency_us + (double)bytes / (gbps * 1e3)) * c->time_scale;
}

static double path_bandwidth(enum fc_path path)
{
    const struct fc_config *c = fc_cfg();
    switch (path) {
    case FC_PATH_H2D_PINNED:
    case FC_PATH_D2H_PINNED:
    case FC_PATH_H2H_PINNED: return c->bw_pinned;
    case FC_PATH_H2D_PAGEABLE:
    case FC_PATH_D2H_PAGEABLE:
    case FC_PATH_H2H_PAGEABLE: return c->bw_pageable;
    case FC_PATH_D2D: return c->bw_d2d;
    case FC_PATH_PEER: return c->bw_peer;
    case FC_PATH_STAGED: return c->bw_staged;
    }
    return c->bw_pageable;
}

static void count_copy(enum fc_path path, size_t bytes)
{
    pthread_mutex_lock(&fc_stats_mu);
    struct fakecuda_stats *st = &fc_stats_now;
    switch (path) {
    case FC_PATH_H2D_PINNED:
    case FC_PATH_D2H_PINNED:
    case FC_PATH_H2H_PINNED: st->copies_pinned++; st->bytes_pinned += bytes; break;
    case FC_PATH_H2D_PAGEABLE:
    case FC_PATH_D2H_PAGEABLE:
    case FC_PATH_H2H_PAGEABLE: st->copies_pageable++; st->bytes_pageable += bytes; break;
    case FC_PATH_D2D: st->copies_d2d++; st->bytes_d2d += bytes; break;
    case FC_PATH_PEER: st->copies_peer++; st->bytes_peer += bytes; break;
    case FC_PATH_STAGED: st->copies_staged++; st->bytes_staged += bytes; break;
    }
    pthread_mutex_unlock(&fc_stats_mu);
}

/* Case D: a same-device copy runs as a kernel on the compute engine.
 * - Behind a kernel of its own context that occupies every SM it waits until
 *   that kernel ends: within one context there is no time slice, the copy
 *   kernel needs a free SM (measured on an H200: the first of 10 bursts
 *   waited 197.9 ms behind a 200 ms kernel, the other nine ran after it).
 * - While a kernel of another context runs on its device, the whole context
 *   is off the engine: its first piece of work (a same-device copy, an event
 *   record) waits until that kernel ends or a time slice
 *   passed, whichever comes first (the engine runs one context at a time).
 *   The context then keeps the engine as long as its stream has more work
 *   queued (the rest of a burst runs at once, and the event recorded after
 *   it too); when the stream has nothing queued the engine goes back to the
 *   kernel, and the next burst waits again. Measured on an H200: 10 bursts
 *   of 8 x 1 MiB back to back in a cuCtxCreate context, each 2.44 ms from the
 *   host, while the shim's event pair around a copy of each burst saw 4 us:
 *   the events wait with the copies. A host function at the head of an idle
 *   stream does not wait (the twin d2d_busy_engine.created.hostfn: it ran
 *   0.06-0.25 ms after its launch): the driver runs it without the engine.
 *   Copies between host and device run on the copy engines and do not wait.
 * Its own stream's kernels are done by now. */
static bool other_context_busy_locked(const struct fc_device *dev, const struct fc_ctx *ctx)
{
    return dev->running_kernels > ctx->running_kernels;
}

void fc_engine_slice_wait(const struct fc_op *op, int device)
{
    struct fc_device *dev = &fc_g.dev[device];
    struct fc_ctx *ctx = op->stream->ctx;
    double slice = fc_cfg()->timeslice_us * fc_cfg()->time_scale;
    pthread_mutex_lock(&fc_g.mu);
    double t1 = fc_now_us();
    if (other_context_busy_locked(dev, ctx) && t1 >= dev->copy_slice_until) {
        while (other_context_busy_locked(dev, ctx) && fc_cond_wait_until(&fc_g.done, &fc_g.mu, t1 + slice))
            ;
        double now = fc_now_us();
        dev->copy_slice_end = now + slice;
        dev->copy_slice_until = dev->copy_slice_end;
        dev->slice_owner = ctx;
        fc_stat_add(timeslice_waits, 1);
        fc_stat_add(timeslice_wait_us_total, now - t1);
    }
    pthread_mutex_unlock(&fc_g.mu);
}

/* fc_engine_slice_wait: the engine goes back to the other context when this one's slice ends, or
 * when the host waited for this context's work (fc_wait_locked): then it had
 * nothing left to run. Work the host issues back to back (an event, then a
 * copy, microseconds apart) keeps it however late the simulation's stream
 * thread sees the next piece, as on the GPU (the shim's event pair around a
 * copy saw 4 us there), and a burst followed by a synchronization gives it up
 * (10 bursts, each 2.44 ms from the host there). */
static void wait_for_engine(const struct fc_op *op, int device)
{
    struct fc_ctx *ctx = op->stream->ctx;
    pthread_mutex_lock(&fc_g.mu);
    double t0 = fc_now_us();
    if (ctx->running_full_kernels > 0) {
        while (ctx->running_full_kernels > 0)
            pthread_cond_wait(&fc_g.done, &fc_g.mu);
        fc_stat_add(kernel_end_waits, 1);
        fc_stat_add(kernel_end_wait_us_total, fc_now_us() - t0);
    }
    pthread_mutex_unlock(&fc_g.mu);
    fc_engine_slice_wait(op, device);
}

static void copy_rows(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height)
{
    if (height == 1 || (dpitch == width && spitch == width)) {
        memmove(dst, src, width * height);
        return;
    }
    for (size_t r = 0; r < height; r++)
        memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
}

static void copy_run(struct fc_op *op, cudaError_t status)
{
    (void)status;
    struct fc_copy_op *c = &op->u.copy;
    if (c->path == FC_PATH_D2D)
        wait_for_engine(op, c->device);
    double start = fc_now_us();
    copy_rows(c->dst, c->dpitch, c->src, c->spitch, c->width, c->height);
    fc_sleep_until_us(start + c->duration_us);
}

static void copy_complete(struct fc_op *op)
{
    free(op->u.copy.owned);
}

struct fc_op *fc_copy_op_new(const struct fc_copy_op *copy)
{
    struct fc_op *op = fc_op_new(copy_run);
    op->complete = copy_complete;
    op->counts_as_work = true;
    op->u.copy = *copy;
    op->u.copy.owned = NULL; /* a replayed copy reads its source at run time */
    return op;
}

/* --- one copy, every entry point -------------------------------------------------------- */

struct fc_copy_args {
    void *dst;
    const void *src;
    size_t dpitch, spitch, width, height;
    enum cudaMemcpyKind kind;
    bool peer_api;        /* cudaMemcpyPeer*: the devices are given */
    int dst_device, src_device;
    cudaStream_t stream;
    bool per_thread;      /* _ptsz / _ptds entry */
    bool sync;            /* cudaMemcpy, cudaMemcpy2D, cudaMemcpyPeer */
};

static bool is_host(enum fc_mem k)
{
    return k != FC_MEM_DEVICE;
}

static bool is_pinned(enum fc_mem k)
{
    return k == FC_MEM_PINNED || k == FC_MEM_REGISTERED;
}

/* Checks one side of a copy. `claimed_device`: the kind says this side is
 * device memory, which pageable memory cannot be (measured: InvalidValue);
 * device, pinned and registered memory can. A range that leaves its device
 * allocation is invalid, and so is one that starts in a pinned or registered
 * range and leaves it (measured on an H200, CUDA 13.0: into the next
 * registered range or into memory not registered, either direction,
 * cudaMemcpy and cudaMemcpyAsync alike: tests/conformance/registered_span.c). */
static cudaError_t classify_side(const void *p, size_t extent, bool claimed_device, bool peer_api,
                                 struct fc_mem_info *m)
{
    if (p == NULL)
        return cudaErrorInvalidValue;
    fc_mem_lookup(p, m);
    if ((m->kind == FC_MEM_DEVICE || is_pinned(m->kind)) && !fc_mem_covers(m, p, extent))
        return cudaErrorInvalidValue;
    if (claimed_device && m->kind == FC_MEM_PAGEABLE)
        return cudaErrorInvalidValue;
    if (peer_api && m->kind != FC_MEM_DEVICE)
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

static enum fc_path copy_path(const struct fc_mem_info *s, const struct fc_mem_info *d)
{
    if (is_host(s->kind) && is_host(d->kind))
        return is_pinned(s->kind) && is_pinned(d->kind) ? FC_PATH_H2H_PINNED : FC_PATH_H2H_PAGEABLE;
    if (is_host(s->kind))
        return is_pinned(s->kind) ? FC_PATH_H2D_PINNED : FC_PATH_H2D_PAGEABLE;
    if (is_host(d->kind))
        return is_pinned(d->kind) ? FC_PATH_D2H_PINNED : FC_PATH_D2H_PAGEABLE;
    if (s->device == d->device)
        return FC_PATH_D2D;
    pthread_mutex_lock(&fc_g.mu);
    bool peer = fc_g.dev[s->device].peer_enabled[d->device] || fc_g.dev[d->device].peer_enabled[s->device];
    pthread_mutex_unlock(&fc_g.mu);
    return peer ? FC_PATH_PEER : FC_PATH_STAGED;
}

/* A copy on a legacy stream that touches memory of other devices is
 * serialized with those devices' legacy streams too (hence with their
 * blocking streams): it waits for their earlier work, and their later work
 * waits for it. Measured on H200s for the earlier work (tests/conformance
 * xdev_copy_before: cudaMemcpy and cudaMemcpyPeer D2D with either device
 * current); cudaMemcpyPeer's documentation says "serialized with
 * respect to all pending and future asynchronous work" of the current, source
 * and destination devices. Per-thread and created streams order with nothing
 * on other devices. Fills `out` with those devices; returns how many. */
static int legacy_other_devices(const struct fc_stream *s, const struct fc_mem_info *sm,
                                const struct fc_mem_info *dm, int out[2])
{
    int n = 0;
    if (s->kind != FC_STREAM_LEGACY)
        return 0;
    if (sm->kind == FC_MEM_DEVICE && sm->device != s->device)
        out[n++] = sm->device;
    if (dm->kind == FC_MEM_DEVICE && dm->device != s->device && (n == 0 || out[0] != dm->device))
        out[n++] = dm->device;
    return n;
}

/* How the calling thread is held. */
enum fc_hold {
    FC_HOLD_NONE,     /* returns once queued */
    FC_HOLD_WAIT,     /* returns when the copy is done */
    FC_HOLD_API_LOCK, /* the same, holding the API lock (case C) */
};

/* A small asynchronous H2D from pinned memory reads its source when it is
 * issued, not when it runs, on a stream with nothing of its own queued (no
 * work, no event wait), although it runs after the work the implicit ordering
 * between the legacy stream and the blocking streams puts before it: measured
 * on an H100 (driver 580, CUDA 13.0; tests/conformance/pinned_h2d_reads_late.c)
 * on the per-thread, a blocking and the legacy stream: 52 B to 16 KiB early,
 * 32 KiB and more late; pinned and registered alike; with the event waited for
 * on the copy's own stream, late; cudaMemcpy, late. Only for a destination on
 * the stream's device: the cross-device ordering of the legacy stream is not
 * measured for it. */
#define FC_PINNED_H2D_EARLY_MAX ((size_t)16 << 10)

/* Under fc_g.mu: whether the copy reads its source at the call (above). */
static bool reads_source_at_call_locked(const struct fc_copy_args *a, enum fc_path path, size_t bytes,
                                        const struct fc_mem_info *dm, const struct fc_stream *s)
{
    return path == FC_PATH_H2D_PINNED && !a->sync && bytes <= FC_PINNED_H2D_EARLY_MAX && dm->device == s->device &&
           s->completed == s->submitted;
}

/* The source copied into a buffer the op owns: what it carries is what the
 * source held now. false: out of memory. */
static bool read_source_now(struct fc_op *op, const struct fc_copy_args *a)
{
    void *buf = malloc(a->width * a->height);
    if (buf == NULL)
        return false;
    copy_rows(buf, a->width, a->src, a->spitch, a->width, a->height);
    op->u.copy.src = op->u.copy.owned = buf;
    op->u.copy.spitch = a->width;
    return true;
}

static cudaError_t do_copy(const struct fc_copy_args *a)
{
    if (!fc_enter())
        return cudaErrorInitializationError;
    if ((unsigned)a->kind > cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    if (a->peer_api && (a->dst_device < 0 || a->dst_device >= fc_g.ndev || a->src_device < 0 ||
                        a->src_device >= fc_g.ndev))
        return cudaErrorInvalidDevice;
    if (a->width == 0 || a->height == 0)
        return cudaSuccess;
    if (a->height > 1 && (a->spitch < a->width || a->dpitch < a->width))
        return cudaErrorInvalidPitchValue;

    size_t bytes = a->width * a->height;
    struct fc_mem_info sm, dm;
    bool src_dev = a->kind == cudaMemcpyDeviceToHost || a->kind == cudaMemcpyDeviceToDevice;
    bool dst_dev = a->kind == cudaMemcpyHostToDevice || a->kind == cudaMemcpyDeviceToDevice;
    cudaError_t err = classify_side(a->src, (a->height - 1) * a->spitch + a->width, src_dev, a->peer_api, &sm);
    if (err == cudaSuccess)
        err = classify_side(a->dst, (a->height - 1) * a->dpitch + a->width, dst_dev, a->peer_api, &dm);
    if (err != cudaSuccess)
        return err;

    enum fc_path path = copy_path(&sm, &dm);
    enum fc_hold hold = FC_HOLD_NONE;
    bool snapshot = false, touch_api = false;
    switch (path) {
    case FC_PATH_H2D_PINNED:
    case FC_PATH_D2H_PINNED:
        touch_api = true;
        hold = a->sync ? FC_HOLD_WAIT : FC_HOLD_NONE;
        break;
    case FC_PATH_H2H_PINNED: hold = FC_HOLD_WAIT; break; /* host to host: always synchronous (measured) */
    case FC_PATH_H2D_PAGEABLE:
        snapshot = !a->sync && bytes <= fc_cfg()->pageable_h2d_async_max;
        hold = snapshot ? FC_HOLD_NONE : FC_HOLD_WAIT;
        break;
    case FC_PATH_D2H_PAGEABLE: hold = FC_HOLD_API_LOCK; break;
    case FC_PATH_H2H_PAGEABLE: hold = FC_HOLD_WAIT; break;
    case FC_PATH_D2D:
    case FC_PATH_PEER: hold = FC_HOLD_NONE; break; /* even cudaMemcpy: no host synchronization */
    case FC_PATH_STAGED: hold = fc_cfg()->staged_hold ? FC_HOLD_WAIT : FC_HOLD_NONE; break;
    }

    struct fc_op *op = fc_op_new(copy_run);
    op->complete = copy_complete;
    op->counts_as_work = true;
    op->u.copy = (struct fc_copy_op){
        .dst = a->dst, .src = a->src, .dpitch = a->dpitch, .spitch = a->spitch,
        .width = a->width, .height = a->height, .path = path, .device = dm.device,
        .duration_us = fc_copy_duration_us(bytes, path_bandwidth(path)),
    };
    if (snapshot && !read_source_now(op, a)) { /* case B: the caller may reuse the source at once */
        free(op);
        return cudaErrorMemoryAllocation;
    }

    if (touch_api)
        fc_api_touch();
    if (hold == FC_HOLD_API_LOCK)
        fc_api_lock();
    double t0 = fc_now_us();
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    bool queued = false;
    err = fc_stream_get(a->stream, a->per_thread, &s); /* cudaMemcpyPeer: stream 0, the legacy one */
    if (err == cudaSuccess && s->capture != NULL) {
        if (a->sync) { /* a synchronous copy cannot be captured */
            s->capture->invalidated = true;
            err = cudaErrorStreamCaptureUnsupported;
        } else { /* a copy node: its source is read at each launch, not now */
            struct fc_node node = {.kind = FC_NODE_COPY, .u.copy = op->u.copy};
            node.u.copy.src = a->src;
            node.u.copy.spitch = a->spitch;
            node.u.copy.owned = NULL;
            fc_capture_add_node_locked(s, &node);
        }
    } else if (err == cudaSuccess && reads_source_at_call_locked(a, path, bytes, &dm, s) && !read_source_now(op, a)) {
        err = cudaErrorMemoryAllocation; /* the copy is not queued */
    } else if (err == cudaSuccess) {
        int others[2];
        int nothers = legacy_other_devices(s, &sm, &dm, others);
        for (int i = 0; i < nothers; i++)
            fc_op_wait_device_locked(op, others[i], s);
        struct fc_dep *last = &fc_g.last_staged;
        if (path == FC_PATH_STAGED && last->stream != NULL)
            fc_op_add_dep(op, last->stream, last->seq); /* one staging queue for the process */
        uint64_t seq = fc_submit_locked(s, op);
        for (int i = 0; i < nothers; i++)
            fc_legacy_follow_locked(others[i], s, seq);
        if (path == FC_PATH_STAGED)
            *last = (struct fc_dep){s, seq};
        if (hold != FC_HOLD_NONE)
            fc_wait_locked(s, seq);
        queued = true;
    }
    pthread_mutex_unlock(&fc_g.mu);
    double held = fc_now_us() - t0;
    if (hold == FC_HOLD_API_LOCK)
        fc_api_unlock();
    if (!queued) {
        copy_complete(op);
        free(op->deps);
        free(op);
        return err;
    }

    count_copy(path, bytes);
    if (snapshot)
        fc_stat_add(pageable_h2d_snapshots, 1);
    if (hold != FC_HOLD_NONE && (path == FC_PATH_H2D_PAGEABLE || path == FC_PATH_D2H_PAGEABLE || path == FC_PATH_STAGED)) {
        if (path == FC_PATH_H2D_PAGEABLE)
            fc_stat_add(pageable_h2d_waits, 1);
        else if (path == FC_PATH_D2H_PAGEABLE)
            fc_stat_add(pageable_d2h_waits, 1);
        else
            fc_stat_add(staged_waits, 1);
        fc_stat_add(host_wait_us_total, held);
        fc_stat_max(host_wait_us_max, held);
    }
    return err;
}

#define FC_COPY_1D(dst_, src_, count_) \
    .dst = (dst_), .src = (src_), .dpitch = (count_), .spitch = (count_), .width = (count_), .height = 1

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return fc_ret(do_copy(&(struct fc_copy_args){FC_COPY_1D(dst, src, count), .kind = kind, .sync = true}));
}

cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return fc_ret(do_copy(&(struct fc_copy_args){FC_COPY_1D(dst, src, count), .kind = kind, .sync = true,
                                                  .per_thread = true}));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return fc_ret(do_copy(&(struct fc_copy_args){FC_COPY_1D(dst, src, count), .kind = kind, .stream = stream}));
}

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                 cudaStream_t stream)
{
    return fc_ret(do_copy(&(struct fc_copy_args){FC_COPY_1D(dst, src, count), .kind = kind, .stream = stream,
                                                  .per_thread = true}));
}

cudaError_t cudaMemcpyPeer(void *dst, int dst_device, const void *src, int src_device, size_t count)
{
    return fc_ret(do_copy(&(struct fc_copy_args){FC_COPY_1D(dst, src, count), .kind = cudaMemcpyDefault,
                                                  .peer_api = true, .dst_device = dst_device,
                                                  .src_device = src_device, .sync = true}));
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device, size_t count,
                                cudaStream_t stream)
{
    return fc_ret(do_copy(&(struct fc_copy_args){FC_COPY_1D(dst, src, count), .kind = cudaMemcpyDefault,
                                                  .peer_api = true, .dst_device = dst_device,
                                                  .src_device = src_device, .stream = stream}));
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind kind)
{
    return fc_ret(do_copy(&(struct fc_copy_args){.dst = dst, .dpitch = dpitch, .src = src, .spitch = spitch,
                                                  .width = width, .height = height, .kind = kind, .sync = true}));
}

cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height, enum cudaMemcpyKind kind)
{
    return fc_ret(do_copy(&(struct fc_copy_args){.dst = dst, .dpitch = dpitch, .src = src, .spitch = spitch,
                                                  .width = width, .height = height, .kind = kind, .sync = true,
                                                  .per_thread = true}));
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return fc_ret(do_copy(&(struct fc_copy_args){.dst = dst, .dpitch = dpitch, .src = src, .spitch = spitch,
                                                  .width = width, .height = height, .kind = kind,
                                                  .stream = stream}));
}

cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                   size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return fc_ret(do_copy(&(struct fc_copy_args){.dst = dst, .dpitch = dpitch, .src = src, .spitch = spitch,
                                                  .width = width, .height = height, .kind = kind,
                                                  .stream = stream, .per_thread = true}));
}

/* --- memset --------------------------------------------------------------------------------- */

static void memset_run(struct fc_op *op, cudaError_t status)
{
    (void)status;
    double start = fc_now_us();
    memset(op->u.memset.dst, op->u.memset.value, op->u.memset.bytes);
    fc_sleep_until_us(start + op->u.memset.duration_us);
}

struct fc_op *fc_memset_op_new(const struct fc_memset_op *memset)
{
    struct fc_op *op = fc_op_new(memset_run);
    op->counts_as_work = true;
    op->u.memset = *memset;
    return op;
}

/* Device memory, pinned or registered memory; the synchronous form returns
 * at once for device memory and waits for pinned memory (real API docs). */
static cudaError_t do_memset(void *dst, int value, size_t count, cudaStream_t stream, bool per_thread, bool sync)
{
    if (!fc_enter())
        return cudaErrorInitializationError;
    if (count == 0)
        return cudaSuccess;
    struct fc_mem_info m;
    cudaError_t err = classify_side(dst, count, true, false, &m);
    if (err != cudaSuccess)
        return err;
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    err = fc_stream_get(stream, per_thread, &s);
    if (err == cudaSuccess && s->capture != NULL) {
        if (sync) {
            s->capture->invalidated = true;
            err = cudaErrorStreamCaptureUnsupported;
        } else {
            struct fc_node node = {.kind = FC_NODE_MEMSET,
                                   .u.memset = {dst, value, count, fc_copy_duration_us(count, fc_cfg()->bw_d2d)}};
            fc_capture_add_node_locked(s, &node);
        }
    } else if (err == cudaSuccess) {
        struct fc_op *op = fc_op_new(memset_run);
        op->counts_as_work = true;
        op->u.memset = (struct fc_memset_op){dst, value, count, fc_copy_duration_us(count, fc_cfg()->bw_d2d)};
        uint64_t seq = fc_submit_locked(s, op);
        if (sync && m.kind != FC_MEM_DEVICE)
            fc_wait_locked(s, seq);
        fc_stat_add(memsets, 1);
    }
    pthread_mutex_unlock(&fc_g.mu);
    return err;
}

cudaError_t cudaMemset(void *dst, int value, size_t count)
{
    return fc_ret(do_memset(dst, value, count, NULL, false, true));
}

cudaError_t cudaMemset_ptds(void *dst, int value, size_t count)
{
    return fc_ret(do_memset(dst, value, count, NULL, true, true));
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t count, cudaStream_t stream)
{
    return fc_ret(do_memset(dst, value, count, stream, false, false));
}

cudaError_t cudaMemsetAsync_ptsz(void *dst, int value, size_t count, cudaStream_t stream)
{
    return fc_ret(do_memset(dst, value, count, stream, true, false));
}
