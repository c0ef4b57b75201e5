/* case_d_busy_d2d.c - case D: same-device device-to-device copies while a
 * long kernel runs (seed 001). A D2D copy runs as a kernel on the compute
 * engine and may wait for a time slice (design.md: a burst of 8 x 1 MiB took
 * 2.39 ms instead of 41-51 us).
 *
 * Test (argv or SCN_TESTS):
 *   busy_d2d   baseline: a burst of SCN_D_COUNT (8) x SCN_D_BYTES (1 MiB)
 *              cudaMemcpyAsync D2D on a non-blocking stream, no kernel
 *              running; then a SCN_D_KERNEL_MS kernel on stream K and
 *              SCN_D_BURSTS bursts on the copy stream while it runs: time
 *              from the first copy's issue to the burst's completion (an
 *              event). during_kernel=1 when every burst ended before the
 *              kernel did (else the figure mixes in an idle GPU). */
#include <stdlib.h>

#include "kernels.h"
#include "scenario.h"

static double burst(char *dst, const char *src, size_t n, int count, cudaStream_t s, cudaEvent_t ev)
{
    double t0 = scn_now_ms();
    for (int i = 0; i < count; i++)
        SCN_CK(cudaMemcpyAsync(dst + (size_t)i * n, src + (size_t)i * n, n, cudaMemcpyDeviceToDevice, s));
    SCN_CK(cudaEventRecord(ev, s));
    return scn_poll_event(ev) - t0;
}

int main(int argc, char **argv)
{
    scn_begin("D", argc, argv);
    size_t n = scn_env_size("D_BYTES", SCN_MIB, SCN_MIB);
    int count = (int)scn_env_long("D_COUNT", 8, 8);
    int bursts = (int)scn_env_long("D_BURSTS", 3, 2);
    double kernel_ms = scn_env_double("D_KERNEL_MS", 200, 100);
    if (!scn_want("busy_d2d"))
        return scn_end();
    scn_test("busy_d2d", 0);
    if (bursts < 1)
        bursts = 1;

    SCN_CK(cudaSetDevice(0));
    size_t total = n * (size_t)count;
    char *src, *dst;
    SCN_CK(cudaMalloc((void **)&src, total));
    SCN_CK(cudaMalloc((void **)&dst, total));
    scn_device_fill(0, src, total, 51);
    SCN_CK(cudaMemset(dst, 0, total));
    SCN_CK(cudaDeviceSynchronize());
    cudaStream_t sk, sc;
    SCN_CK(cudaStreamCreateWithFlags(&sk, cudaStreamNonBlocking));
    SCN_CK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
    cudaEvent_t ev, kev;
    SCN_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    SCN_CK(cudaEventCreateWithFlags(&kev, cudaEventDisableTiming));

    burst(dst, src, n, count, sc, ev); /* warm-up */
    double base = 1e30;
    for (int r = 0; r < 3; r++) {
        double t = burst(dst, src, n, count, sc, ev);
        if (t < base)
            base = t;
    }
    bool ok = scn_device_verify(0, dst, total, 51);
    SCN_CK(cudaMemset(dst, 0, total));
    SCN_CK(cudaDeviceSynchronize());

    double t0 = scn_now_ms();
    scn_kernel_sleep(sk, kernel_ms);
    SCN_CK(cudaEventRecord(kev, sk));
    scn_sleep_ms(2); /* the kernel is running (the seed's gap) */
    double first = 0, worst = 0;
    for (int b = 0; b < bursts; b++) {
        double t = burst(dst, src, n, count, sc, ev);
        if (b == 0)
            first = t;
        if (t > worst)
            worst = t;
    }
    double bursts_end = scn_now_ms();
    double kernel_done = scn_poll_event(kev);
    ok = ok && scn_device_verify(0, dst, total, 51);
    scn_result("busy_d2d",
               "copies=%d bytes=%zu kernel_ms=%.3f base_ms=%.3f burst_ms=%.3f burst_max_ms=%.3f bursts=%d "
               "kernel_done_ms=%.3f during_kernel=%d ok=%d",
               count, n, kernel_ms, base, first, worst, bursts, kernel_done - t0, bursts_end < kernel_done, ok);

    SCN_CK(cudaEventDestroy(ev));
    SCN_CK(cudaEventDestroy(kev));
    SCN_CK(cudaStreamDestroy(sk));
    SCN_CK(cudaStreamDestroy(sc));
    SCN_CK(cudaFree(src));
    SCN_CK(cudaFree(dst));
    return scn_end();
}
