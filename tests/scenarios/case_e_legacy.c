/* case_e_legacy.c - case E: the legacy default stream (stream 0) serializes
 * with every blocking stream of its device.
 *
 * Test (argv or SCN_TESTS):
 *   legacy   a blocking stream S (cudaStreamCreate) gets a SCN_E_KERNEL_MS
 *            (100 ms) kernel; then a SCN_E_SHORT_MS (1 ms) kernel and a
 *            memset go to the legacy stream 0, and an independent short
 *            kernel and memset to a non-blocking stream N. When does each
 *            finish? Natively the legacy work waits for S's kernel, N's
 *            does not. ok: both memsets landed. */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "scenario.h"

static bool check_value(const void *dptr, size_t n, unsigned char value, unsigned char *pinned, cudaStream_t s)
{
    SCN_CK(cudaMemcpyAsync(pinned, dptr, n, cudaMemcpyDeviceToHost, s));
    SCN_CK(cudaStreamSynchronize(s));
    for (size_t i = 0; i < n; i++)
        if (pinned[i] != value)
            return false;
    return true;
}

int main(int argc, char **argv)
{
    scn_begin("E", argc, argv);
    double kernel_ms = scn_env_double("E_KERNEL_MS", 100, 50);
    double short_ms = scn_env_double("E_SHORT_MS", 1, 1);
    size_t n = SCN_MIB;
    if (!scn_want("legacy"))
        return scn_end();
    scn_test("legacy", 0);

    SCN_CK(cudaSetDevice(0));
    void *buf_l, *buf_n;
    unsigned char *pinned;
    SCN_CK(cudaMalloc(&buf_l, n));
    SCN_CK(cudaMalloc(&buf_n, n));
    SCN_CK(cudaMallocHost((void **)&pinned, n));
    SCN_CK(cudaMemset(buf_l, 0, n));
    SCN_CK(cudaMemset(buf_n, 0, n));
    SCN_CK(cudaDeviceSynchronize());
    cudaStream_t s_blocking, s_nb;
    SCN_CK(cudaStreamCreate(&s_blocking));
    SCN_CK(cudaStreamCreateWithFlags(&s_nb, cudaStreamNonBlocking));
    cudaEvent_t ev[2];
    SCN_CK(cudaEventCreateWithFlags(&ev[0], cudaEventDisableTiming));
    SCN_CK(cudaEventCreateWithFlags(&ev[1], cudaEventDisableTiming));
    scn_kernel_empty(s_nb); /* warm-up */
    SCN_CK(cudaDeviceSynchronize());

    double t0 = scn_now_ms();
    scn_kernel_sleep(s_blocking, kernel_ms);
    scn_kernel_sleep(0, short_ms);
    SCN_CK(cudaMemsetAsync(buf_l, 0x5A, n, 0));
    SCN_CK(cudaEventRecord(ev[0], 0));
    scn_kernel_sleep(s_nb, short_ms);
    SCN_CK(cudaMemsetAsync(buf_n, 0xA5, n, s_nb));
    SCN_CK(cudaEventRecord(ev[1], s_nb));
    double issued = scn_now_ms();
    double done[2];
    scn_poll_events(2, ev, done);
    SCN_CK(cudaDeviceSynchronize());
    bool ok = check_value(buf_l, n, 0x5A, pinned, s_nb) && check_value(buf_n, n, 0xA5, pinned, s_nb);
    scn_result("legacy", "kernel_ms=%.3f short_ms=%.3f issue_ms=%.3f legacy_done_ms=%.3f nb_done_ms=%.3f ok=%d",
               kernel_ms, short_ms, issued - t0, done[0] - t0, done[1] - t0, ok);

    SCN_CK(cudaEventDestroy(ev[0]));
    SCN_CK(cudaEventDestroy(ev[1]));
    SCN_CK(cudaStreamDestroy(s_blocking));
    SCN_CK(cudaStreamDestroy(s_nb));
    SCN_CK(cudaFreeHost(pinned));
    SCN_CK(cudaFree(buf_l));
    SCN_CK(cudaFree(buf_n));
    return scn_end();
}
