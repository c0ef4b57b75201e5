/* rules_prog.c - one situation per run, for the detection tests
 * (tests/detect/check.py): for every rule of shim/base/rules.def that the
 * shim detects, a situation that should fire it and its clean twin that must
 * not (pinned memory, non-blocking streams, peer access enabled), plus a few
 * edge cases (check.py says which it expects to fail today, and why).
 * Usage: rules_prog SITUATION | rules_prog list
 *
 * Runs on the simulated runtime (tests/fakecuda, 2 devices): a kernel is a
 * host function `void (*)(void **args)` given to cudaLaunchKernel. Every
 * situation checks the bytes it copies and prints "rules_prog SITUATION: ok";
 * any CUDA error or wrong byte exits 1 with a line on stderr.
 *
 * Conventions that keep the twins free of every finding, not only of their
 * rule: streams are waited for by polling cudaStreamQuery/cudaEventQuery
 * (cudaStreamSynchronize and friends are explicit_sync), nothing is freed
 * (cudaFree is device_alloc_sync, cudaFreeHost/cudaHostUnregister are
 * pinned_alloc_sync), helper copies use pinned memory on non-blocking streams.
 * The calls that should fire are made directly from the situation functions,
 * which are exported (the program is linked -rdynamic), so that the report's
 * call site names them: rules_prog!fire_<rule>.
 *
 * Sizes, which check.py knows too: BIG is above every size threshold of the
 * shim's defaults (h2d_min_bytes 2m, peer_min_bytes 256k), SMALL_H2D below
 * h2d_min_bytes, SMALL_PEER below peer_min_bytes, TINY_D2H 4 bytes (every
 * pageable D2H is rewritten: d2h_min_bytes 0). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakecuda.h"

#define BIG ((size_t)4 << 20)
#define SMALL_H2D ((size_t)4 << 10)
#define SMALL_PEER ((size_t)64 << 10)
#define TINY_D2H ((size_t)4)

static const char *situation = "?";

/* --- helpers (never the call that should fire) ----------------------------------------- */

static void ck(cudaError_t err, const char *what, int line)
{
    if (err == cudaSuccess)
        return;
    fprintf(stderr, "rules_prog %s: line %d: %s: %s (%d)\n", situation, line, what, cudaGetErrorName(err), (int)err);
    exit(1);
}
#define CK(call) ck((call), #call, __LINE__)

static void fail(const char *what)
{
    fprintf(stderr, "rules_prog %s: %s\n", situation, what);
    exit(1);
}

static void pause_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Waits for a stream by polling: not an explicit_sync finding. */
static void wait_stream(cudaStream_t s)
{
    for (int i = 0; i < 200000; i++) { /* 10 s at most */
        cudaError_t err = cudaStreamQuery(s);
        if (err == cudaSuccess)
            return;
        if (err != cudaErrorNotReady)
            CK(err);
        pause_us(50);
    }
    fail("stream never drained");
}

static void wait_event(cudaEvent_t e)
{
    for (int i = 0; i < 200000; i++) {
        cudaError_t err = cudaEventQuery(e);
        if (err == cudaSuccess)
            return;
        if (err != cudaErrorNotReady)
            CK(err);
        pause_us(50);
    }
    fail("event never completed");
}

static void pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 131 + seed * 17 + (i >> 12));
}

static void expect_pattern(const unsigned char *p, size_t n, unsigned seed, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char want = (unsigned char)(i * 131 + seed * 17 + (i >> 12));
        if (p[i] != want) {
            fprintf(stderr, "rules_prog %s: %s: byte %zu of %zu is 0x%02x, expected 0x%02x\n", situation, what, i, n,
                    p[i], want);
            exit(1);
        }
    }
}

static void expect_value(const unsigned char *p, size_t n, int value, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != (unsigned char)value) {
            fprintf(stderr, "rules_prog %s: %s: byte %zu of %zu is 0x%02x, expected 0x%02x\n", situation, what, i, n,
                    p[i], (unsigned char)value);
            exit(1);
        }
    }
}

static cudaStream_t nb_stream(void)
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}

