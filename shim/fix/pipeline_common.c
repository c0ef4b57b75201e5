/* pipeline_common.c - see pipeline_common.h. */
#include "pipeline_common.h"
#include "hot.h"

#include "config.h"
#include "ondevice.h"
#include "device_state.h"
#include "inflight.h"
#include "log.h"
#include "probe.h"
#include "state.h"
#include "streams.h"


static int logged_inflight_full, logged_no_slot, logged_missing, logged_mode, logged_capture, logged_capture_query,
    logged_stream_device, logged_device_range, logged_stream_ctx;

_Static_assert((int)CU_STREAM_CAPTURE_MODE_RELAXED == (int)cudaStreamCaptureModeRelaxed &&
                   (int)CU_STREAM_CAPTURE_MODE_GLOBAL == (int)cudaStreamCaptureModeGlobal &&
                   (int)CU_STREAM_CAPTURE_MODE_THREAD_LOCAL == (int)cudaStreamCaptureModeThreadLocal &&
                   (int)CU_STREAM_CAPTURE_STATUS_NONE == (int)cudaStreamCaptureStatusNone,
               "the driver's capture modes and statuses are the runtime's");

/* The thread's capture mode, exchanged as the runtime's function does (it
 * is the driver's state: the runtime's function calls the driver's). */
static cudaError_t exchange_mode(const struct us_real_api *real, const struct us_real_driver *drv,
                                 enum cudaStreamCaptureMode *mode)
{
    if (drv != NULL)
        return drv->cuThreadExchangeStreamCaptureMode((CUstreamCaptureMode *)mode) == CUDA_SUCCESS
                   ? cudaSuccess
                   : cudaErrorUnknown;
    return real->cudaThreadExchangeStreamCaptureMode(mode);
}

static void restore_mode(struct us_pipe *p)
{
    enum cudaStreamCaptureMode mode = p->saved_mode;
    exchange_mode(p->real, p->mode_drv, &mode);
}

static cudaError_t stream_is_capturing(const struct us_pipe *p, const struct us_real_driver *drv,
                                       enum cudaStreamCaptureStatus *status)
{
    if (drv != NULL && drv->cuStreamIsCapturing((CUstream)p->stream, (CUstreamCaptureStatus *)status) == CUDA_SUCCESS)
        return cudaSuccess;
    return p->real->cudaStreamIsCapturing(p->stream, status); /* the runtime's answer and error */
}

/* Whether the driver says the stream is in the current context (then it is
 * on the current device): cuStreamGetCtx, 60 ns less than the runtime's
 * cudaStreamGetDevice on an H200 host. No: the runtime is asked. */
static bool stream_in_context(const struct us_pipe *p, const struct us_real_driver *drv, const struct us_ctx *home)
{
    CUcontext ctx;
    return drv != NULL && home->handle != NULL && drv->cuStreamGetCtx((CUstream)p->stream, &ctx) == CUDA_SUCCESS &&
           ctx == home->handle;
}

