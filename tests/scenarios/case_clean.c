/* case_clean.c - the clean twins of cases A-E: the same work done the way
 * that stalls nothing, so that a detection test can assert that no finding
 * fires under the shim, and so that the figures show what the hardware does
 * without the stalls.
 *
 * Tests (argv or SCN_TESTS; default all):
 *   pinned_h2d      B's held_small with a pinned source: SCN_B_SMALL_BYTES
 *                   behind a SCN_B_KERNEL_MS kernel, caller held, done
 *   pinned_d2h      C's throughput into pinned memory (SCN_C_BYTES)
 *   peer            A's copy with peer access enabled both ways
 *                   (cudaMemcpyPeerAsync and cudaMemcpyAsync Default);
 *                   skipped=one_gpu or skipped=no_peer_access when it cannot
 *   launch_latency  C's launch latency with the copier's D2H into pinned memory
 *   nonblocking     E with non-blocking streams only: a SCN_E_KERNEL_MS kernel
 *                   on N1, a short kernel and memset on N2: done at once
 *   d2d_idle        D's burst with no kernel running */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "latency.h"
#include "scenario.h"

static int reps;

static void test_pinned_h2d(void)
{
    scn_test("pinned_h2d", 0);
    size_t n = scn_env_size("B_SMALL_BYTES", 16 * SCN_MIB, 16 * SCN_MIB);
    double kernel_ms = scn_env_double("B_KERNEL_MS", 200, 50);
    unsigned char *src;
    void *dst;
    SCN_CK(cudaMallocHost((void **)&src, n));
    SCN_CK(cudaMalloc(&dst, n));
    cudaStream_t s;
    SCN_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t ev;
    SCN_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    scn_fill(src, n, 61);
    SCN_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s)); /* warm-up */
    SCN_CK(cudaStreamSynchronize(s));
    SCN_CK(cudaMemsetAsync(dst, 0, n, s));
    SCN_CK(cudaStreamSynchronize(s));

    scn_kernel_sleep(s, kernel_ms);
    double t0 = scn_now_ms();
    SCN_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s));
    double held = scn_now_ms() - t0;
    SCN_CK(cudaEventRecord(ev, s));
    double done = scn_poll_event(ev) - t0;
    bool ok = scn_device_verify(0, dst, n, 61);
    scn_result("pinned_h2d", "bytes=%zu kernel_ms=%.3f held_ms=%.3f done_ms=%.3f ok=%d", n, kernel_ms, held, done, ok);
    SCN_CK(cudaEventDestroy(ev));
    SCN_CK(cudaStreamDestroy(s));
    SCN_CK(cudaFree(dst));
    SCN_CK(cudaFreeHost(src));
    scn_test_end();
}

static void test_pinned_d2h(void)
{
    scn_test("pinned_d2h", 0);
    size_t n = scn_env_size("C_BYTES", 256 * SCN_MIB, 64 * SCN_MIB);
    unsigned char *dst;
    void *src;
    SCN_CK(cudaMallocHost((void **)&dst, n));
    SCN_CK(cudaMalloc(&src, n));
    scn_device_fill(0, src, n, 62);
    cudaStream_t s;
    SCN_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    SCN_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s)); /* warm-up */
    SCN_CK(cudaStreamSynchronize(s));
    double best = 1e30, call = 0;
    for (int r = 0; r < reps; r++) {
        memset(dst, 0, n);
        double t0 = scn_now_ms();
        SCN_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s));
        double t1 = scn_now_ms();
        SCN_CK(cudaStreamSynchronize(s));
        double t2 = scn_now_ms();
        if (t2 - t0 < best)
            best = t2 - t0;
        if (t1 - t0 > call)
            call = t1 - t0;
    }
    bool ok = scn_verify(dst, n, 62);
    scn_result("pinned_d2h", "bytes=%zu reps=%d gbps=%.1f call_ms=%.3f ok=%d", n, reps, scn_gbps(n, best), call, ok);
    SCN_CK(cudaStreamDestroy(s));
    SCN_CK(cudaFree(src));
    SCN_CK(cudaFreeHost(dst));
    scn_test_end();
}

