/* apicost.c - what the building blocks of a rewritten or observed copy cost
 * on this machine: each runtime call the shim makes around a copy, the clock
 * it reads, and the unwinders a finding's call site can be captured with.
 * Each row: `reps` calls in a loop between two clock reads (the clock's own
 * cost amortized), best of 5 rounds, in nanoseconds a call.
 *
 * Run it natively to learn the machine, and under the shim
 * (LD_PRELOAD=libunstall.so) to see what the shim adds to the calls it wraps
 * (cudaStreamSynchronize, cudaEventSynchronize, the copies).
 *
 * Usage: apicost [REPS]      (default 20000)
 * Output: APICOST name=<what> ns=<per call> */
#define BENCH_NAME "apicost"
#include "bench_cuda.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned reps = 20000;
static double best;

#define ROW(name, body)                                                      \
    do {                                                                     \
        best = 1e30;                                                         \
        for (int round_ = 0; round_ < 5; round_++) {                         \
            double t0_ = bench_now_ns();                                     \
            for (unsigned i_ = 0; i_ < reps; i_++) {                         \
                body;                                                        \
            }                                                                \
            double per_ = (bench_now_ns() - t0_) / reps;                     \
            if (per_ < best)                                                 \
                best = per_;                                                 \
        }                                                                    \
        printf("APICOST name=%s ns=%.0f\n", name, best);                     \
        fflush(stdout);                                                      \
    } while (0)

typedef int (*unw_backtrace_fn)(void **, int);

/* a few frames deep, as a finding's capture is */
__attribute__((noinline)) static int depth3(int (*fn)(void **, int), void **buf, int n) { return fn(buf, n); }
__attribute__((noinline)) static int depth2(int (*fn)(void **, int), void **buf, int n) { return depth3(fn, buf, n) + 0 * __LINE__; }
__attribute__((noinline)) static int depth1(int (*fn)(void **, int), void **buf, int n) { return depth2(fn, buf, n) + 0 * __LINE__; }

/* The two shapes the copy rows take: a copy then a stream synchronize (what a
 * program's cudaMemcpyAsync + cudaStreamSynchronize does), and a copy then an
 * event recorded behind it and waited for (the D2H rewrite's own steps). */
static void copy_stream_sync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
    cudaMemcpyAsync(dst, src, n, kind, s);
    cudaStreamSynchronize(s);
}

static void copy_event_sync(void *dst, const void *src, size_t n, cudaStream_t s, cudaEvent_t e)
{
    cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s);
    cudaEventRecord(e, s);
    cudaEventSynchronize(e);
}

/* A staged cross-GPU copy (two devices; this program never enables peer
 * access) of 256 KiB on a blocking stream, then a synchronize: alone, and
 * after the idle checks a staged copy sent native makes (the legacy
 * stream's query; and the stream's own too), so that the differences are
 * the checks' cost where the stream's last work was such a copy. Nothing
 * with one device. */
static void peer_rows(cudaStream_t bs)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2)
        return;
    void *src, *dst;
    size_t bytes = 256u << 10;
    CHECK(cudaMalloc(&src, bytes));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&dst, bytes));
    CHECK(cudaSetDevice(0));
    unsigned saved = reps;
    reps = saved / 100 > 0 ? saved / 100 : 1;
    ROW("blocking_peer_staged_256KiB_sync", {
        cudaMemcpyPeerAsync(dst, 1, src, 0, bytes, bs);
        cudaStreamSynchronize(bs);
    });
    ROW("blocking_peer_staged_256KiB_query_legacy_sync", {
        cudaStreamQuery(cudaStreamLegacy);
        cudaMemcpyPeerAsync(dst, 1, src, 0, bytes, bs);
        cudaStreamSynchronize(bs);
    });
    ROW("blocking_peer_staged_256KiB_query_both_sync", {
        cudaStreamQuery(bs);
        cudaStreamQuery(cudaStreamLegacy);
        cudaMemcpyPeerAsync(dst, 1, src, 0, bytes, bs);
        cudaStreamSynchronize(bs);
    });
    reps = saved;
    CHECK(cudaFree(src));
    CHECK(cudaSetDevice(1));
    CHECK(cudaFree(dst));
    CHECK(cudaSetDevice(0));
}

/* A staged cross-GPU copy's pipeline (shim/fix/pipeline_peer.c) issues, per
 * chunk: the D2H stream waits for the H2D stream's event that frees the
 * ring slot, the D2H into the slot, an event, the H2D stream waits for it,
 * the H2D, an event (6 calls, two of them waits on another device's event).
 * The same calls with 64 KiB chunks: with both streams idle, and behind a
 * 256 MiB copy on each, whose events are still pending when waited on, as a
 * 256 MiB copy's are. Nothing with one device. */
