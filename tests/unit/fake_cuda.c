/* fake_cuda.c - see fake_cuda.h. */
#include "fake_cuda.h"

#include "context.h"
#include "grower.h"
#include "hostpages.h"
#include "staging.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config.h"
#include "copy.h"
#include "log.h"
#include "real.h"
#include "real_driver.h"

#define FAKE_MAX_STREAMS 512
#define FAKE_MAX_EVENTS 8192

struct fake_stream {
    int device;
    unsigned flags;
    bool live;
};

struct fake_event {
    int device;
    unsigned flags;
    bool live;
};

struct fake_cuda_state fake_cuda;

static struct fake_stream streams[FAKE_MAX_STREAMS];
static unsigned nstreams;
static struct fake_event events[FAKE_MAX_EVENTS];
static unsigned nevents;
static _Thread_local int current_device;
static _Thread_local enum cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
static unsigned not_relaxed;
/* pinned memory handed out since the last reset, freed by the next one */
#define FAKE_MAX_HOST_ALLOCS 4096
static void *host_allocs[FAKE_MAX_HOST_ALLOCS];
static unsigned nhost_allocs;

/* The staging pool's grower thread calls the fake too (grower.c): the call
 * log and the counts are kept under this lock. Tests read them once the
 * grower is idle (us_grower_wait_idle). */
static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;

static struct {
    unsigned calls;      /* of this function so far */
    unsigned fail_from;  /* 1-based call number of the first failure; 0: none */
    unsigned fail_count; /* 0: every later call */
    cudaError_t err;
} fns[FAKE_FN_COUNT];

/* Logs a call; returns the injected error, if any. */
static cudaError_t note(enum fake_cuda_fn fn, cudaStream_t stream, cudaEvent_t event, const void *dst,
                        const void *src, size_t bytes)
{
    bool relaxed = capture_mode == cudaStreamCaptureModeRelaxed;
    pthread_mutex_lock(&fake_mu);
    /* choosing a device is no capture-unsafe call (the grower thread makes
     * the copy's device current before anything else: no context elsewhere),
     * nor is asking which one is current (the chain's context lookup) */
    if (!relaxed && fn != FAKE_cudaThreadExchangeStreamCaptureMode && fn != FAKE_cuThreadExchangeStreamCaptureMode &&
        fn != FAKE_cudaSetDevice && fn != FAKE_cudaGetDevice)
        not_relaxed++;
    if (fake_cuda.ncalls < FAKE_CUDA_MAX_LOG)
        fake_cuda.calls[fake_cuda.ncalls++] = (struct fake_cuda_call){
            fn, stream, event, dst, src, bytes, current_device, relaxed, pthread_self()};
    unsigned n = ++fns[fn].calls;
    cudaError_t err = cudaSuccess;
    if (fns[fn].fail_from != 0 && n >= fns[fn].fail_from &&
        (fns[fn].fail_count == 0 || n < fns[fn].fail_from + fns[fn].fail_count))
        err = fns[fn].err;
    pthread_mutex_unlock(&fake_mu);
    return err;
}

static struct fake_stream *stream_of(cudaStream_t s)
{
    uintptr_t p = (uintptr_t)s, base = (uintptr_t)streams;
    if (p < base || p >= base + sizeof streams || (p - base) % sizeof streams[0] != 0)
        return NULL;
    struct fake_stream *fs = (struct fake_stream *)s;
    return fs->live ? fs : NULL;
}

static struct fake_event *event_of(cudaEvent_t e)
{
    uintptr_t p = (uintptr_t)e, base = (uintptr_t)events;
    if (p < base || p >= base + sizeof events || (p - base) % sizeof events[0] != 0)
        return NULL;
    struct fake_event *fe = (struct fake_event *)e;
    return fe->live ? fe : NULL;
}