static void test_peer(void)
{
    scn_test("peer", 0);
    if (scn_device_count() < 2) {
        scn_result("peer", "skipped=one_gpu ok=1");
        return;
    }
    int can01 = 0, can10 = 0;
    SCN_CK(cudaDeviceCanAccessPeer(&can01, 0, 1));
    SCN_CK(cudaDeviceCanAccessPeer(&can10, 1, 0));
    if (!can01 || !can10) {
        scn_result("peer", "skipped=no_peer_access ok=1");
        return;
    }
    size_t n = scn_env_size("A_BYTES", 256 * SCN_MIB, 32 * SCN_MIB);
    void *src, *dst;
    SCN_CK(cudaSetDevice(1));
    SCN_CK(cudaDeviceEnablePeerAccess(0, 0));
    SCN_CK(cudaMalloc(&dst, n));
    SCN_CK(cudaSetDevice(0));
    SCN_CK(cudaDeviceEnablePeerAccess(1, 0));
    SCN_CK(cudaMalloc(&src, n));
    scn_device_fill(0, src, n, 63);
    cudaStream_t s;
    SCN_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    SCN_CK(cudaMemcpyPeerAsync(dst, 1, src, 0, n, s)); /* warm-up */
    SCN_CK(cudaStreamSynchronize(s));
    double best = 1e30, call = 0;
    for (int r = 0; r < 2 * reps; r++) {
        double t0 = scn_now_ms();
        if (r % 2 == 0)
            SCN_CK(cudaMemcpyPeerAsync(dst, 1, src, 0, n, s));
        else
            SCN_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s));
        double t1 = scn_now_ms();
        SCN_CK(cudaStreamSynchronize(s));
        double t2 = scn_now_ms();
        if (t2 - t0 < best)
            best = t2 - t0;
        if (t1 - t0 > call)
            call = t1 - t0;
    }
    bool ok = scn_device_verify(1, dst, n, 63);
    scn_result("peer", "bytes=%zu reps=%d gbps=%.1f call_ms=%.3f ok=%d", n, 2 * reps, scn_gbps(n, best), call, ok);
    SCN_CK(cudaStreamDestroy(s));
    SCN_CK(cudaFree(src));
    SCN_CK(cudaSetDevice(1));
    SCN_CK(cudaFree(dst));
    SCN_CK(cudaDeviceDisablePeerAccess(0));
    SCN_CK(cudaSetDevice(0));
    SCN_CK(cudaDeviceDisablePeerAccess(1));
    scn_test_end();
}

static void test_launch_latency(void)
{
    scn_test("launch_latency", 0);
    struct scn_latency l = {
        .n = scn_env_size("C_LOOP_BYTES", 256 * SCN_MIB, 64 * SCN_MIB),
        .seed = 64,
        .gap_ms = scn_env_double("C_GAP_MS", 0, 2),
        .base_ms = scn_env_double("C_BASE_MS", 500, 200),
        .dur_ms = scn_env_double("C_LAT_MS", 2000, 400),
    };
    void *dsrc;
    SCN_CK(cudaMalloc(&dsrc, l.n));
    scn_device_fill(0, dsrc, l.n, l.seed);
    l.dsrc = dsrc;
    SCN_CK(cudaMallocHost((void **)&l.host, l.n));
    memset(l.host, 0, l.n);
    if (!scn_launch_latency(&l)) {
        scn_result("launch_latency", "error=threads ok=0");
    } else {
        scn_result("launch_latency",
                   "copy_bytes=%zu copies=%ld copy_ms=%.3f base_launches=%zu base_p99_ms=%.3f base_max_ms=%.3f "
                   "launches=%zu p50_ms=%.3f p99_ms=%.3f max_ms=%.3f over_1ms=%zu ok=%d",
                   l.n, l.copies, l.copy_ms, l.base_launches, l.base_p99_ms, l.base_max_ms, l.launches, l.p50_ms,
                   l.p99_ms, l.max_ms, l.over_1ms, l.ok);
    }
    SCN_CK(cudaFreeHost(l.host));
    SCN_CK(cudaFree(dsrc));
    scn_test_end();
}