US_HOT bool us_pipe_begin(struct us_pipe *p, const struct us_copy *c, const struct us_ctx *home)
{
    const struct us_real_api *real = us_real();
    /* a runtime that lacks one function of the rewrites gets no rewrite at
     * all: simpler to reason about than per-pipeline subsets */
    const char *missing = us_real_missing_for_rewrite(real);
    if (missing != NULL) {
        us_log_once(&logged_missing, US_LOG_WARN, "the runtime lacks %s: copies are not rewritten", missing);
        return false;
    }
    if (home == NULL) /* said by us_context_this */
        return false;
    p->real = real;
    p->copy = c;
    p->home = home;
    p->stream = us_copy_stream(c);
    p->saved_mode = cudaStreamCaptureModeRelaxed;
    const struct us_real_driver *drv = us_real_driver();
    p->drv = NULL;
    p->mode_drv = drv;
    cudaError_t err = exchange_mode(real, p->mode_drv, &p->saved_mode);
    if (err != cudaSuccess && drv != NULL) { /* the runtime's, then */
        p->mode_drv = NULL;
        p->saved_mode = cudaStreamCaptureModeRelaxed;
        err = exchange_mode(real, NULL, &p->saved_mode);
    }
    if (err != cudaSuccess) {
        us_log_once(&logged_mode, US_LOG_WARN, "cudaThreadExchangeStreamCaptureMode failed (%s): copies go native",
                    us_real_error_name(err));
        return false;
    }

    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    err = stream_is_capturing(p, drv, &status);
    if (err != cudaSuccess) {
        us_log_once(&logged_capture_query, US_LOG_INFO,
                    "cudaStreamIsCapturing failed (%s): the copy goes native", us_real_error_name(err));
        goto declined;
    }
    if (status != cudaStreamCaptureStatusNone) {
        us_log_once(&logged_capture, US_LOG_INFO,
                    "a copy on a stream being captured into a graph goes native (not rewritten)");
        goto declined;
    }
    /* the current context's device is the runtime's current device (home
     * was looked up from the current context); legacy and per-thread handles
     * name its stream. Each runtime call saved here is 60-70 ns of a small
     * copy's cost (tools/bench/apicost.sh on an H100 host). */
    p->current_device = home->device;
    p->stream_device = home->device;
    if (c->stream_kind == US_STREAM_USER && !stream_in_context(p, drv, home) &&
        (err = real->cudaStreamGetDevice(p->stream, &p->stream_device)) != cudaSuccess) {
        us_log_once(&logged_stream_device, US_LOG_INFO,
                    "cudaStreamGetDevice failed (%s): the copy goes native", us_real_error_name(err));
        goto declined;
    }
    if (p->stream_device < 0 || p->stream_device >= US_MAX_DEVICES || p->current_device < 0 ||
        p->current_device >= US_MAX_DEVICES || c->src_mem.device >= US_MAX_DEVICES ||
        c->dst_mem.device >= US_MAX_DEVICES) {
        us_log_once(&logged_device_range, US_LOG_WARN, "device numbers of %d and above are not rewritten",
                    US_MAX_DEVICES);
        goto declined;
    }
    /* a stream of the caller's device is the caller's context's (one of
     * another context of that device is an invalid handle: the first call on
     * it fails, and the native call gives that error); of another device, that
     * device's primary context's */
    p->stream_ctx = p->stream_device == home->device ? home : us_context_primary(p->stream_device);
    if (p->stream_ctx == NULL) {
        us_log_once(&logged_stream_ctx, US_LOG_INFO,
                    "a copy on a stream of another device whose primary context is not active goes native");
        goto declined;
    }
    /* the driver's calls act in the current context: a stream of another
     * device's context gets the runtime's */
    p->drv = p->stream_ctx == home ? drv : NULL;
    /* the device sides: a release of them waits until us_pipe_end */
    uintptr_t base[2] = {(uintptr_t)c->src, (uintptr_t)c->dst};
    size_t bytes[2] = {c->src_mem.kind == US_MEM_DEVICE ? c->bytes : 0,
                       c->dst_mem.kind == US_MEM_DEVICE ? c->bytes : 0};
    if (!us_inflight_begin(base, bytes, 2, &p->inflight)) {
        us_log_once(&logged_inflight_full, US_LOG_INFO, "more than %d copies rewritten at once: the copy goes native",
                    US_INFLIGHT_MAX);
        goto declined;
    }
    US_PROBE_STAMP(pipe_begun);
    return true;

declined:
    restore_mode(p);
    return false;
}

US_HOT void us_pipe_end(struct us_pipe *p)
{
    US_PROBE_STAMP(pipe_done);
    us_inflight_end(p->inflight);
    restore_mode(p);
}

size_t us_pipe_peer_chunk(size_t bytes, size_t slot_bytes, size_t ring_bytes, unsigned max_chunks)
{
    size_t chunk = slot_bytes;
    if (max_chunks > 0 && us_pipe_chunks(bytes, chunk) > max_chunks) {
        chunk = us_pipe_chunks(bytes, max_chunks);
        chunk = (chunk + 4095) & ~(size_t)4095;
    }
    if (chunk > ring_bytes / 2)
        chunk = ring_bytes / 2;
    return chunk;
}

unsigned us_pipe_claim_cap(void)
{
    size_t n = us_config()->pinned_max / 2 / us_staging_slot_bytes();
    return n < 1 ? 1 : n > US_STAGING_MAX_CLAIM ? US_STAGING_MAX_CLAIM : (unsigned)n;
}

static struct us_staging_ask staging_ask(const struct us_pipe *p, unsigned want, enum us_pipe_claim_mode mode)
{
    return (struct us_staging_ask){
        .want = want,
        .copy_bytes = p->copy->bytes,
        .device = p->stream_device,
        .ready_only = mode == US_PIPE_CLAIM_READY,
        .pin_one = mode == US_PIPE_CLAIM_SOME,
        .pieces = us_staging_pieces(p->copy->path == US_PATH_H2D_PAGEABLE, p->copy->bytes),
        /* the grower pins in the primary context: not one the program never made active */
        .inline_only = !us_context_primary_active(p->home),
    };
}

