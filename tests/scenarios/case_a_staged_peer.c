/* case_a_staged_peer.c - case A: copies between two GPUs without peer access
 * enabled. The driver stages them through host memory; every staged copy on
 * the machine queues behind the others (the stall a user reported: test
 * stall).
 *
 * Tests (argv or SCN_TESTS; default all):
 *   peer_async      cudaMemcpyPeerAsync, SCN_A_BYTES (256 MiB): GB/s (best of
 *                   SCN_REPS), host time in the call with the stream idle
 *                   (worst of the reps) and behind a SCN_A_BUSY_MS kernel
 *   memcpy_default  the same with cudaMemcpyAsync(cudaMemcpyDefault)
 *   stall           as a user reported it: stream A gets a SCN_A_KERNEL_MS
 *                   (300 ms) kernel then a SCN_A_STALL_BYTES (64 MiB)
 *                   cross-device copy; an independent copy of the same
 *                   size on stream B is issued right after: when is B's
 *                   copy done?
 * Peer access is never enabled. One device: "skipped=one_gpu". */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "scenario.h"

static size_t bytes, stall_bytes;
static double busy_ms, kernel_ms;
static int reps;

static void clear_device(int device, void *p, size_t n)
{
    int cur;
    SCN_CK(cudaGetDevice(&cur));
    SCN_CK(cudaSetDevice(device));
    SCN_CK(cudaMemset(p, 0, n));
    SCN_CK(cudaDeviceSynchronize());
    SCN_CK(cudaSetDevice(cur));
}

enum copy_api { API_PEER, API_DEFAULT };

static void issue(enum copy_api api, void *dst, const void *src, size_t n, cudaStream_t s)
{
    if (api == API_PEER)
        SCN_CK(cudaMemcpyPeerAsync(dst, 1, src, 0, n, s));
    else
        SCN_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s));
}

static void test_copy(const char *test, enum copy_api api, void *dst, const void *src, cudaStream_t s)
{
    scn_test(test, 0);
    bool ok = true;
    /* warm-up (first use: whatever the runtime, or a shim, sets up once) */
    clear_device(1, dst, bytes);
    issue(api, dst, src, bytes, s);
    SCN_CK(cudaStreamSynchronize(s));
    ok = ok && scn_device_verify(1, dst, bytes, 1);

    double best_ms = 1e30, call_idle = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = scn_now_ms();
        issue(api, dst, src, bytes, s);
        double t1 = scn_now_ms();
        SCN_CK(cudaStreamSynchronize(s));
        double t2 = scn_now_ms();
        if (t2 - t0 < best_ms)
            best_ms = t2 - t0;
        if (t1 - t0 > call_idle)
            call_idle = t1 - t0;
    }

    /* stream busy: the copy is issued behind a kernel */
    clear_device(1, dst, bytes);
    scn_kernel_sleep(s, busy_ms);
    double t0 = scn_now_ms();
    issue(api, dst, src, bytes, s);
    double call_busy = scn_now_ms() - t0;
    SCN_CK(cudaStreamSynchronize(s));
    double busy_done = scn_now_ms() - t0;
    ok = ok && scn_device_verify(1, dst, bytes, 1);

    scn_result(test,
               "api=%s bytes=%zu reps=%d gbps=%.1f call_idle_ms=%.3f call_busy_ms=%.3f busy_kernel_ms=%.3f "
               "busy_done_ms=%.3f ok=%d",
               api == API_PEER ? "cudaMemcpyPeerAsync" : "cudaMemcpyAsync", bytes, reps,
               scn_gbps(bytes, best_ms), call_idle, call_busy, busy_ms, busy_done, ok);
    scn_test_end();
}

/* The reported stall: the independent copy on stream B waits for stream A's
 * kernel. */
