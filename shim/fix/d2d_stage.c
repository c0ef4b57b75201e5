/* d2d_stage.c - see d2d_stage.h. */
#include "d2d_stage.h"

#include <stdatomic.h>

#include "context.h"
#include "staging.h"
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

/* The stream's buffer: a slot of the staging pool (staging.h) ready now,
 * of 2 MiB or busy_d2d_max_bytes when smaller, kept for good (claimed, never
 * given back: the stream may read it at any later time). With none ready the
 * grower thread pins one for the copies to come, and this copy goes native:
 * pinned inside the call, 8 MiB made the first staged burst slower than the
 * time slice it avoids (2.9-5.2 ms against 2.44 on one H200), and even 2 MiB
 * did on a two-H200 host (2.0-11.0 ms: docs/pipelines.md, case D). A larger copy
 * goes through it in pieces, each D2H behind the previous piece's H2D in the
 * stream's order. */
#define D2D_STAGE_BUFFER_BYTES ((size_t)2 << 20)

static bool take_buffer(const struct us_copy *c, const struct us_config *cfg, const struct us_ctx *home,
                        struct us_engine_stage *stage)
{
    static atomic_bool logged_growing, logged_no_primary;
    int device = c->src_mem.device;
    if (home == NULL)
        return false;
    if (!us_context_primary_active(home)) {
        /* the pool pins in the primary context: never one the program did not make active */
        us_log_once(&logged_no_primary, US_LOG_INFO,
                    "fix_busy_d2d: the device's primary context is not active, so no staging buffer can be pinned "
                    "off the program's threads; late same-device copies stay native");
        return false;
    }
    struct us_staging_ask ask = {
        .want = 1,
        .copy_bytes = cfg->busy_d2d_max_bytes < D2D_STAGE_BUFFER_BYTES ? cfg->busy_d2d_max_bytes
                                                                        : D2D_STAGE_BUFFER_BYTES,
        .device = device,
        .pieces = 1,
        .ready_only = true,
    };
    struct us_slot *slot;
    bool growing;
    if (us_staging_claim_for_copy(&ask, &slot, &growing) == 0) {
        if (us_staging_grow_later(&ask))
            us_log_once(&logged_growing, US_LOG_INFO,
                        "fix_busy_d2d: no pinned staging slot ready for a late stream: its copies go native while a "
                        "background thread pins one");
        return false;
    }
    stage->host = slot->ptr;
    /* a copy must not cross the slot's registered pieces (staging.h): the
     * buffer ends where the first one does */
    stage->bytes = slot->pieced ? us_staging_piece_room(slot->ptr, slot->bytes) : slot->bytes;
    return true;
}

bool us_d2d_stage(const struct us_copy *c, const struct us_config *cfg, const struct us_ctx *home,
                  struct us_engine_call *call, cudaError_t *result)
{
    static atomic_bool logged_first;
    struct us_engine_stage *stage = us_engine_stage_of(call);
    if (stage == NULL || c->bytes == 0 || c->bytes > cfg->busy_d2d_max_bytes || !stageable_api(c->api))
        return false;
    const struct us_real_api *real = us_real();
    if (real->cudaThreadExchangeStreamCaptureMode == NULL)
        return false;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    bool relaxed = real->cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
    bool ok = !stream_capturing(real, call->stream);
    if (ok && stage->host == NULL)
        ok = take_buffer(c, cfg, home, stage);
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
