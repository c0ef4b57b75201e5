/* d2d_stage_tests.c - the case D remedy (fix_busy_d2d, issue 13) on the
 * simulated runtime: same-device copies of a stream whose copies start late
 * behind a kernel on every SM go through pinned memory; the data and the
 * stream order stay exact, and once the engine is free the copies go native
 * again. Run by tests/pipelines/run.sh natively (the test is right) and
 * under the shim with UNSTALL_FIX_BUSY_D2D=1. Prints "PASS name" or
 * "FAIL name: why"; exits 1 on a failure.
 *
 * Usage: d2d_stage_tests [staged|native]   staged: the shim is expected to
 * stage (asserted from fakecuda's statistics); native: it must not. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "fakecuda.h"

#define N ((size_t)(1 << 20) + 3) /* not a multiple of anything */
#define ROUNDS 12

static int failures;

static void check(bool ok, const char *name, const char *why)
{
    printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, ok ? "" : ": ", ok ? "" : why);
    failures += !ok;
}

#define CUDA(call)                                                                                                 \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess) {                                                                                   \
            printf("FAIL %s: %s = %d\n", __func__, #call, (int)e_);                                                \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

static unsigned char pattern(size_t i, unsigned seed) { return (unsigned char)(i * 131u + seed * 17u + (i >> 9)); }

/* kernels: sleep (every SM when the grid says so), fill, check */
static void sleep_kernel(void **a) { fakecuda_sleep_us(*(double *)a[0]); }
static void fill_kernel(void **a) /* (unsigned char *p, size_t n, unsigned seed) */
{
    unsigned char *p = *(unsigned char **)a[0];
    for (size_t i = 0; i < *(size_t *)a[1]; i++)
        p[i] = pattern(i, *(unsigned *)a[2]);
}
static void check_kernel(void **a) /* (const unsigned char *p, size_t n, unsigned seed, int *bad) */
{
    const unsigned char *p = *(const unsigned char **)a[0];
    for (size_t i = 0; i < *(size_t *)a[1]; i++)
        if (p[i] != pattern(i, *(unsigned *)a[2])) {
            __atomic_add_fetch(*(int **)a[3], 1, __ATOMIC_SEQ_CST);
            return;
        }
}

static const dim3 one = {1, 1, 1};

static void occupy(cudaStream_t s, double ms)
{
    double us = ms * 1e3;
    void *a[] = {&us};
    dim3 grid = {132, 1, 1};
    CUDA(cudaLaunchKernel((const void *)sleep_kernel, grid, one, a, 0, s));
}

static void fill(cudaStream_t s, void *p, size_t n, unsigned seed)
{
    void *a[] = {&p, &n, &seed};
    CUDA(cudaLaunchKernel((const void *)fill_kernel, one, one, a, 0, s));
}

static void verify(cudaStream_t s, const void *p, size_t n, unsigned seed, int *bad)
{
    void *a[] = {&p, &n, &seed, &bad};
    CUDA(cudaLaunchKernel((const void *)check_kernel, one, one, a, 0, s));
}

static void sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms * 1e6) % 1000000000L};
    nanosleep(&ts, NULL);
}

/* Under a sanitizer (TEST_SANITIZER) a simulated copy's memmove is slow
 * enough to look late on an idle engine: whether copies are staged is a
 * timing and is not judged there; the data and the order are. */
static void check_timing(bool ok, const char *name, const char *why)
{
    if (getenv("TEST_SANITIZER") != NULL && !ok)
        printf("SKIP %s: a timing, not judged under %s (%s)\n", name, getenv("TEST_SANITIZER"), why);
    else
        check(ok, name, why);
}