static void *dev_alloc(size_t n)
{
    void *p = NULL;
    CK(cudaMalloc(&p, n));
    return p;
}

static unsigned char *pinned_alloc(size_t n)
{
    void *p = NULL;
    CK(cudaMallocHost(&p, n));
    return p;
}

static unsigned char *pageable_alloc(size_t n)
{
    unsigned char *p = malloc(n);
    if (p == NULL)
        fail("out of memory");
    memset(p, 0, n);
    return p;
}

/* Puts pattern `seed` into device memory: pinned source, stream s. */
static void upload(void *dev, size_t n, unsigned seed, cudaStream_t s)
{
    unsigned char *src = pinned_alloc(n);
    pattern(src, n, seed);
    CK(cudaMemcpyAsync(dev, src, n, cudaMemcpyHostToDevice, s));
    wait_stream(s);
}

/* Copies device memory back (pinned, stream s, after what s holds) and
 * returns it. */
static unsigned char *download(const void *dev, size_t n, cudaStream_t s)
{
    unsigned char *dst = pinned_alloc(n);
    memset(dst, 0, n);
    CK(cudaMemcpyAsync(dst, dev, n, cudaMemcpyDeviceToHost, s));
    wait_stream(s);
    return dst;
}

/* The kernel: fill_kernel(unsigned char *p, size_t n, unsigned seed, double us)
 * spends `us` simulated microseconds, then writes pattern `seed`. */
static void fill_kernel(void **args)
{
    unsigned char *p = *(unsigned char **)args[0];
    size_t n = *(size_t *)args[1];
    unsigned seed = *(unsigned *)args[2];
    fakecuda_sleep_us(*(double *)args[3]);
    pattern(p, n, seed);
}

static void register_kernels(void)
{
    size_t sizes[] = {sizeof(unsigned char *), sizeof(size_t), sizeof(unsigned), sizeof(double)};
    if (fakecuda_register_kernel((const void *)fill_kernel, 4, sizes) != 0)
        fail("cannot register the kernel");
}

/* Launches fill_kernel from a helper frame (for situations where the launch is
 * not the call under test). */
static void launch_fill(void *dev, size_t n, unsigned seed, double us, cudaStream_t s)
{
    void *args[] = {&dev, &n, &seed, &us};
    dim3 one = {1, 1, 1};
    CK(cudaLaunchKernel((const void *)fill_kernel, one, one, args, 0, s));
}

static void need_two_devices(void)
{
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    if (n < 2)
        fail("needs 2 devices (FAKECUDA_DEVICES=2)");
}

/* --- the situations ------------------------------------------------------------------ */
/* Exported (not static) so that call sites name them; each has a prototype
 * here to keep -Wmissing-prototypes quiet should it be turned on. */
#define SITUATION(name) void name(void); void name(void)

/* pageable_h2d: a pageable source above h2d_min_bytes behind a kernel, case
 * B's stall (the process's first: fixed through the slots the first
 * cudaMalloc pinned, docs/pipelines.md; on an idle stream a copy of up to
 * h2d_idle_native_bytes goes native), and one below it (native: observed),
 * the second with cudaMemcpyDefault (the path comes from the pointers, not
 * from kind). */
