/* case_b_pageable_h2d.c - case B: cudaMemcpyAsync host-to-device from
 * pageable (malloc) memory. Above about 1 MiB the native call waits for the
 * stream to drain (measured on a GPU: 16 MiB behind a 200 ms kernel held the
 * caller 204 ms).
 *
 * Tests (argv or SCN_TESTS; default all):
 *   held_small   SCN_B_SMALL_BYTES (16 MiB) behind a SCN_B_KERNEL_MS (200 ms)
 *                kernel on the same non-blocking stream: how long the call
 *                held the caller, when the copy was done; the caller
 *                overwrites the source as soon as the call returns and the
 *                device must still get the original bytes
 *   held_large   the same with SCN_B_LARGE_BYTES (256 MiB)
 *   throughput   SCN_B_LARGE_BYTES on an idle stream, call + synchronize:
 *                GB/s, best of SCN_REPS
 *   first_use_small, first_use_large
 *                a process's first copies, before anything else the
 *                program does (no warm-up): cudaMalloc, malloc and fill
 *                SCN_B_SMALL_BYTES (then SCN_B_LARGE_BYTES, after cudaFree
 *                and free of the first), a new non-blocking stream, one
 *                copy on the idle stream + synchronize, then a
 *                SCN_B_KERNEL_MS kernel and the same copy, timed: how long
 *                it held the caller, the source overwritten at once and
 *                checked on the device
 *   freed        SCN_B_FREED_BYTES (64 MiB) from fresh malloc memory behind a
 *                SCN_B_FREED_KERNEL_MS (50 ms) kernel, SCN_B_FREED_ROUNDS (3)
 *                times: the caller memsets the source and frees it as soon
 *                as the call returns; how long each call held the caller
 *                (first round, median and worst), the device checked each
 *                round. make bench runs it alone in a fresh process too
 *                (run case_b_freed), so that its first round is the
 *                process's first copy
 *   link         the link's own bandwidth: SCN_B_LARGE_BYTES from pinned
 *                memory (cudaMallocHost) on an idle stream, call +
 *                synchronize, best of SCN_REPS; with host_copy it bounds
 *                what any pageable H2D can reach (the throughput row's
 *                target derives from both)
 *   host_copy    the host's own copy bandwidth, which bounds a caller that
 *                must read its whole source before it returns: SCN_B_LARGE_BYTES
 *                of pageable memory copied into memory already mapped by
 *                SCN_B_HOST_THREADS (16) threads, best of SCN_REPS; the
 *                first_use and freed rows' targets derive from it */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "scenario.h"

static double kernel_ms;
static int reps;

static void test_held(const char *test, unsigned char *src, void *dst, size_t n, cudaStream_t s, uint64_t seed)
{
    scn_test(test, 0);
    scn_fill(src, n, seed);
    SCN_CK(cudaMemset(dst, 0, n));
    SCN_CK(cudaDeviceSynchronize());
    cudaEvent_t ev;
    SCN_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));

    scn_kernel_sleep(s, kernel_ms);
    double t0 = scn_now_ms();
    SCN_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s));
    double held = scn_now_ms() - t0;
    /* the caller may reuse the source at once: the copy must have taken it */
    scn_fill(src, n, seed + 1000);
    SCN_CK(cudaEventRecord(ev, s));
    double done = scn_poll_event(ev) - t0;
    bool ok = scn_device_verify(0, dst, n, seed);
    scn_result(test, "bytes=%zu kernel_ms=%.3f held_ms=%.3f done_ms=%.3f ok=%d", n, kernel_ms, held, done, ok);
    SCN_CK(cudaEventDestroy(ev));
    scn_test_end();
}

static void test_throughput(unsigned char *src, void *dst, size_t n, cudaStream_t s)
{
    scn_test("throughput", 0);
    scn_fill(src, n, 7);
    SCN_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s)); /* warm-up */
    SCN_CK(cudaStreamSynchronize(s));
    double best = 1e30, call = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = scn_now_ms();
        SCN_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s));
        double t1 = scn_now_ms();
        SCN_CK(cudaStreamSynchronize(s));
        double t2 = scn_now_ms();
        if (t2 - t0 < best)
            best = t2 - t0;
        if (t1 - t0 > call)
            call = t1 - t0;
    }
    bool ok = scn_device_verify(0, dst, n, 7);
    scn_result("throughput", "bytes=%zu reps=%d gbps=%.1f call_ms=%.3f ok=%d", n, reps, scn_gbps(n, best), call, ok);
    scn_test_end();
}

