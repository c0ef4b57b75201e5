/* case_c_pageable_d2h.c - case C: cudaMemcpyAsync device-to-host into
 * pageable (malloc) memory. The native call returns only when the data is in
 * place and holds a runtime lock that other threads' launches wait on
 * (the tests launch_latency and deadlock).
 *
 * Tests (argv or SCN_TESTS; default all, deadlock last):
 *   throughput      SCN_C_BYTES (256 MiB), call + synchronize (what
 *                   PyTorch's .cpu() does): GB/s into warm memory and into
 *                   fresh (never touched) memory, best of SCN_REPS
 *   link            the link's own bandwidth: SCN_C_BYTES into pinned memory
 *                   (cudaMallocHost) on an idle stream, call + synchronize,
 *                   best of SCN_REPS; with case B's host_copy it bounds what
 *                   any pageable D2H can reach (the throughput row's target)
 *   launch_latency  thread B launches empty kernels on its own non-blocking
 *                   stream for SCN_C_LAT_MS while thread A copies
 *                   SCN_C_LOOP_BYTES D2H into pageable memory in a loop
 *                   (SCN_C_GAP_MS between copies): p50/p99/max of B's
 *                   launch call, against a baseline without thread A
 *   deadlock        as a user reported it: stream 0 waits for an event of
 *                   a stream that a host function blocks until another
 *                   thread signals; that thread first launches an empty
 *                   kernel on an unrelated stream; the main thread copies
 *                   SCN_C_DEADLOCK_BYTES (4, as reported) D2H on stream 0.
 *                   SCN_C_DEADLOCK_WARMUP=1: one such copy first (not in
 *                   the report), so that one-time setup is out of the way.
 *                   The empty kernel is launched once beforehand (lazy
 *                   module loading would deadlock on its own on a GPU);
 *                   SCN_C_DEADLOCK_KERNEL_WARMUP=0: as reported.
 *                   Under a SCN_C_DEADLOCK_S watchdog: completed=1, or
 *                   deadlock=1 and exit status 3. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "latency.h"
#include "scenario.h"

static int reps;

/* --- throughput ------------------------------------------------------------------------- */

static void test_throughput(const void *dsrc, size_t n, uint64_t seed, cudaStream_t s)
{
    scn_test("throughput", 0);
    unsigned char *warm = malloc(n);
    if (warm == NULL) {
        scn_result("throughput", "error=malloc ok=0");
        return;
    }
    memset(warm, 0, n);
    SCN_CK(cudaMemcpyAsync(warm, dsrc, n, cudaMemcpyDeviceToHost, s)); /* warm-up */
    SCN_CK(cudaStreamSynchronize(s));
    bool ok = scn_verify(warm, n, seed);
    double best = 1e30, call = 0;
    for (int r = 0; r < reps; r++) {
        memset(warm, 0, n);
        double t0 = scn_now_ms();
        SCN_CK(cudaMemcpyAsync(warm, dsrc, n, cudaMemcpyDeviceToHost, s));
        double t1 = scn_now_ms();
        SCN_CK(cudaStreamSynchronize(s));
        double t2 = scn_now_ms();
        if (t2 - t0 < best)
            best = t2 - t0;
        if (t1 - t0 > call)
            call = t1 - t0;
        ok = ok && scn_verify(warm, n, seed);
    }
    free(warm);
    double best_fresh = 1e30;
    for (int r = 0; r < reps; r++) {
        unsigned char *fresh = malloc(n); /* large: its own mapping, never touched */
        if (fresh == NULL) {
            ok = false;
            break;
        }
        double t0 = scn_now_ms();
        SCN_CK(cudaMemcpyAsync(fresh, dsrc, n, cudaMemcpyDeviceToHost, s));
        SCN_CK(cudaStreamSynchronize(s));
        double t = scn_now_ms() - t0;
        if (t < best_fresh)
            best_fresh = t;
        ok = ok && scn_verify(fresh, n, seed);
        free(fresh);
    }
    scn_result("throughput", "bytes=%zu reps=%d gbps=%.1f fresh_gbps=%.1f call_ms=%.3f ok=%d", n, reps,
               scn_gbps(n, best), scn_gbps(n, best_fresh), call, ok);
    scn_test_end();
}