static void test_nonblocking(void)
{
    scn_test("nonblocking", 0);
    double kernel_ms = scn_env_double("E_KERNEL_MS", 100, 50);
    double short_ms = scn_env_double("E_SHORT_MS", 1, 1);
    size_t n = SCN_MIB;
    void *buf;
    unsigned char *pinned;
    SCN_CK(cudaMalloc(&buf, n));
    SCN_CK(cudaMallocHost((void **)&pinned, n));
    cudaStream_t n1, n2;
    SCN_CK(cudaStreamCreateWithFlags(&n1, cudaStreamNonBlocking));
    SCN_CK(cudaStreamCreateWithFlags(&n2, cudaStreamNonBlocking));
    cudaEvent_t ev;
    SCN_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    scn_kernel_empty(n2); /* warm-up */
    SCN_CK(cudaStreamSynchronize(n2));

    double t0 = scn_now_ms();
    scn_kernel_sleep(n1, kernel_ms);
    scn_kernel_sleep(n2, short_ms);
    SCN_CK(cudaMemsetAsync(buf, 0x3C, n, n2));
    SCN_CK(cudaEventRecord(ev, n2));
    double done = scn_poll_event(ev) - t0;
    SCN_CK(cudaMemcpyAsync(pinned, buf, n, cudaMemcpyDeviceToHost, n2));
    SCN_CK(cudaStreamSynchronize(n2));
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        ok = pinned[i] == 0x3C;
    SCN_CK(cudaStreamSynchronize(n1));
    scn_result("nonblocking", "kernel_ms=%.3f short_ms=%.3f done_ms=%.3f ok=%d", kernel_ms, short_ms, done, ok);
    SCN_CK(cudaEventDestroy(ev));
    SCN_CK(cudaStreamDestroy(n1));
    SCN_CK(cudaStreamDestroy(n2));
    SCN_CK(cudaFreeHost(pinned));
    SCN_CK(cudaFree(buf));
    scn_test_end();
}

static void test_d2d_idle(void)
{
    scn_test("d2d_idle", 0);
    size_t n = scn_env_size("D_BYTES", SCN_MIB, SCN_MIB);
    int count = (int)scn_env_long("D_COUNT", 8, 8);
    size_t total = n * (size_t)count;
    char *src, *dst;
    SCN_CK(cudaMalloc((void **)&src, total));
    SCN_CK(cudaMalloc((void **)&dst, total));
    scn_device_fill(0, src, total, 65);
    cudaStream_t s;
    SCN_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t ev;
    SCN_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    double best = 1e30;
    for (int r = 0; r < 4; r++) { /* the first one warms up */
        double t0 = scn_now_ms();
        for (int i = 0; i < count; i++)
            SCN_CK(cudaMemcpyAsync(dst + (size_t)i * n, src + (size_t)i * n, n, cudaMemcpyDeviceToDevice, s));
        SCN_CK(cudaEventRecord(ev, s));
        double t = scn_poll_event(ev) - t0;
        if (r > 0 && t < best)
            best = t;
    }
    bool ok = scn_device_verify(0, dst, total, 65);
    scn_result("d2d_idle", "copies=%d bytes=%zu burst_ms=%.3f ok=%d", count, n, best, ok);
    SCN_CK(cudaEventDestroy(ev));
    SCN_CK(cudaStreamDestroy(s));
    SCN_CK(cudaFree(src));
    SCN_CK(cudaFree(dst));
    scn_test_end();
}

int main(int argc, char **argv)
{
    scn_begin("clean", argc, argv);
    reps = (int)scn_env_long("REPS", 3, 2);
    SCN_CK(cudaSetDevice(0));
    if (scn_want("pinned_h2d"))
        test_pinned_h2d();
    if (scn_want("pinned_d2h"))
        test_pinned_d2h();
    if (scn_want("peer"))
        test_peer();
    if (scn_want("launch_latency"))
        test_launch_latency();
    if (scn_want("nonblocking"))
        test_nonblocking();
    if (scn_want("d2d_idle"))
        test_d2d_idle();
    return scn_end();
}
