/* percall.c - what one call costs the caller on a GPU, natively and under
 * the shim (run it both ways; tools/bench/percall.sh): an empty kernel
 * launch, and a 4 KiB cudaMemcpyAsync H2D from pinned memory, each on a
 * non-blocking stream, PERCALL_N times after 1000 uncounted (the
 * per-call cost in steady state; the first-call costs are smallcopy's).
 * Prints "PERCALL name median_ns p99_ns". */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels.h"

/* kernels.o reports a failed launch through the scenarios' scn_ck */
void scn_ck(cudaError_t err, const char *what, const char *file, int line)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "%s:%d %s: %s\n", file, line, what, cudaGetErrorString(err));
        exit(1);
    }
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *name, double *t, int n)
{
    qsort(t, (size_t)n, sizeof t[0], cmp);
    printf("PERCALL %s %.0f %.0f\n", name, t[n / 2], t[n * 99 / 100]);
}

int main(void)
{
    int n = getenv("PERCALL_N") ? atoi(getenv("PERCALL_N")) : 20000;
    double *t = malloc(sizeof(double) * (size_t)n);
    cudaStream_t s;
    void *h, *d;
    if (t == NULL || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMallocHost(&h, 4096) != cudaSuccess || cudaMalloc(&d, 4096) != cudaSuccess)
        return 1;
    for (int i = 0; i < 1000; i++) {
        scn_kernel_empty(s);
        cudaMemcpyAsync(d, h, 4096, cudaMemcpyHostToDevice, s);
    }
    cudaStreamSynchronize(s);
    for (int i = 0; i < n; i++) {
        double t0 = now_ns();
        scn_kernel_empty(s);
        t[i] = now_ns() - t0;
        if (i % 256 == 255)
            cudaStreamSynchronize(s); /* the queue stays short */
    }
    cudaStreamSynchronize(s);
    report("launch_empty_kernel", t, n);
    for (int i = 0; i < n; i++) {
        double t0 = now_ns();
        cudaMemcpyAsync(d, h, 4096, cudaMemcpyHostToDevice, s);
        t[i] = now_ns() - t0;
        if (i % 256 == 255)
            cudaStreamSynchronize(s);
    }
    cudaStreamSynchronize(s);
    report("pinned_h2d_4k_async", t, n);
    return 0;
}
