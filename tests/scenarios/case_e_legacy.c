/* case_e_legacy.c - case E: the legacy default stream (stream 0) serializes
 * with every blocking stream of its device.
 *
 * Tests (argv or SCN_TESTS):
 *   legacy   a blocking stream S (cudaStreamCreate) gets a SCN_E_KERNEL_MS
 *            (100 ms) kernel; then a SCN_E_SHORT_MS (1 ms) kernel and a
 *            memset go to the legacy stream 0, and an independent short
 *            kernel and memset to a non-blocking stream N. When does each
 *            finish? Natively the legacy work waits for S's kernel, N's
 *            does not (legacy_stream=ordered|per_thread: it does not wait).
 *            ok: both memsets landed.
 * The orders a program may rely on, each ok=1 when it held (a 30 ms kernel
 * ahead of the work that must come first, so that a lost order shows):
 *   blocking_after  stream 0: kernel, memset; then a blocking stream copies
 *                   the buffer to the host: it sees the memset (the legacy
 *                   stream's work comes before later blocking-stream work;
 *                   kept by ordered, not by per_thread)
 *   threads         another thread: kernel, memset on stream 0; then this
 *                   thread copies the buffer on stream 0 and synchronizes
 *                   stream 0: it sees the memset (one sequence for every
 *                   thread; kept by ordered, not by per_thread)
 *   wait_event      a blocking stream: kernel, memset, event; stream 0 waits
 *                   for the event and copies the buffer: it sees the memset
 *                   (kept by both)
 *   sync            stream 0: kernel, memset; cudaStreamSynchronize(0)
 *                   returns after the memset (kept by both) */
#include <pthread.h>
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

#define ORDER_KERNEL_MS 30.0

/* The legacy stream's ordering tests: each fills `buf` with `value` behind a
 * 30 ms kernel somewhere and reads it back where the order says it must be
 * there already. */
struct order_bufs {
    void *buf;
    unsigned char *pinned;
    size_t n;
};

static bool pinned_is(const struct order_bufs *b, unsigned char value)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->pinned[i] != value)
            return false;
    return true;
}

static void order_reset(const struct order_bufs *b)
{
    SCN_CK(cudaMemset(b->buf, 0, b->n));
    SCN_CK(cudaDeviceSynchronize());
    memset(b->pinned, 0, b->n);
}

static void order_result(const char *test, const struct order_bufs *b, double t0)
{
    scn_result(test, "kernel_ms=%.3f done_ms=%.3f ok=%d", ORDER_KERNEL_MS, scn_now_ms() - t0, pinned_is(b, 0x5A));
    SCN_CK(cudaDeviceSynchronize());
    scn_test_end();
}

static void test_blocking_after(const struct order_bufs *b)
{
    scn_test("blocking_after", 0);
    order_reset(b);
    cudaStream_t s;
    SCN_CK(cudaStreamCreate(&s));
    double t0 = scn_now_ms();
    scn_kernel_sleep(0, ORDER_KERNEL_MS);
    SCN_CK(cudaMemsetAsync(b->buf, 0x5A, b->n, 0));
    SCN_CK(cudaMemcpyAsync(b->pinned, b->buf, b->n, cudaMemcpyDeviceToHost, s));
    SCN_CK(cudaStreamSynchronize(s));
    order_result("blocking_after", b, t0);
    SCN_CK(cudaStreamDestroy(s));
}

static void *other_thread_fills(void *arg)
{
    const struct order_bufs *b = arg;
    SCN_CK(cudaSetDevice(0));
    scn_kernel_sleep(0, ORDER_KERNEL_MS);
    SCN_CK(cudaMemsetAsync(b->buf, 0x5A, b->n, 0));
    return NULL;
}

static void test_threads(const struct order_bufs *b)
{
    scn_test("threads", 0);
    order_reset(b);
    double t0 = scn_now_ms();
    pthread_t t;
    if (pthread_create(&t, NULL, other_thread_fills, (void *)b) != 0 || pthread_join(t, NULL) != 0) {
        scn_result("threads", "error=pthread ok=0");
        return;
    }
    SCN_CK(cudaMemcpyAsync(b->pinned, b->buf, b->n, cudaMemcpyDeviceToHost, 0));
    SCN_CK(cudaStreamSynchronize(0));
    order_result("threads", b, t0);
}

static void test_wait_event(const struct order_bufs *b)
{
    scn_test("wait_event", 0);
    order_reset(b);
    cudaStream_t s;
    cudaEvent_t filled;
    SCN_CK(cudaStreamCreate(&s));
    SCN_CK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
    double t0 = scn_now_ms();
    scn_kernel_sleep(s, ORDER_KERNEL_MS);
    SCN_CK(cudaMemsetAsync(b->buf, 0x5A, b->n, s));
    SCN_CK(cudaEventRecord(filled, s));
    SCN_CK(cudaStreamWaitEvent(0, filled, 0));
    SCN_CK(cudaMemcpyAsync(b->pinned, b->buf, b->n, cudaMemcpyDeviceToHost, 0));
    SCN_CK(cudaStreamSynchronize(0));
    order_result("wait_event", b, t0);
    SCN_CK(cudaEventDestroy(filled));
    SCN_CK(cudaStreamDestroy(s));
}

static void test_sync(const struct order_bufs *b)
{
    scn_test("sync", 0);
    order_reset(b);
    double t0 = scn_now_ms();
    scn_kernel_sleep(0, ORDER_KERNEL_MS);
    SCN_CK(cudaMemsetAsync(b->buf, 0x5A, b->n, 0));
    SCN_CK(cudaStreamSynchronize(0));
    /* read back on a stream that orders with nothing: only the host wait did */
    cudaStream_t reader;
    SCN_CK(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking));
    SCN_CK(cudaMemcpyAsync(b->pinned, b->buf, b->n, cudaMemcpyDeviceToHost, reader));
    SCN_CK(cudaStreamSynchronize(reader));
    SCN_CK(cudaStreamDestroy(reader));
    order_result("sync", b, t0);
}

static void order_tests(void)
{
    if (!scn_want("blocking_after") && !scn_want("threads") && !scn_want("wait_event") && !scn_want("sync"))
        return;
    struct order_bufs b = {.n = SCN_MIB};
    SCN_CK(cudaSetDevice(0));
    SCN_CK(cudaMalloc(&b.buf, b.n));
    SCN_CK(cudaMallocHost((void **)&b.pinned, b.n));
    if (scn_want("blocking_after"))
        test_blocking_after(&b);
    if (scn_want("threads"))
        test_threads(&b);
    if (scn_want("wait_event"))
        test_wait_event(&b);
    if (scn_want("sync"))
        test_sync(&b);
    SCN_CK(cudaFreeHost(b.pinned));
    SCN_CK(cudaFree(b.buf));
}

static void test_legacy(void);

int main(int argc, char **argv)
{
    scn_begin("E", argc, argv);
    if (scn_want("legacy"))
        test_legacy();
    order_tests();
    return scn_end();
}

static void test_legacy(void)
{
    double kernel_ms = scn_env_double("E_KERNEL_MS", 100, 50);
    double short_ms = scn_env_double("E_SHORT_MS", 1, 1);
    size_t n = SCN_MIB;
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
    scn_test_end();
}