bool us_pipe_grow_later(const struct us_pipe *p, unsigned want)
{
    struct us_staging_ask ask = staging_ask(p, want, US_PIPE_CLAIM_SOME);
    return us_staging_grow_later(&ask);
}

US_HOT bool us_pipe_claim(const struct us_pipe *p, unsigned want, enum us_pipe_claim_mode mode, struct us_pipe_slots *s)
{
    struct us_staging_ask ask = staging_ask(p, want, mode);
    bool growing;
    s->piece = us_staging_ask_slot_bytes(&ask);
    s->n = us_staging_claim_for_copy(&ask, s->slot, &growing);
    if (s->n == 0) {
        if (!growing && mode != US_PIPE_CLAIM_READY) /* else the pool said why, or the caller decides */
            us_log_once(&logged_no_slot, US_LOG_INFO,
                        "no pinned staging free without waiting: the copy goes native (pinned_max, or every slot busy)");
        return false;
    }
    cudaError_t err = cudaSuccess;
    for (unsigned i = 0; i < s->n; i++) {
        s->pending[i] = -1; /* claimed slots are free */
        if (err == cudaSuccess)
            err = us_staging_slot_event(s->slot[i], p->stream_ctx, p->home, &s->event[i]);
    }
    if (err != cudaSuccess) { /* logged by us_ondevice_event_create */
        us_pipe_release(s);
        return false;
    }
    US_PROBE_STAMP(slots_claimed);
    return true;
}

/* Asks only a stream that is not being captured: a query of a capturing
 * stream would invalidate its capture (on the legacy stream: one of the
 * device's blocking streams is capturing). The copy's own stream was found
 * not capturing by us_pipe_begin (checked: false). Through the driver where
 * the copy's stream is in the current context (p->drv), which answers
 * without the runtime's checks and leaves the runtime's last error alone:
 * a staged peer copy that goes native on an idle stream pays these queries
 * on top of the native call (on two H200s they were 3.5 us of a 1 MiB
 * copy's 55 through the runtime, tools/bench/probe.sh peer_async). */
static bool stream_idle(const struct us_pipe *p, cudaStream_t stream, bool checked)
{
    if (p->drv != NULL) {
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        return (checked || (p->drv->cuStreamIsCapturing((CUstream)stream, &status) == CUDA_SUCCESS &&
                            status == CU_STREAM_CAPTURE_STATUS_NONE)) &&
               p->drv->cuStreamQuery((CUstream)stream) == CUDA_SUCCESS;
    }
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    return (checked ||
            (p->real->cudaStreamIsCapturing(stream, &status) == cudaSuccess && status == cudaStreamCaptureStatusNone)) &&
           p->real->cudaStreamQuery(stream) == cudaSuccess;
}

#define US_PIPE_IDLE_MAX_BLOCKING 8

bool us_pipe_stream_idle(const struct us_pipe *p)
{
    const struct us_real_api *real = p->real;
    if (p->stream_device != p->current_device)
        return false;
    switch (p->copy->stream_kind) {
    case US_STREAM_USER: {
        int blocking = us_streams_is_blocking(p->stream);
        unsigned flags;
        if (blocking < 0 && real->cudaStreamGetFlags != NULL && real->cudaStreamGetFlags(p->stream, &flags) == cudaSuccess)
            blocking = (flags & cudaStreamNonBlocking) == 0;
        /* a blocking stream's earlier work is the legacy stream's too: the
         * legacy stream's query alone answers for both (measured: conformance
         * legacy_query_includes_blocking), a driver call fewer */
        if (blocking < 0)
            return false;
        return blocking ? stream_idle(p, cudaStreamLegacy, false) : stream_idle(p, p->stream, true);
    }
    case US_STREAM_PER_THREAD:
        return stream_idle(p, p->stream, true) && stream_idle(p, cudaStreamLegacy, false);
    case US_STREAM_LEGACY: {
        if (p->copy->driver_fn != NULL) /* a static or driver-API program's streams are unseen */
            return false;
        cudaStream_t blocking[US_PIPE_IDLE_MAX_BLOCKING];
        unsigned n = us_streams_blocking_on(p->stream_device, blocking, US_PIPE_IDLE_MAX_BLOCKING);
        if (n > US_PIPE_IDLE_MAX_BLOCKING || !stream_idle(p, cudaStreamLegacy, true))
            return false;
        for (unsigned i = 0; i < n; i++)
            if (!stream_idle(p, blocking[i], false))
                return false;
        return true;
    }
    }
    return false;
}