int main(int argc, char **argv)
{
    bool expect_staged = argc > 1 && strcmp(argv[1], "staged") == 0;
    size_t sz1[] = {sizeof(double)}, szf[] = {sizeof(void *), sizeof(size_t), sizeof(unsigned)},
           szc[] = {sizeof(void *), sizeof(size_t), sizeof(unsigned), sizeof(int *)};
    fakecuda_register_kernel((const void *)sleep_kernel, 1, sz1);
    fakecuda_register_kernel((const void *)fill_kernel, 3, szf);
    fakecuda_register_kernel((const void *)check_kernel, 4, szc);
    CUDA(cudaSetDevice(0));
    unsigned char *src, *dst;
    int *bad;
    CUDA(cudaMalloc((void **)&src, N));
    CUDA(cudaMalloc((void **)&dst, N));
    CUDA(cudaMallocHost((void **)&bad, 2 * sizeof(int)));
    bad[0] = bad[1] = 0;
    cudaStream_t k, s, t;
    cudaEvent_t copied;
    CUDA(cudaStreamCreateWithFlags(&k, cudaStreamNonBlocking));
    CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
    CUDA(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));

    /* data and order: each round a kernel on s fills src with a new
     * pattern, the copy follows on s, a kernel on s checks dst, and another
     * stream that waits for an event after the copy checks it too; the
     * copy then overwrites dst's start while the checks queued behind it
     * must still see the round's pattern (they run before it) */
    fakecuda_reset_stats();
    occupy(k, 400);
    sleep_ms(5);
    for (unsigned r = 0; r < ROUNDS; r++) {
        fill(s, src, N, r + 1);
        CUDA(cudaMemcpyAsync(dst, src, N, cudaMemcpyDeviceToDevice, s));
        CUDA(cudaEventRecord(copied, s));
        verify(s, dst, N, r + 1, &bad[0]);
        CUDA(cudaStreamWaitEvent(t, copied, 0));
        verify(t, dst, N, r + 1, &bad[1]);
        CUDA(cudaStreamSynchronize(t));
        CUDA(cudaStreamSynchronize(s));
    }
    /* a zero-byte copy and one larger than busy_d2d_max_bytes (run.sh: 1m) stay native and right */
    CUDA(cudaMemcpyAsync(dst, src, 0, cudaMemcpyDeviceToDevice, s));
    CUDA(cudaStreamSynchronize(s));
    struct fakecuda_stats busy;
    fakecuda_stats(&busy);
    char why[200];
    snprintf(why, sizeof why, "stream s saw %d bad rounds, stream t %d", bad[0], bad[1]);
    check(bad[0] == 0 && bad[1] == 0, "stage.data_and_order", why);
    snprintf(why, sizeof why, "%lu pinned copies, %lu same-device copies, %lu time-slice waits", busy.copies_pinned,
             busy.copies_d2d, busy.timeslice_waits);
    if (expect_staged)
        check_timing(busy.copies_pinned >= 2 * (ROUNDS / 2) && busy.timeslice_waits <= 3, "stage.staged", why);
    else /* a copy within a slice that an earlier one won runs at once: not every round waits */
        check_timing(busy.copies_pinned == 0 && busy.timeslice_waits >= 2, "stage.native", why);
    CUDA(cudaStreamSynchronize(k));

    /* the engine is free again: after a recheck (run.sh: 50 ms) the copies go native */
    if (expect_staged) {
        for (int r = 0; r < 10; r++) {
            CUDA(cudaMemcpyAsync(dst, src, N, cudaMemcpyDeviceToDevice, s));
            CUDA(cudaStreamSynchronize(s));
            sleep_ms(8);
        }
        fakecuda_reset_stats();
        for (int r = 0; r < 10; r++)
            CUDA(cudaMemcpyAsync(dst, src, N, cudaMemcpyDeviceToDevice, s));
        CUDA(cudaStreamSynchronize(s));
        struct fakecuda_stats idle;
        fakecuda_stats(&idle);
        snprintf(why, sizeof why, "%lu pinned copies, %lu same-device copies", idle.copies_pinned, idle.copies_d2d);
        check_timing(idle.copies_pinned == 0 && idle.copies_d2d == 10, "stage.back_to_native", why);
    }
    return failures != 0;
}