/* The device of a stream handle as the runtime reads it; -1 if invalid. */
static int device_of(cudaStream_t s)
{
    if (s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return current_device;
    struct fake_stream *fs = stream_of(s);
    return fs != NULL ? fs->device : -1;
}

int fake_cuda_stream_device(cudaStream_t s)
{
    struct fake_stream *fs = stream_of(s);
    return fs != NULL ? fs->device : -1;
}

int fake_cuda_event_device(cudaEvent_t e)
{
    struct fake_event *fe = event_of(e);
    return fe != NULL ? fe->device : -1;
}

static cudaStream_t new_stream(int device, unsigned flags)
{
    if (nstreams == FAKE_MAX_STREAMS)
        return NULL;
    streams[nstreams] = (struct fake_stream){device, flags, true};
    return (cudaStream_t)&streams[nstreams++];
}

cudaStream_t fake_cuda_user_stream(int device)
{
    return new_stream(device, 0);
}

unsigned fake_cuda_calls_not_relaxed(void)
{
    return not_relaxed;
}

/* --- the fakes ------------------------------------------------------------ */

/* The runtime's fakes and the driver's (f_cu*, below) share these, each
 * logged as the function it is. */
static cudaError_t memcpy_as(enum fake_cuda_fn fn, void *dst, const void *src, size_t count, cudaStream_t stream)
{
    cudaError_t err = note(fn, stream, NULL, dst, src, count);
    if (err == cudaSuccess && device_of(stream) < 0)
        err = cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess)
        memmove(dst, src, count);
    return err;
}

static cudaError_t f_cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                     cudaStream_t stream)
{
    (void)kind;
    return memcpy_as(FAKE_cudaMemcpyAsync, dst, src, count, stream);
}

/* As the real runtime does: its pinned allocation reaches libcuda's
 * cuMemHostAlloc through the entry point cuGetProcAddress gave it, which is
 * the driver layer's wrapper (entry_driver/mappings.c): pages remembered
 * pageable are forgotten, the shim's own allocations included. */
static cudaError_t f_cudaHostAlloc(void **p, size_t size, unsigned flags)
{
    cudaError_t err = note(FAKE_cudaHostAlloc, NULL, NULL, NULL, NULL, size);
    if (err != cudaSuccess)
        return err;
    us_hostpages_mapping_changed();
    void *mem = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
    if (mem == NULL)
        return cudaErrorMemoryAllocation;
    pthread_mutex_lock(&fake_mu);
    if (nhost_allocs == FAKE_MAX_HOST_ALLOCS) {
        pthread_mutex_unlock(&fake_mu);
        free(mem);
        return cudaErrorMemoryAllocation;
    }
    *p = mem;
    host_allocs[nhost_allocs++] = mem;
    fake_cuda.host_alloc_bytes += size;
    fake_cuda.host_alloc_flags = flags;
    pthread_mutex_unlock(&fake_mu);
    return cudaSuccess;
}

static cudaError_t f_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    cudaError_t err = note(FAKE_cudaStreamCreateWithFlags, NULL, NULL, NULL, NULL, 0);
    if (err != cudaSuccess)
        return err;
    *s = new_stream(current_device, flags);
    fake_cuda.stream_flags = flags;
    return *s != NULL ? cudaSuccess : cudaErrorMemoryAllocation;
}

static cudaError_t f_cudaStreamDestroy(cudaStream_t s)
{
    cudaError_t err = note(FAKE_cudaStreamDestroy, s, NULL, NULL, NULL, 0);
    struct fake_stream *fs = stream_of(s);
    if (err == cudaSuccess && fs == NULL)
        err = cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess)
        fs->live = false;
    return err;
}

static cudaError_t f_cudaStreamSynchronize(cudaStream_t s)
{
    cudaError_t err = note(FAKE_cudaStreamSynchronize, s, NULL, NULL, NULL, 0);
    if (err == cudaSuccess && device_of(s) < 0)
        err = cudaErrorInvalidResourceHandle;
    return err != cudaSuccess ? err : fake_cuda.stream_error;
}

static cudaError_t stream_query_as(enum fake_cuda_fn call, cudaStream_t s)
{
    cudaError_t err = note(call, s, NULL, NULL, NULL, 0);
    if (err == cudaSuccess && device_of(s) < 0)
        err = cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess && fake_cuda.stream_error == cudaSuccess && fake_cuda.streams_busy)
        return cudaErrorNotReady;
    return err != cudaSuccess ? err : fake_cuda.stream_error;
}

