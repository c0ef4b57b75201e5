/* d2d_stage_tests.c - the case D remedy (fix_busy_d2d) on the
 * simulated runtime, in the two cases measured on H200s:
 *   created  the copies in a cuCtxCreate context, a kernel on every SM in
 *            the primary one: every burst waits a time slice natively; the
 *            remedy copies the stream's copies through pinned memory once
 *            one is found late; the data and the stream order stay exact,
 *            and once the engine is free the copies go native again;
 *   primary  the kernel and the copies in the primary context: the first
 *            copy waits for the kernel's end (no time slice within a
 *            context), and the remedy cannot help (it learns of it only
 *            after); the data and the order stay exact.
 * Run by tests/pipelines/run.sh natively (the test is right) and under the
 * shim with UNSTALL_FIX_BUSY_D2D=1. Prints "PASS name" or "FAIL name: why";
 * exits 1 on a failure.
 *
 * Usage: d2d_stage_tests [staged|pieces|native] [BYTES]   staged: the shim
 * is expected to stage (asserted from fakecuda's statistics); native: it
 * must not; pieces: it stages copies given as BYTES, judged on data, order
 * and chunks alone (how many rounds are staged, and when the stream
 * goes back to native, follow the recheck period against rounds that copies
 * of several MiB make slower: judged at the default size). BYTES: the
 * copies' size (1 MiB + 3 when absent). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "fakecuda.h"

/* the copies' size: not a multiple of anything */
static size_t N = ((size_t)1 << 20) + 3;
#define ROUNDS 12

static int failures;