static void test_link(const void *dsrc, size_t n, uint64_t seed, cudaStream_t s)
{
    scn_test("link", 0);
    unsigned char *pinned;
    SCN_CK(cudaMallocHost((void **)&pinned, n));
    memset(pinned, 0, n);
    double best = scn_best_copy_ms(pinned, dsrc, n, cudaMemcpyDeviceToHost, s, reps);
    bool ok = scn_verify(pinned, n, seed);
    scn_result("link", "bytes=%zu reps=%d gbps=%.1f ok=%d", n, reps, scn_gbps(n, best), ok);
    SCN_CK(cudaFreeHost(pinned));
    scn_test_end();
}

/* --- launch latency under a D2H loop ----------------------------------------------------- */

static void test_launch_latency(const void *dsrc, size_t dev_bytes, uint64_t seed)
{
    scn_test("launch_latency", 0);
    struct scn_latency l = {
        .dsrc = dsrc,
        .n = scn_env_size("C_LOOP_BYTES", 256 * SCN_MIB, 64 * SCN_MIB),
        .seed = seed,
        .gap_ms = scn_env_double("C_GAP_MS", 0, 2),
        .base_ms = scn_env_double("C_BASE_MS", 500, 200),
        .dur_ms = scn_env_double("C_LAT_MS", 2000, 400),
    };
    if (l.n > dev_bytes)
        l.n = dev_bytes;
    l.host = malloc(l.n); /* pageable */
    if (l.host == NULL) {
        scn_result("launch_latency", "error=malloc ok=0");
        return;
    }
    memset(l.host, 0, l.n);
    if (!scn_launch_latency(&l)) {
        scn_result("launch_latency", "error=threads ok=0");
        free(l.host);
        return;
    }
    scn_result("launch_latency",
               "copy_bytes=%zu copies=%ld copy_ms=%.3f base_launches=%zu base_p99_ms=%.3f base_max_ms=%.3f "
               "launches=%zu p50_ms=%.3f p99_ms=%.3f max_ms=%.3f over_1ms=%zu ok=%d",
               l.n, l.copies, l.copy_ms, l.base_launches, l.base_p99_ms, l.base_max_ms, l.launches, l.p50_ms,
               l.p99_ms, l.max_ms, l.over_1ms, l.ok);
    free(l.host);
    scn_test_end();
}

/* --- deadlock ------------------------------------------------------------------------------- */

struct cpu_event {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool signalled;
};