static cudaError_t f_cudaStreamQuery(cudaStream_t s)
{
    return stream_query_as(FAKE_cudaStreamQuery, s);
}

static cudaError_t f_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    (void)flags;
    cudaError_t err = note(FAKE_cudaStreamWaitEvent, s, e, NULL, NULL, 0);
    if (err == cudaSuccess && (device_of(s) < 0 || event_of(e) == NULL))
        err = cudaErrorInvalidResourceHandle;
    return err;
}

static cudaError_t f_cudaStreamGetDevice(cudaStream_t s, int *device)
{
    cudaError_t err = note(FAKE_cudaStreamGetDevice, s, NULL, NULL, NULL, 0);
    if (err == cudaSuccess && device_of(s) < 0)
        err = cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess)
        *device = device_of(s);
    return err;
}

static cudaError_t is_capturing_as(enum fake_cuda_fn fn, cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
    cudaError_t err = note(fn, s, NULL, NULL, NULL, 0);
    if (err == cudaSuccess)
        err = fake_cuda.capture_query_error;
    if (err == cudaSuccess && device_of(s) < 0)
        err = cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess)
        *status = fake_cuda.capture;
    return err;
}

static cudaError_t f_cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
    return is_capturing_as(FAKE_cudaStreamIsCapturing, s, status);
}

/* One capture mode per thread, which the runtime's and the driver's
 * functions both exchange (the GPU: tests/capture's other_thread cases under
 * the shim). */
static cudaError_t exchange_mode_as(enum fake_cuda_fn fn, enum cudaStreamCaptureMode *mode)
{
    cudaError_t err = note(fn, NULL, NULL, NULL, NULL, 0);
    if (err != cudaSuccess)
        return err;
    enum cudaStreamCaptureMode old = capture_mode;
    capture_mode = *mode;
    *mode = old;
    return cudaSuccess;
}

static cudaError_t f_cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    return exchange_mode_as(FAKE_cudaThreadExchangeStreamCaptureMode, mode);
}

static cudaError_t launch_host_as(enum fake_cuda_fn fn_id, cudaStream_t s, cudaHostFn_t fn, void *data)
{
    cudaError_t err = note(fn_id, s, NULL, NULL, NULL, 0);
    if (err == cudaSuccess && device_of(s) < 0)
        err = cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess)
        fn(data);
    return err;
}

static cudaError_t f_cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data)
{
    return launch_host_as(FAKE_cudaLaunchHostFunc, s, fn, data);
}

static cudaError_t f_cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    cudaError_t err = note(FAKE_cudaEventCreateWithFlags, NULL, NULL, NULL, NULL, 0);
    if (err != cudaSuccess)
        return err;
    if (nevents == FAKE_MAX_EVENTS)
        return cudaErrorMemoryAllocation;
    events[nevents] = (struct fake_event){current_device, flags, true};
    *e = (cudaEvent_t)&events[nevents++];
    fake_cuda.event_flags = flags;
    return cudaSuccess;
}

static cudaError_t f_cudaEventDestroy(cudaEvent_t e)
{
    cudaError_t err = note(FAKE_cudaEventDestroy, NULL, e, NULL, NULL, 0);
    struct fake_event *fe = event_of(e);
    if (err == cudaSuccess && fe == NULL)
        err = cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess)
        fe->live = false;
    return err;
}

static cudaError_t record_as(enum fake_cuda_fn fn, cudaEvent_t e, cudaStream_t s)
{
    cudaError_t err = note(fn, s, e, NULL, NULL, 0);
    struct fake_event *fe = event_of(e);
    if (err == cudaSuccess && (fe == NULL || device_of(s) < 0 || device_of(s) != fe->device))
        err = cudaErrorInvalidResourceHandle; /* an event is recorded on a stream of its device */
    return err;
}

static cudaError_t f_cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    return record_as(FAKE_cudaEventRecord, e, s);
}