#define KERNEL_MS 400.0

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

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#define CU(call)                                                                                                   \
    do {                                                                                                           \
        if ((call) != CUDA_SUCCESS) {                                                                              \
            printf("FAIL %s: %s\n", __func__, #call);                                                              \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

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

/* What one context's copies need: the buffers and streams, made while that
 * context is current (a stream is used only from its own context). */
struct copier {
    unsigned char *src, *dst;
    cudaStream_t s, t;
    cudaEvent_t copied;
};

static void copier_make(struct copier *c)
{
    CUDA(cudaMalloc((void **)&c->src, N));
    CUDA(cudaMalloc((void **)&c->dst, N));
    CUDA(cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking));
    CUDA(cudaStreamCreateWithFlags(&c->t, cudaStreamNonBlocking));
    CUDA(cudaEventCreateWithFlags(&c->copied, cudaEventDisableTiming));
}

/* Data and order: each round a kernel on s fills src with a new pattern,
 * the copy follows on s, a kernel on s checks dst, and another stream that
 * waits for an event after the copy checks it too; the next round's fill
 * and copy then overwrite src and dst while the checks queued before them
 * must still see this round's pattern. Returns the first round's time. */
static double rounds(const struct copier *c, int *bad)
{
    double first = 0;
    for (unsigned r = 0; r < ROUNDS; r++) {
        double t0 = now_ms();
        fill(c->s, c->src, N, r + 1);
        CUDA(cudaMemcpyAsync(c->dst, c->src, N, cudaMemcpyDeviceToDevice, c->s));
        CUDA(cudaEventRecord(c->copied, c->s));
        verify(c->s, c->dst, N, r + 1, &bad[0]);
        CUDA(cudaStreamWaitEvent(c->t, c->copied, 0));
        verify(c->t, c->dst, N, r + 1, &bad[1]);
        CUDA(cudaStreamSynchronize(c->t));
        CUDA(cudaStreamSynchronize(c->s));
        if (r == 0)
            first = now_ms() - t0;
    }
    /* a zero-byte copy stays native and right */
    CUDA(cudaMemcpyAsync(c->dst, c->src, 0, cudaMemcpyDeviceToDevice, c->s));
    CUDA(cudaStreamSynchronize(c->s));
    return first;
}

/* The copies in a created context, the kernel in the primary one. */
static void created_context(bool expect_staged, bool counts_in_time, int *bad)
{
    CUcontext primary, created;
    CUdevice dev;
    CU(cuCtxGetCurrent(&primary));
    CU(cuDeviceGet(&dev, 0));
    CU(cuCtxCreate(&created, NULL, 0, dev)); /* current from here */
    struct copier c;
    copier_make(&c);
    bad[0] = bad[1] = 0;
    CU(cuCtxSetCurrent(primary));
    cudaStream_t k;
    CUDA(cudaStreamCreateWithFlags(&k, cudaStreamNonBlocking));
    fakecuda_reset_stats();
    occupy(k, KERNEL_MS);
    CU(cuCtxSetCurrent(created));
    sleep_ms(5);
    rounds(&c, bad);
    struct fakecuda_stats busy;
    fakecuda_stats(&busy);
    char why[200];
    snprintf(why, sizeof why, "stream s saw %d bad rounds, stream t %d", bad[0], bad[1]);
    check(bad[0] == 0 && bad[1] == 0, "stage.created.data_and_order", why);
    snprintf(why, sizeof why, "%lu pinned copies, %lu same-device copies, %lu time-slice waits", busy.copies_pinned,
             busy.copies_d2d, busy.timeslice_waits);
    /* staged: the copies leave the compute engine (the timed ones and the
     * first rounds stay native); the slices are not counted, since this
     * program's own event records wait for one each round as well (a context
     * off the engine waits as a whole, measured on an H200) */
    if (expect_staged && counts_in_time)
        check_timing(busy.copies_pinned >= 2 * (ROUNDS / 2) && busy.copies_d2d <= ROUNDS / 2, "stage.created.staged",
                     why);
    else if (!expect_staged) /* a copy within a slice that an earlier one won runs at once: not every round waits */
        check_timing(busy.copies_pinned == 0 && busy.timeslice_waits >= 2, "stage.created.native", why);
    /* a staged copy goes through a slot of the staging pool in chunks of
     * the slot's size (and a chunk in parts where the slot's registered
     * pieces end): whatever the parts, each staged copy moves its N bytes
     * down and up, no more, no less */
    if (expect_staged) {
        snprintf(why, sizeof why, "%lu pinned copies, %llu pinned bytes: %.2f copies of %zu bytes down and up",
                 busy.copies_pinned, busy.bytes_pinned, (double)busy.bytes_pinned / (2.0 * (double)N), N);
        check(busy.bytes_pinned > 0 && busy.bytes_pinned % (2 * N) == 0, "stage.created.whole_copies_through_slots",
              why);
    }
    /* the staging buffer outlives the created context: allocated in the
     * primary one (cuCtxDestroy frees what was allocated in the context) */
    snprintf(why, sizeof why, "%lu pinned allocations, %lu of them in the created context", busy.pinned_allocs,
             busy.pinned_allocs_created_ctx);
    check(busy.pinned_allocs_created_ctx == 0, "stage.created.buffer_in_primary_context", why);
    CU(cuCtxSetCurrent(primary));
    CUDA(cudaStreamSynchronize(k));
    CUDA(cudaStreamDestroy(k));
    CU(cuCtxSetCurrent(created));

    /* the engine is free again: after a recheck (run.sh: every 150 ms, so
     * three or more in this half second) the copies go native */
    if (expect_staged && counts_in_time) {
        for (double t0 = now_ms(); now_ms() - t0 < 500;) {
            CUDA(cudaMemcpyAsync(c.dst, c.src, N, cudaMemcpyDeviceToDevice, c.s));
            CUDA(cudaStreamSynchronize(c.s));
            sleep_ms(8);
        }
        fakecuda_reset_stats();
        for (int r = 0; r < 10; r++)
            CUDA(cudaMemcpyAsync(c.dst, c.src, N, cudaMemcpyDeviceToDevice, c.s));
        CUDA(cudaStreamSynchronize(c.s));
        struct fakecuda_stats idle;
        fakecuda_stats(&idle);
        snprintf(why, sizeof why, "%lu pinned copies, %lu same-device copies", idle.copies_pinned, idle.copies_d2d);
        check_timing(idle.copies_pinned == 0 && idle.copies_d2d == 10, "stage.created.back_to_native", why);
    }
    CU(cuCtxDestroy(created));
    CU(cuCtxSetCurrent(primary));
}

/* The kernel and the copies in the primary context: the first copy waits
 * for the kernel's end, staged or not; the data and the order hold. */
static void primary_context(int *bad)
{
    struct copier c;
    copier_make(&c);
    bad[0] = bad[1] = 0;
    cudaStream_t k;
    CUDA(cudaStreamCreateWithFlags(&k, cudaStreamNonBlocking));
    fakecuda_reset_stats();
    double t_kernel = now_ms();
    occupy(k, KERNEL_MS);
    sleep_ms(5);
    double first = rounds(&c, bad);
    double left = KERNEL_MS - (now_ms() - t_kernel - first); /* what was left of the kernel at the first round */
    struct fakecuda_stats busy;
    fakecuda_stats(&busy);
    char why[200];
    snprintf(why, sizeof why, "stream s saw %d bad rounds, stream t %d", bad[0], bad[1]);
    check(bad[0] == 0 && bad[1] == 0, "stage.primary.data_and_order", why);
    snprintf(why, sizeof why, "first round %.1f ms (the kernel had %.1f ms left), %lu kernel-end waits", first,
             left, busy.kernel_end_waits);
    check_timing(first >= 0.8 * left && busy.kernel_end_waits == 1, "stage.primary.first_waits_kernel_end", why);
    CUDA(cudaStreamSynchronize(k));
    CUDA(cudaStreamDestroy(k));
}

int main(int argc, char **argv)
{
    bool pieces = argc > 1 && strcmp(argv[1], "pieces") == 0;
    bool expect_staged = pieces || (argc > 1 && strcmp(argv[1], "staged") == 0);
    if (argc > 2)
        N = strtoull(argv[2], NULL, 10);
    size_t sz1[] = {sizeof(double)}, szf[] = {sizeof(void *), sizeof(size_t), sizeof(unsigned)},
           szc[] = {sizeof(void *), sizeof(size_t), sizeof(unsigned), sizeof(int *)};
    fakecuda_register_kernel((const void *)sleep_kernel, 1, sz1);
    fakecuda_register_kernel((const void *)fill_kernel, 3, szf);
    fakecuda_register_kernel((const void *)check_kernel, 4, szc);
    CUDA(cudaSetDevice(0));
    CUDA(cudaFree(0)); /* the primary context, current */
    int *bad; /* portable: the checks run in both contexts */
    CUDA(cudaHostAlloc((void **)&bad, 2 * sizeof(int), cudaHostAllocPortable));
    created_context(expect_staged, !pieces, bad);
    primary_context(bad);
    return failures != 0;
}
