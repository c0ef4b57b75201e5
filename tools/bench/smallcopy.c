/* smallcopy.c - what a pageable copy costs the caller, size by size, with
 * the first call of each row kept (no warm-up hides it): the program runs
 * once natively and once under the shim (tools/bench/smallcopy.sh), and the
 * two sets of rows are printed side by side.
 *
 * Rows run from the smallest size up, so the process's very first copy is
 * the first call of the first row. Each row: `reps` calls of one form on an
 * idle GPU, timed on the host around the call (and its synchronize, for the
 * asynchronous forms):
 *   h2d        cudaMemcpy host-to-device from malloc memory
 *   d2h        cudaMemcpy device-to-host into malloc memory
 *   d2h_async  cudaMemcpyAsync device-to-host on a created stream + cudaStreamSynchronize
 *   h2d_async  cudaMemcpyAsync host-to-device on a created stream + cudaStreamSynchronize
 *   peer_async cudaMemcpyPeerAsync from device 0 to device 1, peer access never enabled (case A:
 *              the driver stages it through the host) + cudaStreamSynchronize; only with two devices
 *   d2d_async  cudaMemcpyAsync device-to-device between two buffers of device 0 on a created stream
 *              + cudaStreamSynchronize (what case D's detection watches; nothing is rewritten on an
 *              idle GPU)
 * Output, one line a row:
 *   SMALLCOPY op=<op> bytes=<n> reps=<r> first_us=<t> median_us=<t> p99_us=<t> max_us=<t> ok=<0|1> gap_us=<g>
 * ok: the bytes that came back are the bytes that went (checked after the row);
 * gap_us: the sleep before each call but the first (SMALLCOPY_GAP_US, below).
 *
 * Usage: smallcopy [MAX_BYTES [OP...]]   (default 256 MiB, every op; the script
 * runs one op a process, so that each op's first row holds a first copy)
 * Environment: SMALLCOPY_REPS (default 400 for rows up to 1 MiB, fewer above,
 * so that a row moves at most about 4 GiB); SMALLCOPY_MIN (bytes: smaller rows
 * are left out, to study the large ones alone); SMALLCOPY_SLOW (set: also a
 * SLOW line per row, the indices and times of its calls over twice the median
 * + 50 us: at the row's start, as while the pool grows, or anywhere);
 * SMALLCOPY_TIMES (set: also a SMALLCOPY_TIMES line per row with every call's
 * time in call order, which tools/bench/smallcopy_table.py pools over the
 * processes of several rounds); SMALLCOPY_GAP_US (microseconds the program
 * sleeps between two calls, outside the timing: each call then starts as a
 * training step's copy does, after the GPU and the host's other threads have
 * been idle; default 0, back to back). */
#define BENCH_NAME "smallcopy"
#include "bench_cuda.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum op { OP_H2D, OP_D2H, OP_D2H_ASYNC, OP_H2D_ASYNC, OP_PEER_ASYNC, OP_D2D_ASYNC, OP_COUNT };
static const char *const op_name[OP_COUNT] = { "h2d", "d2h", "d2h_async", "h2d_async", "peer_async", "d2d_async" };

static void *dev1;  /* peer_async's destination, on device 1 (NULL: one device) */
static void *dev0b; /* d2d_async's destination, on device 0 */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static unsigned reps_for(size_t bytes)
{
    const char *env = getenv("SMALLCOPY_REPS");
    if (env != NULL && atoi(env) > 0)
        return (unsigned)atoi(env);
    if (bytes <= (1u << 20))
        return 400;
    size_t r = ((size_t)4 << 30) / bytes;
    return r < 5 ? 5 : r > 400 ? 400 : (unsigned)r;
}

/* A distinct byte pattern per row, so that a stale byte is caught. */
static void fill(unsigned char *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (unsigned char)(x >> 24);
    }
}

/* SMALLCOPY_GAP_US: microseconds between two calls of a row (0: none). */
static long gap_us(void)
{
    const char *env = getenv("SMALLCOPY_GAP_US");
    return env != NULL && atol(env) > 0 ? atol(env) : 0;
}