static void test_stall(void)
{
    scn_test("stall", 0);
    void *a_src, *b_src, *a_dst, *b_dst;
    SCN_CK(cudaSetDevice(1));
    SCN_CK(cudaMalloc(&a_dst, stall_bytes));
    SCN_CK(cudaMalloc(&b_dst, stall_bytes));
    SCN_CK(cudaSetDevice(0));
    SCN_CK(cudaMalloc(&a_src, stall_bytes));
    SCN_CK(cudaMalloc(&b_src, stall_bytes));
    scn_device_fill(0, a_src, stall_bytes, 11);
    scn_device_fill(0, b_src, stall_bytes, 12);
    cudaStream_t sa, sb;
    SCN_CK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
    SCN_CK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
    cudaEvent_t ev[2];
    SCN_CK(cudaEventCreateWithFlags(&ev[0], cudaEventDisableTiming));
    SCN_CK(cudaEventCreateWithFlags(&ev[1], cudaEventDisableTiming));

    /* warm-up on both streams: what the runtime (or a shim) sets up once */
    SCN_CK(cudaMemcpyAsync(a_dst, a_src, stall_bytes, cudaMemcpyDeviceToDevice, sa));
    SCN_CK(cudaMemcpyAsync(b_dst, b_src, stall_bytes, cudaMemcpyDeviceToDevice, sb));
    SCN_CK(cudaStreamSynchronize(sa));
    SCN_CK(cudaStreamSynchronize(sb));
    clear_device(1, a_dst, stall_bytes);
    clear_device(1, b_dst, stall_bytes);

    double t0 = scn_now_ms();
    scn_kernel_sleep(sa, kernel_ms);
    SCN_CK(cudaMemcpyAsync(a_dst, a_src, stall_bytes, cudaMemcpyDeviceToDevice, sa));
    double a_issued = scn_now_ms();
    SCN_CK(cudaMemcpyAsync(b_dst, b_src, stall_bytes, cudaMemcpyDeviceToDevice, sb));
    double b_issued = scn_now_ms();
    SCN_CK(cudaEventRecord(ev[0], sa));
    SCN_CK(cudaEventRecord(ev[1], sb));
    double done[2];
    scn_poll_events(2, ev, done);
    bool ok = scn_device_verify(1, a_dst, stall_bytes, 11) && scn_device_verify(1, b_dst, stall_bytes, 12);
    scn_result("stall",
               "bytes=%zu kernel_ms=%.3f a_issue_ms=%.3f b_issue_ms=%.3f b_done_ms=%.3f a_done_ms=%.3f ok=%d",
               stall_bytes, kernel_ms, a_issued - t0, b_issued - t0, done[1] - t0, done[0] - t0, ok);

    SCN_CK(cudaEventDestroy(ev[0]));
    SCN_CK(cudaEventDestroy(ev[1]));
    SCN_CK(cudaStreamDestroy(sa));
    SCN_CK(cudaStreamDestroy(sb));
    SCN_CK(cudaFree(a_src));
    SCN_CK(cudaFree(b_src));
    SCN_CK(cudaFree(a_dst));
    SCN_CK(cudaFree(b_dst));
    scn_test_end();
}

int main(int argc, char **argv)
{
    scn_begin("A", argc, argv);
    bytes = scn_env_size("A_BYTES", 256 * SCN_MIB, 32 * SCN_MIB);
    stall_bytes = scn_env_size("A_STALL_BYTES", 64 * SCN_MIB, 16 * SCN_MIB);
    busy_ms = scn_env_double("A_BUSY_MS", 100, 40);
    kernel_ms = scn_env_double("A_KERNEL_MS", 300, 60);
    reps = (int)scn_env_long("REPS", 3, 2);
    if (scn_device_count() < 2) {
        scn_result("staged_peer", "skipped=one_gpu ok=1");
        return scn_end();
    }

    if (scn_want("peer_async") || scn_want("memcpy_default")) {
        void *src, *dst;
        cudaStream_t s;
        SCN_CK(cudaSetDevice(1));
        SCN_CK(cudaMalloc(&dst, bytes));
        SCN_CK(cudaSetDevice(0));
        SCN_CK(cudaMalloc(&src, bytes));
        SCN_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        scn_device_fill(0, src, bytes, 1);
        if (scn_want("peer_async"))
            test_copy("peer_async", API_PEER, dst, src, s);
        if (scn_want("memcpy_default"))
            test_copy("memcpy_default", API_DEFAULT, dst, src, s);
        SCN_CK(cudaStreamDestroy(s));
        SCN_CK(cudaFree(src));
        SCN_CK(cudaFree(dst));
    }
    if (scn_want("stall"))
        test_stall();
    return scn_end();
}