static cudaError_t f_cudaEventQuery(cudaEvent_t e)
{
    cudaError_t err = note(FAKE_cudaEventQuery, NULL, e, NULL, NULL, 0);
    if (err == cudaSuccess && event_of(e) == NULL)
        err = cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess && fake_cuda.events_busy)
        err = cudaErrorNotReady;
    return err != cudaSuccess ? err : fake_cuda.stream_error; /* sticky errors show in queries too */
}

static cudaError_t event_sync_as(enum fake_cuda_fn fn, cudaEvent_t e)
{
    cudaError_t err = note(fn, NULL, e, NULL, NULL, 0);
    if (err == cudaSuccess && event_of(e) == NULL)
        err = cudaErrorInvalidResourceHandle;
    return err != cudaSuccess ? err : fake_cuda.stream_error;
}

static cudaError_t f_cudaEventSynchronize(cudaEvent_t e)
{
    return event_sync_as(FAKE_cudaEventSynchronize, e);
}

/* --- the driver's (real_driver.def) --------------------------------------- */

/* cudaError_t and CUresult share the codes the fake returns */
static CUresult cu(cudaError_t err)
{
    return (CUresult)err;
}

static CUresult f_cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    return cu(exchange_mode_as(FAKE_cuThreadExchangeStreamCaptureMode, (enum cudaStreamCaptureMode *)mode));
}

static CUresult f_cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    return cu(is_capturing_as(FAKE_cuStreamIsCapturing, (cudaStream_t)s, (enum cudaStreamCaptureStatus *)status));
}

/* A context per device (the unit tests' contexts have no driver handle, so
 * the pipelines ask the runtime's cudaStreamGetDevice as well) */
static CUresult f_cuStreamGetCtx(CUstream s, CUcontext *ctx)
{
    cudaError_t err = note(FAKE_cuStreamGetCtx, (cudaStream_t)s, NULL, NULL, NULL, 0);
    int device = device_of((cudaStream_t)s);
    if (err == cudaSuccess && device < 0)
        err = cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess)
        *ctx = (CUcontext)(uintptr_t)(0x100 + device);
    return cu(err);
}

static CUresult f_cuStreamQuery(CUstream s)
{
    return cu(stream_query_as(FAKE_cuStreamQuery, (cudaStream_t)s));
}

static CUresult f_cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream s)
{
    return cu(memcpy_as(FAKE_cuMemcpyDtoHAsync_v2, dst, (const void *)(uintptr_t)src, bytes, (cudaStream_t)s));
}

static CUresult f_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, CUstream s)
{
    return cu(memcpy_as(FAKE_cuMemcpyHtoDAsync_v2, (void *)(uintptr_t)dst, src, bytes, (cudaStream_t)s));
}

static CUresult f_cuEventRecord(CUevent e, CUstream s)
{
    return cu(record_as(FAKE_cuEventRecord, (cudaEvent_t)e, (cudaStream_t)s));
}

static CUresult f_cuEventSynchronize(CUevent e)
{
    return cu(event_sync_as(FAKE_cuEventSynchronize, (cudaEvent_t)e));
}

static CUresult f_cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data)
{
    return cu(launch_host_as(FAKE_cuLaunchHostFunc, (cudaStream_t)s, fn, data));
}

static const struct us_real_driver driver_table = {
#define US_REAL_DRV(name, params, args) .name = f_##name,
#include "real_driver.def"
#undef US_REAL_DRV
};

void fake_cuda_use_driver(void)
{
    us_real_driver_install(&driver_table);
}

static cudaError_t f_cudaGetDevice(int *device)
{
    cudaError_t err = note(FAKE_cudaGetDevice, NULL, NULL, NULL, NULL, 0);
    if (err == cudaSuccess)
        *device = current_device;
    return err;
}

static cudaError_t f_cudaSetDevice(int device)
{
    cudaError_t err = note(FAKE_cudaSetDevice, NULL, NULL, NULL, NULL, 0);
    if (err == cudaSuccess && (device < 0 || device >= fake_cuda.devices))
        err = cudaErrorInvalidDevice;
    if (err == cudaSuccess)
        current_device = device;
    return err;
}