static void test_first_use(const char *test, size_t n, uint64_t seed)
{
    scn_test(test, 0);
    void *dst;
    SCN_CK(cudaMalloc(&dst, n));
    unsigned char *src = malloc(n);
    if (src == NULL) {
        scn_result(test, "error=malloc ok=0");
        SCN_CK(cudaFree(dst));
        scn_test_end();
        return;
    }
    scn_fill(src, n, seed);
    cudaStream_t s;
    SCN_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    SCN_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s)); /* the first, on the idle stream */
    SCN_CK(cudaStreamSynchronize(s));
    scn_kernel_sleep(s, kernel_ms);
    double t0 = scn_now_ms();
    SCN_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s));
    double held = scn_now_ms() - t0;
    scn_fill(src, n, seed + 1000); /* the caller reuses the source at once */
    cudaEvent_t ev;
    SCN_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    SCN_CK(cudaEventRecord(ev, s));
    double done = scn_poll_event(ev) - t0;
    bool ok = scn_device_verify(0, dst, n, seed);
    scn_result(test, "bytes=%zu kernel_ms=%.3f held_ms=%.3f done_ms=%.3f ok=%d", n, kernel_ms, held, done, ok);
    SCN_CK(cudaEventDestroy(ev));
    SCN_CK(cudaStreamDestroy(s));
    SCN_CK(cudaFree(dst));
    free(src);
    scn_test_end();
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_freed(void)
{
    scn_test("freed", 0);
    size_t n = scn_env_size("B_FREED_BYTES", 64 * SCN_MIB, 16 * SCN_MIB);
    double freed_kernel_ms = scn_env_double("B_FREED_KERNEL_MS", 50, 50);
    int rounds = (int)scn_env_long("B_FREED_ROUNDS", 3, 3);
    if (rounds < 1 || rounds > 64)
        rounds = 3;
    void *dst;
    SCN_CK(cudaMalloc(&dst, n));
    cudaStream_t s;
    SCN_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    double held[64];
    bool ok = true;
    for (int r = 0; r < rounds; r++) {
        unsigned char *src = malloc(n);
        if (src == NULL) {
            scn_result("freed", "error=malloc ok=0");
            ok = false;
            rounds = r;
            break;
        }
        scn_fill(src, n, 40 + (uint64_t)r);
        scn_kernel_sleep(s, freed_kernel_ms);
        double t0 = scn_now_ms();
        SCN_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s));
        held[r] = scn_now_ms() - t0;
        memset(src, 0xee, n); /* the caller is done with it: overwritten, then given back */
        free(src);
        SCN_CK(cudaStreamSynchronize(s));
        ok = scn_device_verify(0, dst, n, 40 + (uint64_t)r) && ok;
    }
    if (rounds > 0) {
        double first = held[0], sorted[64];
        memcpy(sorted, held, sizeof(double) * (size_t)rounds);
        qsort(sorted, (size_t)rounds, sizeof(double), cmp_double);
        scn_result("freed", "bytes=%zu kernel_ms=%.3f rounds=%d first_ms=%.3f median_ms=%.3f held_ms=%.3f ok=%d", n,
                   freed_kernel_ms, rounds, first, sorted[rounds / 2], sorted[rounds - 1], ok);
    }
    SCN_CK(cudaStreamDestroy(s));
    SCN_CK(cudaFree(dst));
    scn_test_end();
}

static void test_link(void *dst, size_t n, cudaStream_t s)
{
    scn_test("link", 0);
    unsigned char *pinned;
    SCN_CK(cudaMallocHost((void **)&pinned, n));
    scn_fill(pinned, n, 9);
    double best = scn_best_copy_ms(dst, pinned, n, cudaMemcpyHostToDevice, s, reps);
    bool ok = scn_device_verify(0, dst, n, 9);
    scn_result("link", "bytes=%zu reps=%d gbps=%.1f ok=%d", n, reps, scn_gbps(n, best), ok);
    SCN_CK(cudaFreeHost(pinned));
    scn_test_end();
}