SITUATION(fire_pageable_h2d)
{
    cudaStream_t s = nb_stream();
    unsigned char *host = pageable_alloc(BIG);
    pattern(host, BIG, 1);
    void *dev = dev_alloc(BIG), *dev_small = dev_alloc(SMALL_H2D), *busy = dev_alloc(SMALL_H2D);
    launch_fill(busy, SMALL_H2D, 0, 2000, s);
    CK(cudaMemcpyAsync(dev, host, BIG, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(dev_small, host, SMALL_H2D, cudaMemcpyDefault, s));
    expect_pattern(download(dev, BIG, s), BIG, 1, "pageable H2D");
    expect_pattern(download(dev_small, SMALL_H2D, s), SMALL_H2D, 1, "small pageable H2D");
    free(host);
}

/* twin: the same copies from pinned (cudaMallocHost) and registered
 * (cudaHostRegister) memory */
SITUATION(clean_pageable_h2d)
{
    cudaStream_t s = nb_stream();
    unsigned char *pinned = pinned_alloc(BIG), *registered = pageable_alloc(BIG);
    CK(cudaHostRegister(registered, BIG, cudaHostRegisterDefault));
    pattern(pinned, BIG, 1);
    pattern(registered, BIG, 2);
    void *dev = dev_alloc(BIG), *dev_small = dev_alloc(SMALL_H2D), *dev_reg = dev_alloc(BIG);
    CK(cudaMemcpyAsync(dev, pinned, BIG, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(dev_small, pinned, SMALL_H2D, cudaMemcpyDefault, s));
    CK(cudaMemcpyAsync(dev_reg, registered, BIG, cudaMemcpyHostToDevice, s));
    expect_pattern(download(dev, BIG, s), BIG, 1, "pinned H2D");
    expect_pattern(download(dev_small, SMALL_H2D, s), SMALL_H2D, 1, "small pinned H2D");
    expect_pattern(download(dev_reg, BIG, s), BIG, 2, "registered H2D");
}

/* pageable_d2h: into pageable memory, 1 MiB and 4 bytes (both rewritten:
 * the first, the process's first D2H, behind the kernel that fills its
 * source, pins a slot inside the call; on an idle stream it would go native
 * while the pool grows) */
SITUATION(fire_pageable_d2h)
{
    cudaStream_t s = nb_stream();
    void *dev = dev_alloc(BIG);
    launch_fill(dev, BIG, 3, 2000, s);
    unsigned char *host = pageable_alloc(BIG), *tiny = pageable_alloc(TINY_D2H);
    CK(cudaMemcpyAsync(host, dev, BIG, cudaMemcpyDeviceToHost, s));
    CK(cudaMemcpyAsync(tiny, dev, TINY_D2H, cudaMemcpyDefault, s));
    wait_stream(s);
    expect_pattern(host, BIG, 3, "pageable D2H");
    expect_pattern(tiny, TINY_D2H, 3, "4-byte pageable D2H");
    free(host);
    free(tiny);
}

/* twin: into pinned and registered memory */
SITUATION(clean_pageable_d2h)
{
    cudaStream_t s = nb_stream();
    void *dev = dev_alloc(BIG);
    upload(dev, BIG, 3, s);
    unsigned char *pinned = pinned_alloc(BIG), *tiny = pinned_alloc(TINY_D2H), *registered = pageable_alloc(BIG);
    CK(cudaHostRegister(registered, BIG, cudaHostRegisterDefault));
    CK(cudaMemcpyAsync(pinned, dev, BIG, cudaMemcpyDeviceToHost, s));
    CK(cudaMemcpyAsync(tiny, dev, TINY_D2H, cudaMemcpyDefault, s));
    CK(cudaMemcpyAsync(registered, dev, BIG, cudaMemcpyDeviceToHost, s));
    wait_stream(s);
    expect_pattern(pinned, BIG, 3, "pinned D2H");
    expect_pattern(tiny, TINY_D2H, 3, "4-byte pinned D2H");
    expect_pattern(registered, BIG, 3, "registered D2H");
}

/* sync_memcpy: cudaMemcpy of pinned memory, both ways; the data is there
 * when the call returns (no wait) */
SITUATION(fire_sync_memcpy)
{
    unsigned char *src = pinned_alloc(BIG), *back = pinned_alloc(BIG);
    pattern(src, BIG, 4);
    void *dev = dev_alloc(BIG);
    CK(cudaMemcpy(dev, src, BIG, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(back, dev, BIG, cudaMemcpyDefault));
    expect_pattern(back, BIG, 4, "cudaMemcpy pinned round trip");
}

/* twin: cudaMemcpyAsync on a non-blocking stream, waited for by polling
 * cudaStreamQuery (cudaStreamSynchronize would be explicit_sync) */
SITUATION(clean_sync_memcpy)
{
    cudaStream_t s = nb_stream();
    unsigned char *src = pinned_alloc(BIG), *back = pinned_alloc(BIG);
    pattern(src, BIG, 4);
    void *dev = dev_alloc(BIG);
    CK(cudaMemcpyAsync(dev, src, BIG, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(back, dev, BIG, cudaMemcpyDefault, s));
    wait_stream(s);
    expect_pattern(back, BIG, 4, "cudaMemcpyAsync pinned round trip");
}

/* sync_memcpy through cudaMemcpy2D (pinned memory both ways): 64 rows of
 * 4 KiB, pitch 8 KiB */
SITUATION(fire_sync_memcpy_2d)
{
    size_t width = 4096, pitch = 8192, height = 64;
    unsigned char *src = pinned_alloc(pitch * height), *back = pinned_alloc(pitch * height);
    pattern(src, pitch * height, 5);
    void *dev = dev_alloc(pitch * height);
    CK(cudaMemcpy2D(dev, pitch, src, pitch, width, height, cudaMemcpyHostToDevice));
    CK(cudaMemcpy2D(back, pitch, dev, pitch, width, height, cudaMemcpyDeviceToHost));
    unsigned char *want = pageable_alloc(pitch * height);
    pattern(want, pitch * height, 5);
    for (size_t r = 0; r < height; r++)
        if (memcmp(back + r * pitch, want + r * pitch, width) != 0)
            fail("cudaMemcpy2D round trip differs");
    free(want);
}

/* sync_memset: cudaMemset of device memory (legacy stream, no blocking
 * stream exists: only sync_memset); checked through a pinned copy queued
 * behind it on the legacy stream */
SITUATION(fire_sync_memset)
{
    void *dev = dev_alloc(BIG);
    CK(cudaMemset(dev, 0x5a, BIG));
    expect_value(download(dev, BIG, 0), BIG, 0x5a, "cudaMemset");
}

/* twin: cudaMemsetAsync on a non-blocking stream */
SITUATION(clean_sync_memset)
{
    cudaStream_t s = nb_stream();
    void *dev = dev_alloc(BIG);
    CK(cudaMemsetAsync(dev, 0x5a, BIG, s));
    expect_value(download(dev, BIG, s), BIG, 0x5a, "cudaMemsetAsync");
}

/* staged_peer: device 0 -> device 1 without peer access, by
 * cudaMemcpyPeerAsync (above peer_min_bytes: fixed) and by cudaMemcpyAsync
 * Default (below it: native) */
SITUATION(fire_staged_peer)
{
    need_two_devices();
    CK(cudaSetDevice(1));
    void *dev1 = dev_alloc(BIG), *dev1_small = dev_alloc(SMALL_PEER);
    CK(cudaSetDevice(0));
    void *dev0 = dev_alloc(BIG);
    cudaStream_t s = nb_stream();
    upload(dev0, BIG, 6, s);
    CK(cudaMemcpyPeerAsync(dev1, 1, dev0, 0, BIG, s));
    CK(cudaMemcpyAsync(dev1_small, dev0, SMALL_PEER, cudaMemcpyDefault, s));
    expect_pattern(download(dev1, BIG, s), BIG, 6, "staged peer copy");
    expect_pattern(download(dev1_small, SMALL_PEER, s), SMALL_PEER, 6, "small staged peer copy");
}

/* twin: peer access enabled both ways first */
SITUATION(clean_staged_peer)
{
    need_two_devices();
    int can01 = 0, can10 = 0;
    CK(cudaDeviceCanAccessPeer(&can01, 0, 1));
    CK(cudaDeviceCanAccessPeer(&can10, 1, 0));
    if (!can01 || !can10)
        fail("the simulated devices cannot access each other (FAKECUDA_PEER_MATRIX)");
    CK(cudaSetDevice(1));
    CK(cudaDeviceEnablePeerAccess(0, 0));
    void *dev1 = dev_alloc(BIG), *dev1_small = dev_alloc(SMALL_PEER);
    CK(cudaSetDevice(0));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    void *dev0 = dev_alloc(BIG);
    cudaStream_t s = nb_stream();
    upload(dev0, BIG, 6, s);
    CK(cudaMemcpyPeerAsync(dev1, 1, dev0, 0, BIG, s));
    CK(cudaMemcpyAsync(dev1_small, dev0, SMALL_PEER, cudaMemcpyDefault, s));
    expect_pattern(download(dev1, BIG, s), BIG, 6, "peer copy");
    expect_pattern(download(dev1_small, SMALL_PEER, s), SMALL_PEER, 6, "small peer copy");
}

/* The legacy-stream work of the situations below: a kernel launch, a
 * cudaMemsetAsync and two pinned cudaMemcpyAsync, all on stream 0, made
 * from the caller's frame by a macro. */
#define LEGACY_WORK(dev, dev2, out, out2)                                                             \
    do {                                                                                              \
        void *a0_ = (dev);                                                                            \
        size_t a1_ = BIG;                                                                             \
        unsigned a2_ = 7;                                                                             \
        double a3_ = 2000.0;                                                                          \
        void *args_[] = {&a0_, &a1_, &a2_, &a3_};                                                     \
        dim3 one_ = {1, 1, 1};                                                                        \
        CK(cudaLaunchKernel((const void *)fill_kernel, one_, one_, args_, 0, 0));                    \
        CK(cudaMemcpyAsync((out), (dev), BIG, cudaMemcpyDeviceToHost, 0));                           \
        CK(cudaMemsetAsync((dev2), 0x6b, BIG, 0));                                                    \
        CK(cudaMemcpyAsync((out2), (dev2), BIG, cudaMemcpyDeviceToHost, 0));                         \
        wait_stream(0);                                                                               \
        expect_pattern((out), BIG, 7, "kernel on the legacy stream");                               \
        expect_value((out2), BIG, 0x6b, "cudaMemsetAsync on the legacy stream");                     \
    } while (0)

/* legacy_stream: a blocking stream exists (created before any legacy use,
 * so not blocking_stream), then work on stream 0 */
SITUATION(fire_legacy_stream)
{
    cudaStream_t blocking;
    CK(cudaStreamCreate(&blocking));
    void *dev = dev_alloc(BIG), *dev2 = dev_alloc(BIG);
    unsigned char *out = pinned_alloc(BIG), *out2 = pinned_alloc(BIG);
    LEGACY_WORK(dev, dev2, out, out2);
}

/* twin: only non-blocking streams exist */
SITUATION(clean_legacy_stream)
{
    cudaStream_t s = nb_stream();
    (void)s;
    void *dev = dev_alloc(BIG), *dev2 = dev_alloc(BIG);
    unsigned char *out = pinned_alloc(BIG), *out2 = pinned_alloc(BIG);
    LEGACY_WORK(dev, dev2, out, out2);
}

/* twin, second form: a blocking stream existed but was destroyed before the
 * legacy work */
SITUATION(clean_legacy_stream_destroyed)
{
    cudaStream_t blocking;
    CK(cudaStreamCreate(&blocking));
    CK(cudaStreamDestroy(blocking));
    void *dev = dev_alloc(BIG), *dev2 = dev_alloc(BIG);
    unsigned char *out = pinned_alloc(BIG), *out2 = pinned_alloc(BIG);
    LEGACY_WORK(dev, dev2, out, out2);
}

/* legacy_stream through the synchronous cudaMemset: it runs on the legacy
 * stream (rules.def says so for sync_memset), like cudaMemcpy, which reports
 * both sync_memcpy and legacy_stream when a blocking stream exists */
SITUATION(fire_legacy_stream_memset)
{
    cudaStream_t blocking;
    CK(cudaStreamCreate(&blocking));
    void *dev = dev_alloc(BIG);
    CK(cudaMemset(dev, 0x3c, BIG));
    wait_stream(0);
    cudaStream_t s = nb_stream();
    expect_value(download(dev, BIG, s), BIG, 0x3c, "cudaMemset");
}

/* legacy_stream through the synchronous cudaMemcpy (pinned memory) while a
 * blocking stream exists: sync_memcpy and legacy_stream both fire (the
 * reference for legacy_stream.memset above) */
SITUATION(fire_legacy_stream_memcpy)
{
    cudaStream_t blocking;
    CK(cudaStreamCreate(&blocking));
    unsigned char *src = pinned_alloc(BIG);
    pattern(src, BIG, 19);
    void *dev = dev_alloc(BIG);
    CK(cudaMemcpy(dev, src, BIG, cudaMemcpyHostToDevice));
    cudaStream_t s = nb_stream();
    expect_pattern(download(dev, BIG, s), BIG, 19, "cudaMemcpy");
}

/* blocking_stream: the legacy stream is used (no blocking stream yet: no
 * finding), then two blocking streams are created; the first is used */
SITUATION(fire_blocking_stream)
{
    void *dev = dev_alloc(BIG);
    launch_fill(dev, BIG, 8, 1000.0, 0);
    wait_stream(0);
    cudaStream_t a, b;
    CK(cudaStreamCreate(&a));
    CK(cudaStreamCreateWithFlags(&b, cudaStreamDefault));
    (void)b;
    expect_pattern(download(dev, BIG, a), BIG, 8, "kernel on the legacy stream");
}

/* twin: the same with non-blocking streams */
SITUATION(clean_blocking_stream)
{
    void *dev = dev_alloc(BIG);
    launch_fill(dev, BIG, 8, 1000.0, 0);
    wait_stream(0);
    cudaStream_t a, b;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithPriority(&b, cudaStreamNonBlocking, 0));
    (void)b;
    expect_pattern(download(dev, BIG, a), BIG, 8, "kernel on the legacy stream");
}

/* blocking_stream on device 1 when device 1 is the only device whose legacy
 * stream the thread used (the reference for the next situation) */
SITUATION(fire_blocking_stream_device1)
{
    need_two_devices();
    CK(cudaSetDevice(1));
    void *dev1 = dev_alloc(BIG);
    launch_fill(dev1, BIG, 10, 500.0, 0);
    wait_stream(0);
    cudaStream_t a;
    CK(cudaStreamCreate(&a));
    expect_pattern(download(dev1, BIG, a), BIG, 10, "kernel on device 1's legacy stream");
}

/* blocking_stream on the second device a thread uses: legacy work on device
 * 0, then on device 1, then a blocking stream on device 1 */
SITUATION(fire_blocking_stream_second_device)
{
    need_two_devices();
    void *dev0 = dev_alloc(BIG);
    launch_fill(dev0, BIG, 9, 500.0, 0);
    wait_stream(0);
    CK(cudaSetDevice(1));
    void *dev1 = dev_alloc(BIG);
    launch_fill(dev1, BIG, 10, 500.0, 0);
    wait_stream(0);
    cudaStream_t a;
    CK(cudaStreamCreate(&a));
    expect_pattern(download(dev1, BIG, a), BIG, 10, "kernel on device 1's legacy stream");
    CK(cudaSetDevice(0));
    expect_pattern(download(dev0, BIG, nb_stream()), BIG, 9, "kernel on device 0's legacy stream");
}

/* blocking_stream after legacy use by the synchronous cudaMemset only (it
 * runs on the legacy stream): sync_memset, then blocking_stream */
SITUATION(fire_blocking_stream_after_memset)
{
    void *dev = dev_alloc(BIG);
    CK(cudaMemset(dev, 0x2d, BIG));
    wait_stream(0);
    cudaStream_t a;
    CK(cudaStreamCreate(&a));
    expect_value(download(dev, BIG, a), BIG, 0x2d, "cudaMemset");
}

/* device_alloc_sync: cudaFree of device memory while a kernel runs */
SITUATION(fire_device_alloc_sync)
{
    cudaStream_t s = nb_stream();
    void *dev = dev_alloc(BIG), *victim = dev_alloc(BIG);
    upload(victim, BIG, 11, s);
    expect_pattern(download(victim, BIG, s), BIG, 11, "before cudaFree");
    launch_fill(dev, BIG, 12, 2000.0, s);
    CK(cudaFree(victim));
    expect_pattern(download(dev, BIG, s), BIG, 12, "kernel around cudaFree");
}

/* twin: cudaFree(NULL) (the idiom that creates the context, not a finding),
 * the memory used and kept */
SITUATION(clean_device_alloc_sync)
{
    CK(cudaFree(NULL));
    cudaStream_t s = nb_stream();
    void *dev = dev_alloc(BIG), *kept = dev_alloc(BIG);
    upload(kept, BIG, 11, s);
    launch_fill(dev, BIG, 12, 2000.0, s);
    expect_pattern(download(kept, BIG, s), BIG, 11, "kept allocation");
    expect_pattern(download(dev, BIG, s), BIG, 12, "kernel");
}

/* pinned_alloc_sync: cudaFreeHost and cudaHostUnregister after use */
SITUATION(fire_pinned_alloc_sync)
{
    cudaStream_t s = nb_stream();
    void *dev = dev_alloc(BIG);
    unsigned char *pinned = pinned_alloc(BIG), *registered = pageable_alloc(BIG);
    CK(cudaHostRegister(registered, BIG, cudaHostRegisterDefault));
    pattern(pinned, BIG, 13);
    CK(cudaMemcpyAsync(dev, pinned, BIG, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(registered, dev, BIG, cudaMemcpyDeviceToHost, s));
    wait_stream(s);
    expect_pattern(registered, BIG, 13, "registered D2H");
    CK(cudaFreeHost(pinned));
    CK(cudaHostUnregister(registered));
    free(registered);
}

/* twin: the same allocations (cudaMallocHost, cudaHostAlloc,
 * cudaHostRegister) used and kept */
SITUATION(clean_pinned_alloc_sync)
{
    cudaStream_t s = nb_stream();
    void *dev = dev_alloc(BIG), *p2 = NULL;
    unsigned char *pinned = pinned_alloc(BIG), *registered = pageable_alloc(BIG);
    CK(cudaHostAlloc(&p2, BIG, cudaHostAllocDefault));
    CK(cudaHostRegister(registered, BIG, cudaHostRegisterDefault));
    pattern(pinned, BIG, 13);
    CK(cudaMemcpyAsync(dev, pinned, BIG, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(registered, dev, BIG, cudaMemcpyDeviceToHost, s));
    CK(cudaMemcpyAsync(p2, dev, BIG, cudaMemcpyDeviceToHost, s));
    wait_stream(s);
    expect_pattern(registered, BIG, 13, "registered D2H");
    expect_pattern(p2, BIG, 13, "cudaHostAlloc D2H");
}

/* explicit_sync: cudaStreamSynchronize, cudaEventSynchronize,
 * cudaDeviceSynchronize, each behind a kernel */
SITUATION(fire_explicit_sync)
{
    cudaStream_t s = nb_stream();
    void *dev = dev_alloc(BIG);
    unsigned char *out = pinned_alloc(BIG);
    cudaEvent_t e;
    CK(cudaEventCreate(&e));
    launch_fill(dev, BIG, 14, 2000.0, s);
    CK(cudaMemcpyAsync(out, dev, BIG, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    expect_pattern(out, BIG, 14, "after cudaStreamSynchronize");
    launch_fill(dev, BIG, 15, 2000.0, s);
    CK(cudaMemcpyAsync(out, dev, BIG, cudaMemcpyDeviceToHost, s));
    CK(cudaEventRecord(e, s));
    CK(cudaEventSynchronize(e));
    expect_pattern(out, BIG, 15, "after cudaEventSynchronize");
    launch_fill(dev, BIG, 16, 2000.0, s);
    CK(cudaMemcpyAsync(out, dev, BIG, cudaMemcpyDeviceToHost, s));
    CK(cudaDeviceSynchronize());
    expect_pattern(out, BIG, 16, "after cudaDeviceSynchronize");
}

/* twin: the same waits by polling cudaStreamQuery and cudaEventQuery */
SITUATION(clean_explicit_sync)
{
    cudaStream_t s = nb_stream();
    void *dev = dev_alloc(BIG);
    unsigned char *out = pinned_alloc(BIG);
    cudaEvent_t e;
    CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    launch_fill(dev, BIG, 14, 2000.0, s);
    CK(cudaMemcpyAsync(out, dev, BIG, cudaMemcpyDeviceToHost, s));
    wait_stream(s);
    expect_pattern(out, BIG, 14, "after polling cudaStreamQuery");
    launch_fill(dev, BIG, 15, 2000.0, s);
    CK(cudaMemcpyAsync(out, dev, BIG, cudaMemcpyDeviceToHost, s));
    CK(cudaEventRecord(e, s));
    wait_event(e);
    expect_pattern(out, BIG, 15, "after polling cudaEventQuery");
}

/* busy_engine_d2d is measured: a timed same-device copy that started late
 * behind the compute engine. This copy, in the primary context beside a
 * one-block 20 ms kernel of the same context on stream A, has SMs free and
 * runs at once: it must NOT fire it (check.py), nor anything of medium or
 * high severity. The firing side is the case_d scenario (check.py): the
 * first burst behind a kernel of its own context on every SM waits for the
 * kernel's end, and bursts in a created context wait a time slice each. */
SITUATION(fire_busy_engine_d2d)
{
    cudaStream_t a = nb_stream(), b = nb_stream();
    void *busy = dev_alloc(BIG), *src = dev_alloc(BIG), *dst = dev_alloc(BIG);
    upload(src, BIG, 17, b);
    launch_fill(busy, BIG, 18, 20000.0, a);
    CK(cudaMemcpyAsync(dst, src, BIG, cudaMemcpyDeviceToDevice, b));
    expect_pattern(download(dst, BIG, b), BIG, 17, "D2D beside a busy kernel");
    expect_pattern(download(busy, BIG, a), BIG, 18, "the busy kernel");
}

/* --- main ---------------------------------------------------------------------------- */

static const struct {
    const char *name;
    void (*fn)(void);
} situations[] = {
    {"pageable_h2d", fire_pageable_h2d},
    {"pageable_h2d.clean", clean_pageable_h2d},
    {"pageable_d2h", fire_pageable_d2h},
    {"pageable_d2h.clean", clean_pageable_d2h},
    {"sync_memcpy", fire_sync_memcpy},
    {"sync_memcpy.clean", clean_sync_memcpy},
    {"sync_memcpy.2d", fire_sync_memcpy_2d},
    {"sync_memset", fire_sync_memset},
    {"sync_memset.clean", clean_sync_memset},
    {"staged_peer", fire_staged_peer},
    {"staged_peer.clean", clean_staged_peer},
    {"legacy_stream", fire_legacy_stream},
    {"legacy_stream.clean", clean_legacy_stream},
    {"legacy_stream.clean_destroyed", clean_legacy_stream_destroyed},
    {"legacy_stream.memset", fire_legacy_stream_memset},
    {"legacy_stream.memcpy", fire_legacy_stream_memcpy},
    {"blocking_stream", fire_blocking_stream},
    {"blocking_stream.clean", clean_blocking_stream},
    {"blocking_stream.device1", fire_blocking_stream_device1},
    {"blocking_stream.second_device", fire_blocking_stream_second_device},
    {"blocking_stream.after_memset", fire_blocking_stream_after_memset},
    {"device_alloc_sync", fire_device_alloc_sync},
    {"device_alloc_sync.clean", clean_device_alloc_sync},
    {"pinned_alloc_sync", fire_pinned_alloc_sync},
    {"pinned_alloc_sync.clean", clean_pinned_alloc_sync},
    {"explicit_sync", fire_explicit_sync},
    {"explicit_sync.clean", clean_explicit_sync},
    {"busy_engine_d2d", fire_busy_engine_d2d},
};

int main(int argc, char **argv)
{
    size_t n = sizeof situations / sizeof situations[0];
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (size_t i = 0; i < n; i++)
            printf("%s\n", situations[i].name);
        return 0;
    }
    for (size_t i = 0; argc == 2 && i < n; i++) {
        if (strcmp(argv[1], situations[i].name) != 0)
            continue;
        situation = situations[i].name;
        register_kernels();
        situations[i].fn();
        printf("rules_prog %s: ok\n", situation);
        return 0;
    }
    fprintf(stderr, "usage: rules_prog SITUATION (rules_prog list names them)\n");
    return 2;
}