/* One device's side of that pipeline: its copy's memory, its stream, its events. */
struct peer_side {
    void *chunk, *big;
    cudaStream_t stream;
    cudaEvent_t events[4];
};

static void peer_side_make(struct peer_side *side, int device, size_t chunk, size_t big)
{
    CHECK(cudaSetDevice(device));
    CHECK(cudaMalloc(&side->chunk, chunk));
    CHECK(cudaMalloc(&side->big, big));
    CHECK(cudaStreamCreateWithFlags(&side->stream, cudaStreamNonBlocking));
    for (int k = 0; k < 4; k++)
        CHECK(cudaEventCreateWithFlags(&side->events[k], cudaEventDisableTiming));
}

static void peer_side_free(struct peer_side *side, int device)
{
    CHECK(cudaSetDevice(device));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaStreamDestroy(side->stream));
    for (int k = 0; k < 4; k++)
        CHECK(cudaEventDestroy(side->events[k]));
    CHECK(cudaFree(side->chunk));
    CHECK(cudaFree(side->big));
}

static void peer_chunk_rows(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2)
        return;
    size_t chunk = 64u << 10, big = 256u << 20;
    struct peer_side src, dst; /* src: the D2H stream and its filled events; dst: the H2D's, freed */
    peer_side_make(&dst, 1, chunk, big);
    peer_side_make(&src, 0, chunk, big);
    void *ring;
    CHECK(cudaHostAlloc(&ring, big, cudaHostAllocPortable));
    unsigned saved = reps;
    reps = saved / 100 > 0 ? saved / 100 : 1;
#define PEER_CHUNK(k)                                                                   \
    do {                                                                                \
        cudaStreamWaitEvent(src.stream, dst.events[k], 0);                              \
        cudaMemcpyAsync(ring, src.chunk, chunk, cudaMemcpyDeviceToHost, src.stream);    \
        cudaEventRecord(src.events[k], src.stream);                                     \
        cudaStreamWaitEvent(dst.stream, src.events[k], 0);                              \
        cudaMemcpyAsync(dst.chunk, ring, chunk, cudaMemcpyHostToDevice, dst.stream);    \
        cudaEventRecord(dst.events[k], dst.stream);                                     \
    } while (0)
#define BEHIND_BIG_COPIES                                                               \
    if (i_ == 0) {                                                                      \
        cudaMemcpyAsync(ring, src.big, big, cudaMemcpyDeviceToHost, src.stream);        \
        cudaMemcpyAsync(dst.big, ring, big, cudaMemcpyHostToDevice, dst.stream);        \
    }
    ROW("peer_chunk_6_calls_idle", {
        PEER_CHUNK(i_ % 4);
        if (i_ % 64 == 63)
            cudaDeviceSynchronize();
    });
    ROW("peer_chunk_6_calls_pending", {
        BEHIND_BIG_COPIES;
        PEER_CHUNK(i_ % 4);
    });
    ROW("cudaStreamWaitEvent_other_device_pending", {
        BEHIND_BIG_COPIES;
        cudaEventRecord(src.events[i_ % 4], src.stream);
        cudaStreamWaitEvent(dst.stream, src.events[i_ % 4], 0);
    });
    ROW("cudaEventRecord_pending", {
        BEHIND_BIG_COPIES;
        cudaEventRecord(src.events[i_ % 4], src.stream);
    });
    ROW("cudaStreamQuery_other_device_pending", {
        BEHIND_BIG_COPIES;
        cudaStreamQuery(dst.stream);
    });
#undef PEER_CHUNK
#undef BEHIND_BIG_COPIES
    reps = saved;
    peer_side_free(&src, 0);
    peer_side_free(&dst, 1);
    CHECK(cudaSetDevice(0));
    CHECK(cudaFreeHost(ring));
}