bool us_pipe_native_when_idle(struct us_pipe *p, size_t limit, int *logged, const char *why)
{
    if (p->copy->bytes > limit || !us_pipe_stream_idle(p))
        return false;
    us_log_once(logged, US_LOG_INFO, "%s", why);
    us_pipe_end(p);
    return true;
}

US_HOT void us_pipe_release(struct us_pipe_slots *s)
{
    us_staging_release(s->slot, s->n, s->pending);
    s->n = 0;
}

static cudaError_t copy_part(const struct us_pipe *p, void *dst, const void *src, size_t bytes,
                             enum cudaMemcpyKind kind)
{
    if (p->drv != NULL) {
        CUresult r = kind == cudaMemcpyDeviceToHost
                         ? p->drv->cuMemcpyDtoHAsync_v2(dst, (CUdeviceptr)(uintptr_t)src, bytes, (CUstream)p->stream)
                         : p->drv->cuMemcpyHtoDAsync_v2((CUdeviceptr)(uintptr_t)dst, src, bytes, (CUstream)p->stream);
        if (r == CUDA_SUCCESS)
            return cudaSuccess;
    }
    return p->real->cudaMemcpyAsync(dst, src, bytes, kind, p->stream);
}

/* In parts that end where the slot's registered pieces end (staging.h): a
 * copy across two registrations is refused. A slot of 2 MiB or less lies in
 * one piece, and its copy is one call. A part refused after others were
 * queued leaves the slot to a transfer no event follows: it is lost, never
 * reused (another copy's bytes could otherwise meet that transfer). */
US_HOT cudaError_t us_pipe_copy_chunk(const struct us_pipe *p, struct us_pipe_slots *s, unsigned k, void *dst,
                                      const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    if (!s->slot[k]->pieced)
        return copy_part(p, dst, src, bytes, kind);
    bool to_host = kind == cudaMemcpyDeviceToHost, queued = false;
    for (;;) {
        size_t part = us_staging_piece_room(to_host ? dst : src, bytes);
        cudaError_t err = copy_part(p, dst, src, part, kind);
        if (err != cudaSuccess && queued)
            s->pending[k] = US_STAGING_LOST;
        if (err != cudaSuccess || part == bytes)
            return err;
        queued = true;
        dst = (char *)dst + part;
        src = (const char *)src + part;
        bytes -= part;
    }
}

US_HOT cudaError_t us_pipe_record(const struct us_pipe *p, cudaEvent_t event)
{
    if (p->drv != NULL && p->drv->cuEventRecord((CUevent)event, (CUstream)p->stream) == CUDA_SUCCESS)
        return cudaSuccess;
    return p->real->cudaEventRecord(event, p->stream);
}

cudaError_t us_pipe_host_func(const struct us_pipe *p, cudaHostFn_t fn, void *data)
{
    if (p->drv != NULL && p->drv->cuLaunchHostFunc((CUstream)p->stream, fn, data) == CUDA_SUCCESS)
        return cudaSuccess;
    return p->real->cudaLaunchHostFunc(p->stream, fn, data);
}

/* cudaEventSynchronize (cuEventSynchronize where p->drv is set), not a
 * polling loop. Measured on an H100 (driver 580, CUDA 13.0,
 * tools/bench/smallcopy.sh and case C's launch_latency):
 * polling cudaEventQuery with nanosleep between queries added the sleep's
 * timer slack (50 us) to every small copy (a 4-byte pageable D2H took 86 us
 * against 9 us natively), and another thread's worst kernel launch during a
 * 256 MiB D2H loop reached 3.1 ms (each query takes the driver lock that
 * launches go through). Waiting in cudaEventSynchronize: 10 us for the 4-byte
 * D2H, and that thread's worst launch 0.28 ms (native 0.19-0.24 ms), the
 * copy loop's throughput unchanged. The wait holds no lock that a launch
 * needs once the kernel's module is loaded. */
US_HOT cudaError_t us_pipe_wait(const struct us_pipe *p, cudaEvent_t event)
{
    cudaError_t err = p->drv != NULL && p->drv->cuEventSynchronize((CUevent)event) == CUDA_SUCCESS
                          ? cudaSuccess
                          : p->real->cudaEventSynchronize(event);
    US_PROBE_STAMP(waited);
    return err;
}