static const char *f_cudaGetErrorName(cudaError_t err)
{
    return err == cudaSuccess ? "cudaSuccess" : "cudaErrorFake";
}

static struct us_real_api table;

void fake_cuda_reset(void)
{
    us_grower_wait_idle(); /* a request of the last test still worked: not into this one's state */
    /* the shim's modules are reset after this: nothing uses the old pinned
     * memory any more */
    for (unsigned i = 0; i < nhost_allocs; i++)
        free(host_allocs[i]);
    nhost_allocs = 0;
    memset(&fake_cuda, 0, sizeof fake_cuda);
    fake_cuda.devices = 2;
    memset(streams, 0, sizeof streams);
    memset(events, 0, sizeof events);
    memset(fns, 0, sizeof fns);
    nstreams = nevents = 0;
    not_relaxed = 0;
    current_device = 0;
    capture_mode = cudaStreamCaptureModeGlobal;
    memset(&table, 0, sizeof table);
#define US_REAL(ret, name, params, args, rewrite) FAKE_CUDA_IF_REWRITE_##rewrite(table.name = f_##name;)
#include "real_api.def"
#undef US_REAL
    table.cudaGetErrorName = f_cudaGetErrorName;
    us_real_install(&table);
}

void fake_cuda_fail(enum fake_cuda_fn fn, unsigned nth, unsigned count, cudaError_t err)
{
    fns[fn].fail_from = nth == 0 ? 0 : fns[fn].calls + nth;
    fns[fn].fail_count = count;
    fns[fn].err = err;
}

unsigned fake_cuda_count(enum fake_cuda_fn fn)
{
    return fns[fn].calls;
}

unsigned fake_cuda_host_waits(void)
{
    return fns[FAKE_cudaEventSynchronize].calls + fns[FAKE_cudaStreamSynchronize].calls;
}

int fake_cuda_find(enum fake_cuda_fn fn, unsigned nth)
{
    for (size_t i = 0; i < fake_cuda.ncalls; i++)
        if (fake_cuda.calls[i].fn == fn && nth-- == 0)
            return (int)i;
    return -1;
}

/* --- helpers for the shim's pipeline tests ------------------------------------ */

void fake_cuda_config(size_t chunk_bytes, unsigned slots, size_t pinned_max)
{
    struct us_config cfg;
    us_config_load(&cfg, NULL, NULL, NULL, NULL);
    cfg.chunk_bytes = chunk_bytes;
    cfg.slots = slots;
    cfg.pinned_max = pinned_max;
    cfg.peer_min_bytes = cfg.h2d_min_bytes = cfg.d2h_min_bytes = 0;
    cfg.h2d_idle_native_bytes = cfg.peer_idle_native_bytes = 0; /* the pipelines always: tests of it set them */
    cfg.copy_threads = 1;
    cfg.spill_warm = 0; /* no warming thread between the tests' resets: test_spill checks it */
    cfg.log_level = US_LOG_DEBUG;
    us_config_set(&cfg);
}

#define FAKE_LOG_LINES 256
static char log_lines[FAKE_LOG_LINES][256];
static unsigned log_count;

static void log_sink(enum us_log_level level, const char *line, void *arg)
{
    (void)level;
    (void)arg;
    pthread_mutex_lock(&fake_mu); /* the grower thread logs too */
    if (log_count < FAKE_LOG_LINES) {
        strncpy(log_lines[log_count], line, sizeof log_lines[0] - 1);
        log_lines[log_count][sizeof log_lines[0] - 1] = '\0';
        log_count++;
    }
    pthread_mutex_unlock(&fake_mu);
}

void fake_cuda_log_capture(void)
{
    log_count = 0;
    us_log_set_sink(log_sink, NULL);
}

unsigned fake_cuda_log_count(const char *text)
{
    unsigned n = 0;
    pthread_mutex_lock(&fake_mu);
    for (unsigned i = 0; i < log_count; i++)
        n += strstr(log_lines[i], text) != NULL;
    pthread_mutex_unlock(&fake_mu);
    return n;
}

