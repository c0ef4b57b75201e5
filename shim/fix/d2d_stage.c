/* d2d_stage.c - see d2d_stage.h. */
#include "d2d_stage.h"

#include <stdatomic.h>

#include "context.h"
#include "hostpages.h"
#include "log.h"
#include "real.h"

static bool stream_capturing(const struct us_real_api *real, cudaStream_t s)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    return real->cudaStreamIsCapturing == NULL || real->cudaStreamIsCapturing(s, &st) != cudaSuccess ||
           st != cudaStreamCaptureStatusNone;
}

/* The asynchronous copies it stages: the runtime's, and the driver's that a
 * static runtime or a driver-API program makes (the driver layer). */
static bool stageable_api(enum us_copy_api api)
{
    switch (api) {
    case US_API_MEMCPY_ASYNC:
    case US_API_MEMCPY_ASYNC_PTSZ:
    case US_API_CU_DTOD_ASYNC:
    case US_API_CU_DTOD_ASYNC_PTSZ:
    case US_API_CU_MEMCPY_ASYNC:
    case US_API_CU_MEMCPY_ASYNC_PTSZ: return true;
    default: return false;
    }
}

/* One half of the staged copy as the runtime's cudaMemcpyAsync on the copy's
 * stream: a driver function moves one direction only (cuMemcpyDtoDAsync
 * cannot write host memory), and the runtime takes the driver's stream
 * handles; the per-thread variant keeps "0" the per-thread stream. */
static struct us_copy half_of(const struct us_copy *c, void *dst, const void *src, size_t bytes,
                              enum cudaMemcpyKind kind)
{
    struct us_copy h = *c;
    h.bytes = bytes;
    h.api = us_copy_is_per_thread(c) ? US_API_MEMCPY_ASYNC_PTSZ : US_API_MEMCPY_ASYNC;
    h.driver_fn = NULL;
    h.dst = dst;
    h.src = src;
    h.kind = kind;
    h.src_unlisted = h.dst_unlisted = false; /* other pointers: not looked up */
    return h;
}

/* The stream's buffer is pinned inside the call of the copy that first
 * needs it, so it is kept small: pinning costs about 0.4 ms a MiB (H200,
 * docs/fakecuda.md), and with a buffer of 8 MiB the first staged burst of 8 x
 * 1 MiB took 3.4-4.7 ms, more than the 2.44 ms time slice it avoids. A
 * larger copy goes through it in pieces, each D2H behind the previous
 * piece's H2D in the stream's order. */
#define D2D_STAGE_BUFFER_BYTES ((size_t)2 << 20)

bool us_d2d_stage(const struct us_copy *c, const struct us_config *cfg, struct us_engine_call *call,
                  cudaError_t *result)
{
    static atomic_bool logged_alloc, logged_first;
    struct us_engine_stage *stage = us_engine_stage_of(call);
    if (stage == NULL || c->bytes == 0 || c->bytes > cfg->busy_d2d_max_bytes || !stageable_api(c->api))
        return false;
    const struct us_real_api *real = us_real();
    if (real->cudaHostAlloc == NULL || real->cudaThreadExchangeStreamCaptureMode == NULL)
        return false;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    bool relaxed = real->cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
    bool ok = !stream_capturing(real, call->stream);
    size_t buffer_bytes = cfg->busy_d2d_max_bytes < D2D_STAGE_BUFFER_BYTES ? cfg->busy_d2d_max_bytes
                                                                           : D2D_STAGE_BUFFER_BYTES;
    if (ok && stage->host == NULL) {
        /* allocated in the device's primary context, portable: the stream
         * may belong to a context the program created, and destroying that
         * context would free what was allocated in it while this slot still
         * points there (a later context and stream may get the same handles) */
        void *host = NULL;
        bool pushed;
        bool primary = us_context_enter_primary(c->src_mem.device, &pushed);
        cudaError_t err = cudaErrorUnknown;
        if (primary) {
            us_hostpages_own_mapping_begin(); /* fresh memory: pages remembered pageable stay so */
            err = real->cudaHostAlloc(&host, buffer_bytes, cudaHostAllocPortable);
            us_hostpages_own_mapping_end();
            us_context_leave_primary(pushed);
        }
        if (err == cudaSuccess) {
            stage->host = host;
            stage->bytes = buffer_bytes;
        } else {
            us_log_once(&logged_alloc, US_LOG_WARN,
                        "fix_busy_d2d: no pinned staging buffer (%s); late same-device copies stay native",
                        primary ? us_real_error_name(err) : "the device's primary context is not active");
            ok = false;
        }
    }
    if (relaxed)
        real->cudaThreadExchangeStreamCaptureMode(&mode);
    if (!ok || stage->bytes == 0)
        return false;
    us_log_once(&logged_first, US_LOG_INFO,
                "fix_busy_d2d: same-device copies start late behind the compute engine; copying them through "
                "pinned memory on the copy engines while they do");
    /* the first piece's D2H fails: nothing was issued, the native call's
     * error is the same kind of error; a later half: the data is not all
     * there, and the error is the call's */
    *result = cudaSuccess;
    for (size_t done = 0; done < c->bytes && *result == cudaSuccess;) {
        size_t piece = c->bytes - done < stage->bytes ? c->bytes - done : stage->bytes;
        struct us_copy down = half_of(c, stage->host, (const char *)c->src + done, piece, cudaMemcpyDeviceToHost),
                       up = half_of(c, (char *)c->dst + done, stage->host, piece, cudaMemcpyHostToDevice);
        *result = us_copy_native(&down);
        if (*result == cudaSuccess)
            *result = us_copy_native(&up);
        done += piece;
    }
    return true;
}