static void row(enum op op, size_t bytes, unsigned char *host, unsigned char *back, void *dev, cudaStream_t s,
                unsigned seed)
{
    unsigned reps = reps_for(bytes);
    long gap = gap_us();
    double *t = malloc(reps * sizeof *t);
    if (t == NULL)
        exit(1);
    bool to_device = op == OP_H2D || op == OP_H2D_ASYNC;
    fill(host, bytes, seed);
    if (op == OP_PEER_ASYNC) {
        CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
        CHECK(cudaSetDevice(1)); /* dev1's own device: no peer access to reach it from 0 */
        CHECK(cudaMemset(dev1, 0, bytes));
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaSetDevice(0));
    } else if (op == OP_D2D_ASYNC) {
        CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemset(dev0b, 0, bytes));
        CHECK(cudaDeviceSynchronize());
        memset(back, 0xa5, bytes);
    } else if (!to_device) { /* the device holds the pattern; the host buffer is poisoned */
        CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
        memset(back, 0xa5, bytes);
    }
    for (unsigned i = 0; i < reps; i++) {
        if (gap > 0 && i > 0)
            nanosleep(&(struct timespec){.tv_sec = gap / 1000000, .tv_nsec = gap % 1000000 * 1000}, NULL);
        double t0 = bench_now_us();
        switch (op) {
        case OP_H2D: CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice)); break;
        case OP_D2H: CHECK(cudaMemcpy(back, dev, bytes, cudaMemcpyDeviceToHost)); break;
        case OP_D2H_ASYNC:
            CHECK(cudaMemcpyAsync(back, dev, bytes, cudaMemcpyDeviceToHost, s));
            CHECK(cudaStreamSynchronize(s));
            break;
        case OP_H2D_ASYNC:
            CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
            CHECK(cudaStreamSynchronize(s));
            break;
        case OP_PEER_ASYNC:
            CHECK(cudaMemcpyPeerAsync(dev1, 1, dev, 0, bytes, s));
            CHECK(cudaStreamSynchronize(s));
            break;
        case OP_D2D_ASYNC:
            CHECK(cudaMemcpyAsync(dev0b, dev, bytes, cudaMemcpyDeviceToDevice, s));
            CHECK(cudaStreamSynchronize(s));
            break;
        default: break;
        }
        t[i] = bench_now_us() - t0;
    }
    if (to_device) /* what landed on the device comes back through a plain copy */
        CHECK(cudaMemcpy(back, dev, bytes, cudaMemcpyDeviceToHost));
    if (op == OP_PEER_ASYNC)
        CHECK(cudaMemcpy(back, dev1, bytes, cudaMemcpyDeviceToHost));
    if (op == OP_D2D_ASYNC)
        CHECK(cudaMemcpy(back, dev0b, bytes, cudaMemcpyDeviceToHost));
    int ok = memcmp(host, back, bytes) == 0;
    double first = t[0];
    if (getenv("SMALLCOPY_TIMES") != NULL) { /* every call, in order: smallcopy_table.py pools the rounds */
        printf("SMALLCOPY_TIMES op=%s bytes=%zu us=", op_name[op], bytes);
        for (unsigned i = 0; i < reps; i++)
            printf("%s%.1f", i ? "," : "", t[i]);
        printf("\n");
    }
    double *in_order = getenv("SMALLCOPY_SLOW") != NULL ? malloc(reps * sizeof *t) : NULL;
    if (in_order != NULL)
        memcpy(in_order, t, reps * sizeof *t);
    qsort(t, reps, sizeof *t, cmp_double);
    if (in_order != NULL) { /* which calls were slow: at the row's start (pool growth) or anywhere */
        printf("SLOW op=%s bytes=%zu calls over twice the median + 50 us (index=us):", op_name[op], bytes);
        for (unsigned i = 0, shown = 0; i < reps && shown < 24; i++)
            if (in_order[i] > 2 * t[reps / 2] + 50) {
                printf(" %u=%.0f", i, in_order[i]);
                shown++;
            }
        printf("\n");
        free(in_order);
    }
    size_t p99 = (size_t)(0.99 * (reps - 1) + 0.5);
    printf("SMALLCOPY op=%s bytes=%zu reps=%u first_us=%.1f median_us=%.1f p99_us=%.1f max_us=%.1f ok=%d gap_us=%ld\n",
           op_name[op], bytes, reps, first, t[reps / 2], t[p99], t[reps - 1], ok, gap);
    fflush(stdout);
    free(t);
}

int main(int argc, char **argv)
{
    size_t max_bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)256 << 20;
    static const size_t sizes[] = { 4, 4 << 10, 64 << 10, 256 << 10, 1 << 20, 2 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20 };
    const char *min_env = getenv("SMALLCOPY_MIN");
    size_t min_bytes = min_env != NULL ? strtoull(min_env, NULL, 0) : 0;
    size_t largest = 4;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] <= max_bytes)
            largest = sizes[i];
    unsigned char *host = malloc(largest), *back = malloc(largest);
    if (host == NULL || back == NULL)
        return 1;
    memset(host, 0, largest); /* pages mapped before timing, natively and under the shim alike */
    memset(back, 0, largest);
    void *dev;
    cudaStream_t s;
    CHECK(cudaMalloc(&dev, largest));
    CHECK(cudaMalloc(&dev0b, largest));
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices >= 2) {
        CHECK(cudaSetDevice(1));
        CHECK(cudaMalloc(&dev1, largest));
        CHECK(cudaSetDevice(0));
    }
    CHECK(cudaStreamCreate(&s));
    unsigned seed = 1;
    for (int op = 0; op < OP_COUNT; op++) {
        bool wanted = argc <= 2;
        for (int a = 2; a < argc; a++)
            wanted |= strcmp(argv[a], op_name[op]) == 0;
        if (!wanted || (op == OP_PEER_ASYNC && dev1 == NULL))
            continue;
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && sizes[i] <= max_bytes; i++)
            if (sizes[i] >= min_bytes)
                row((enum op)op, sizes[i], host, back, dev, s, seed++);
    }
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(dev));
    CHECK(cudaFree(dev0b));
    if (dev1 != NULL)
        CHECK(cudaFree(dev1));
    free(host);
    free(back);
    return 0;
}