void fake_cuda_copy(struct us_copy *c, int api, void *dst, int dst_device, const void *src, int src_device,
                    size_t bytes, cudaStream_t stream)
{
    memset(c, 0, sizeof *c);
    c->api = (enum us_copy_api)api;
    c->dst = dst;
    c->src = src;
    c->bytes = bytes;
    c->kind = cudaMemcpyDefault;
    c->stream = stream;
    c->peer_dst_device = api == US_API_MEMCPY_PEER || api == US_API_MEMCPY_PEER_ASYNC ? dst_device : -1;
    c->peer_src_device = api == US_API_MEMCPY_PEER || api == US_API_MEMCPY_PEER_ASYNC ? src_device : -1;
    c->dst_mem = (struct us_mem){.kind = dst_device >= 0 ? US_MEM_DEVICE : US_MEM_PAGEABLE, .device = dst_device};
    c->src_mem = (struct us_mem){.kind = src_device >= 0 ? US_MEM_DEVICE : US_MEM_PAGEABLE, .device = src_device};
    if (src_device >= 0 && dst_device >= 0)
        c->path = src_device != dst_device ? US_PATH_D2D_STAGED : US_PATH_D2D_SAME;
    else
        c->path = src_device >= 0 ? US_PATH_D2H_PAGEABLE : US_PATH_H2D_PAGEABLE;
    c->stream_kind = US_STREAM_USER;
}

static unsigned char pattern(size_t i, unsigned seed)
{
    uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u + 17;
    return (unsigned char)(x >> 13 ^ x);
}

void fake_cuda_fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(i, seed);
}

bool fake_cuda_check(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern(i, seed))
            return false;
    return true;
}

void fake_cuda_begin(size_t chunk_bytes, unsigned slots, size_t pinned_max)
{
    fake_cuda_reset();
    fake_cuda_config(chunk_bytes, slots, pinned_max);
    us_staging_reset();
    fake_cuda_log_capture();
}

void fake_cuda_warm_pool(unsigned n, size_t slot_bytes)
{
    struct us_slot *held[US_STAGING_MAX_CLAIM];
    unsigned got = 0;
    /* a copy of 8 slots grows the pool by one slot; held ones are not free */
    while (got < n && got < US_STAGING_MAX_CLAIM &&
           us_staging_claim(1, slot_bytes * US_STAGING_GROW_DIVISOR, held + got) == 1)
        got++;
    us_staging_release(held, got, NULL);
}

void fake_cuda_begin_warm(size_t chunk_bytes, unsigned slots, size_t pinned_max, unsigned nslots)
{
    fake_cuda_begin(chunk_bytes, slots, pinned_max);
    fake_cuda_warm_pool(nslots, chunk_bytes);
    memset(fns, 0, sizeof fns); /* the calls the test makes count from here */
    fake_cuda.ncalls = 0;
    fake_cuda.host_alloc_bytes = 0;
}

int fake_cuda_teardown(void **state)
{
    (void)state;
    us_log_set_sink(NULL, NULL);
    return 0;
}

bool fake_cuda_copy_checked(bool (*pipeline)(const struct us_copy *, const struct us_ctx *, cudaError_t *), int api, size_t bytes,
                            cudaStream_t stream, int src_device, int dst_device, cudaError_t *result)
{
    unsigned char *src = malloc(bytes + 16), *dst = calloc(1, bytes + 16);
    fake_cuda_fill(src + 3, bytes, (unsigned)bytes);
    struct us_copy c;
    fake_cuda_copy(&c, api, dst + 5, dst_device, src + 3, src_device, bytes, stream);
    bool done = pipeline(&c, us_context_this(), result); /* the current device's primary context */
    if (done && *result == cudaSuccess) {
        assert_true(fake_cuda_check(dst + 5, bytes, (unsigned)bytes));
        assert_true(fake_cuda_check(src + 3, bytes, (unsigned)bytes)); /* the source is only read */
        for (size_t i = 0; i < 5; i++)
            assert_int_equal(dst[i], 0);
        for (size_t i = bytes + 5; i < bytes + 16; i++)
            assert_int_equal(dst[i], 0);
    }
    free(src);
    free(dst);
    return done;
}