/* A host function on cpu_block_stream: blocks it until the event is signalled. */
static void block_op_host_fn(void *arg)
{
    struct cpu_event *e = arg;
    pthread_mutex_lock(&e->mu);
    while (!e->signalled)
        pthread_cond_wait(&e->cond, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

struct launch_thread {
    cudaStream_t irrelevant;
    struct cpu_event *event;
    double delay_ms;
};

static void *launch_thread_main(void *arg)
{
    struct launch_thread *t = arg;
    SCN_CK(cudaSetDevice(0));
    scn_sleep_ms(t->delay_ms); /* so that the main thread is inside its copy, as reported */
    scn_kernel_empty(t->irrelevant); /* the reported program hangs here */
    pthread_mutex_lock(&t->event->mu);
    t->event->signalled = true;
    pthread_cond_broadcast(&t->event->cond);
    pthread_mutex_unlock(&t->event->mu);
    return NULL;
}

static void test_deadlock(void)
{
    size_t n = scn_env_size("C_DEADLOCK_BYTES", 4, 4);
    double timeout = scn_env_double("C_DEADLOCK_S", 10, 2);
    scn_test("deadlock", timeout);
    char extra[128];
    snprintf(extra, sizeof extra, "bytes=%zu warmup=%d kernel_warmup=%d completed=0", n,
             scn_env_long("C_DEADLOCK_WARMUP", 0, 0) != 0, scn_env_long("C_DEADLOCK_KERNEL_WARMUP", 1, 1) != 0);
    scn_watchdog_extra(extra);

    SCN_CK(cudaSetDevice(0));
    unsigned char *h_input = malloc(n);
    void *input;
    if (h_input == NULL) {
        scn_result("deadlock", "error=malloc ok=0");
        return;
    }
    memset(h_input, 0, n);
    SCN_CK(cudaMalloc(&input, n));
    scn_device_fill(0, input, n, 41);
    bool warm = scn_env_long("C_DEADLOCK_WARMUP", 0, 0) != 0;
    if (warm) { /* a first copy of the same kind: one-time setup (a shim's pool) out of the way */
        SCN_CK(cudaMemcpyAsync(h_input, input, n, cudaMemcpyDeviceToHost, 0));
        SCN_CK(cudaStreamSynchronize(0));
        memset(h_input, 0, n);
    }

    cudaStream_t cpu_block_stream, irrelevant_stream;
    SCN_CK(cudaStreamCreateWithFlags(&cpu_block_stream, cudaStreamNonBlocking));
    SCN_CK(cudaStreamCreateWithFlags(&irrelevant_stream, cudaStreamNonBlocking));
    cudaEvent_t cpu_unblock_event;
    SCN_CK(cudaEventCreateWithFlags(&cpu_unblock_event, cudaEventDisableTiming));

    /* The empty kernel's first launch: on a real GPU with lazy module
     * loading (CUDA_MODULE_LOADING=LAZY, the default) a first launch loads
     * the kernel, which can wait for the device's pending work and deadlock
     * by itself, whatever the copy does. Launched once here unless
     * SCN_C_DEADLOCK_KERNEL_WARMUP=0 (as reported). */
    bool kernel_warm = scn_env_long("C_DEADLOCK_KERNEL_WARMUP", 1, 1) != 0;
    if (kernel_warm) {
        scn_kernel_empty(irrelevant_stream);
        SCN_CK(cudaStreamSynchronize(irrelevant_stream));
    }

    struct cpu_event ev = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    SCN_CK(cudaLaunchHostFunc(cpu_block_stream, block_op_host_fn, &ev));
    SCN_CK(cudaEventRecord(cpu_unblock_event, cpu_block_stream));
    SCN_CK(cudaStreamWaitEvent(0, cpu_unblock_event, 0));

    struct launch_thread lt = {irrelevant_stream, &ev, scn_env_double("C_DEADLOCK_DELAY_MS", 50, 50)};
    pthread_t t;
    if (pthread_create(&t, NULL, launch_thread_main, &lt) != 0) {
        scn_result("deadlock", "error=pthread_create ok=0");
        return;
    }
    double t0 = scn_now_ms();
    SCN_CK(cudaMemcpyAsync(h_input, input, n, cudaMemcpyDeviceToHost, 0)); /* the reported copy */
    double call = scn_now_ms() - t0;
    bool in_place = scn_verify(h_input, n, 41); /* native: the data is in place on return */
    SCN_CK(cudaStreamSynchronize(0));
    pthread_join(t, NULL);
    double done = scn_now_ms() - t0;
    bool ok = scn_verify(h_input, n, 41);
    scn_result("deadlock",
               "bytes=%zu warmup=%d kernel_warmup=%d completed=1 deadlock=0 call_ms=%.3f done_ms=%.3f in_place=%d ok=%d",
               n, warm, kernel_warm, call, done, in_place, ok);

    SCN_CK(cudaEventDestroy(cpu_unblock_event));
    SCN_CK(cudaStreamDestroy(cpu_block_stream));
    SCN_CK(cudaStreamDestroy(irrelevant_stream));
    SCN_CK(cudaFree(input));
    free(h_input);
    scn_test_end();
}

int main(int argc, char **argv)
{
    scn_begin("C", argc, argv);
    size_t n = scn_env_size("C_BYTES", 256 * SCN_MIB, 64 * SCN_MIB);
    reps = (int)scn_env_long("REPS", 3, 2);

    if (scn_want("throughput") || scn_want("link") || scn_want("launch_latency")) {
        SCN_CK(cudaSetDevice(0));
        void *dsrc;
        size_t dev_bytes = n;
        SCN_CK(cudaMalloc(&dsrc, dev_bytes));
        scn_device_fill(0, dsrc, dev_bytes, 31);
        cudaStream_t s;
        SCN_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        if (scn_want("throughput"))
            test_throughput(dsrc, n, 31, s);
        if (scn_want("link"))
            test_link(dsrc, n, 31, s);
        if (scn_want("launch_latency"))
            test_launch_latency(dsrc, dev_bytes, 31);
        SCN_CK(cudaStreamDestroy(s));
        SCN_CK(cudaFree(dsrc));
    }
    if (scn_want("deadlock"))
        test_deadlock();
    return scn_end();
}