struct host_part {
    unsigned char *dst;
    const unsigned char *src;
    size_t bytes;
};

static void *host_part_copy(void *arg)
{
    struct host_part *p = arg;
    memcpy(p->dst, p->src, p->bytes);
    return NULL;
}

static void test_host_copy(unsigned char *src, size_t n)
{
    scn_test("host_copy", 0);
    unsigned threads = (unsigned)scn_env_long("B_HOST_THREADS", 16, 8);
    if (threads < 1 || threads > 64)
        threads = 16;
    unsigned char *dst = malloc(n);
    if (dst == NULL) {
        scn_result("host_copy", "error=malloc ok=0");
        scn_test_end();
        return;
    }
    memset(dst, 1, n); /* mapped, as pinned memory is */
    scn_fill(src, n, 5);
    pthread_t tid[64];
    struct host_part part[64];
    size_t each = (n / threads + 4095) & ~(size_t)4095;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = scn_now_ms();
        bool started[64] = {false};
        for (unsigned t = 0; t < threads && (size_t)t * each < n; t++) {
            size_t off = (size_t)t * each;
            part[t] = (struct host_part){dst + off, src + off, n - off < each ? n - off : each};
            started[t] = pthread_create(&tid[t], NULL, host_part_copy, &part[t]) == 0;
            if (!started[t])
                host_part_copy(&part[t]);
        }
        for (unsigned t = 0; t < threads && (size_t)t * each < n; t++)
            if (started[t])
                pthread_join(tid[t], NULL);
        double ms = scn_now_ms() - t0;
        if (ms < best)
            best = ms;
    }
    bool ok = memcmp(dst, src, n) == 0;
    scn_result("host_copy", "bytes=%zu threads=%u gbps=%.1f ok=%d", n, threads, scn_gbps(n, best), ok);
    free(dst);
    scn_test_end();
}

int main(int argc, char **argv)
{
    scn_begin("B", argc, argv);
    size_t small = scn_env_size("B_SMALL_BYTES", 16 * SCN_MIB, 16 * SCN_MIB);
    size_t large = scn_env_size("B_LARGE_BYTES", 256 * SCN_MIB, 64 * SCN_MIB);
    kernel_ms = scn_env_double("B_KERNEL_MS", 200, 50);
    reps = (int)scn_env_long("REPS", 3, 2);
    size_t most = small > large ? small : large;

    SCN_CK(cudaSetDevice(0));
    /* first, in a process that has done nothing else yet */
    if (scn_want("first_use_small"))
        test_first_use("first_use_small", small, 31);
    if (scn_want("first_use_large"))
        test_first_use("first_use_large", large, 32);
    if (scn_want("freed"))
        test_freed();
    if (!scn_want("held_small") && !scn_want("held_large") && !scn_want("throughput") && !scn_want("link") &&
        !scn_want("host_copy"))
        return scn_end(); /* a run of the first copies alone: no warm-up after them */
    unsigned char *src = malloc(most);
    if (src == NULL) {
        scn_result("setup", "error=malloc ok=0");
        return scn_end();
    }
    void *dst;
    SCN_CK(cudaMalloc(&dst, most));
    cudaStream_t s;
    SCN_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    /* warm-up: what the runtime (or a shim: its pinned pool) sets up once,
     * at the largest size measured, as a training loop's first step would */
    scn_fill(src, most, 20);
    SCN_CK(cudaMemcpyAsync(dst, src, most, cudaMemcpyHostToDevice, s));
    SCN_CK(cudaStreamSynchronize(s));
    /* setup that outlives the warm-up's call: unstall pins its staging pool
     * on a thread of its own after a process's first large copy, which goes
     * native meanwhile (docs/pipelines.md; 256 MiB in about 0.1-0.15 s) */
    scn_sleep_ms(500);

    if (scn_want("held_small"))
        test_held("held_small", src, dst, small, s, 21);
    if (scn_want("held_large"))
        test_held("held_large", src, dst, large, s, 22);
    if (scn_want("throughput"))
        test_throughput(src, dst, large, s);
    if (scn_want("link"))
        test_link(dst, large, s);
    if (scn_want("host_copy"))
        test_host_copy(src, large);

    SCN_CK(cudaStreamDestroy(s));
    SCN_CK(cudaFree(dst));
    free(src);
    return scn_end();
}