int main(int argc, char **argv)
{
    if (argc > 1 && atoi(argv[1]) > 0)
        reps = (unsigned)atoi(argv[1]);
    void *dev;
    CHECK(cudaMalloc(&dev, 1 << 20));
    char *host = malloc(1 << 20);
    memset(host, 0, 1 << 20);
    void *pinned;
    CHECK(cudaMallocHost(&pinned, 1 << 20));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e;
    CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CHECK(cudaEventRecord(e, s));
    CHECK(cudaStreamSynchronize(s));
    int d;
    struct timespec ts;
    struct cudaPointerAttributes attr;
    enum cudaStreamCaptureStatus cap;
    enum cudaStreamCaptureMode mode;

    ROW("clock_gettime_monotonic", clock_gettime(CLOCK_MONOTONIC, &ts));
    ROW("cudaGetDevice", cudaGetDevice(&d));
    ROW("cudaStreamGetDevice", cudaStreamGetDevice(s, &d));
    ROW("cudaStreamIsCapturing", cudaStreamIsCapturing(s, &cap));
    ROW("cudaThreadExchangeStreamCaptureMode_x2", {
        mode = cudaStreamCaptureModeRelaxed;
        cudaThreadExchangeStreamCaptureMode(&mode);
        cudaThreadExchangeStreamCaptureMode(&mode);
    });
    ROW("cudaPointerGetAttributes_pageable", cudaPointerGetAttributes(&attr, host + 64));
    ROW("cudaPointerGetAttributes_device", cudaPointerGetAttributes(&attr, dev));
    ROW("cudaPointerGetAttributes_pinned", cudaPointerGetAttributes(&attr, pinned));
    ROW("cudaEventRecord_idle", cudaEventRecord(e, s));
    CHECK(cudaStreamSynchronize(s));
    ROW("cudaEventQuery_done", cudaEventQuery(e));
    ROW("cudaEventSynchronize_done", cudaEventSynchronize(e));
    ROW("cudaStreamQuery_idle", cudaStreamQuery(s));
    ROW("cudaStreamSynchronize_idle", cudaStreamSynchronize(s));
    ROW("cudaMemcpyAsync_pinned_d2h_4B_sync", copy_stream_sync(pinned, dev, 4, cudaMemcpyDeviceToHost, s));
    ROW("cudaMemcpyAsync_pinned_d2h_4B_event_sync", copy_event_sync(pinned, dev, 4, s, e));
    ROW("cudaMemcpyAsync_pageable_d2h_4B_sync", copy_stream_sync(host, dev, 4, cudaMemcpyDeviceToHost, s));
    ROW("cudaMemcpyAsync_pageable_h2d_4B_sync", copy_stream_sync(dev, host, 4, cudaMemcpyHostToDevice, s));
    /* the pageable D2H rewrite's own steps on the legacy stream and on a
     * blocking stream (what cudaMemcpy and smallcopy's d2h_async take) */
    cudaStream_t bs;
    CHECK(cudaStreamCreate(&bs));
    /* what an idle check costs: a blocking stream's query, and the legacy
     * stream's, which answers for every blocking stream (pipeline_common.c) */
    ROW("cudaStreamQuery_blocking_idle", cudaStreamQuery(bs));
    ROW("cudaStreamQuery_legacy_idle", cudaStreamQuery(cudaStreamLegacy));
    ROW("cudaStreamIsCapturing_legacy", cudaStreamIsCapturing(cudaStreamLegacy, &cap));
    peer_rows(bs);
    peer_chunk_rows();
    ROW("cudaMemcpy_pinned_d2h_4B", cudaMemcpy(pinned, dev, 4, cudaMemcpyDeviceToHost));
    ROW("legacy_pinned_d2h_4B_event_sync", copy_event_sync(pinned, dev, 4, 0, e));
    ROW("legacy_pinned_d2h_4B_stream_sync", copy_stream_sync(pinned, dev, 4, cudaMemcpyDeviceToHost, 0));
    ROW("blocking_pinned_d2h_4B_event_sync", copy_event_sync(pinned, dev, 4, bs, e));
    ROW("blocking_pageable_d2h_4B_sync", copy_stream_sync(host, dev, 4, cudaMemcpyDeviceToHost, bs));
    ROW("legacy_pinned_d2h_4KiB_event_sync_memcpy", {
        copy_event_sync(pinned, dev, 4096, 0, e);
        memcpy(host, pinned, 4096);
    });
    ROW("cudaMemcpy_pageable_d2h_4KiB", cudaMemcpy(host, dev, 4096, cudaMemcpyDeviceToHost));
    CHECK(cudaStreamDestroy(bs));
    ROW("cudaMemcpy_pageable_h2d_4B", cudaMemcpy(dev, host, 4, cudaMemcpyHostToDevice));
    ROW("cudaMemcpy_pageable_d2h_4B", cudaMemcpy(host, dev, 4, cudaMemcpyDeviceToHost));

    void *buf[32];
    unsigned saved = reps;
    reps = saved / 10 > 0 ? saved / 10 : 1;
    ROW("backtrace_depth16", depth1(backtrace, buf, 16));
    void *lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    unw_backtrace_fn unw = lib != NULL ? (unw_backtrace_fn)dlsym(lib, "unw_backtrace") : NULL;
    if (unw != NULL)
        ROW("unw_backtrace_depth16", depth1(unw, buf, 16));
    else
        printf("APICOST name=unw_backtrace_depth16(libunwind.so.8_absent) ns=-\n");
    Dl_info info;
    ROW("dladdr", dladdr((void *)main, &info));
    reps = saved;

    CHECK(cudaStreamDestroy(s));
    CHECK(cudaEventDestroy(e));
    CHECK(cudaFreeHost(pinned));
    CHECK(cudaFree(dev));
    free(host);
    return 0;
}
