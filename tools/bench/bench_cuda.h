/* bench_cuda.h - what the standalone CUDA benchmark programs of tools/bench
 * share (smallcopy.c, firstcall.c, apicost.c, launch_beside.cu,
 * streamfirst.c, timedcopy.c; each compiled alone, by its script or by the
 * build line in its head): CHECK, which ends the program on a failed runtime call with the
 * call and its line, and the monotonic clock. Define BENCH_NAME (the
 * program's name, for the message) before including. */
#ifndef UNSTALL_BENCH_CUDA_H
#define UNSTALL_BENCH_CUDA_H

#include <cuda_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(call)                                                                                      \
    do {                                                                                                 \
        cudaError_t err_ = (call);                                                                       \
        if (err_ != cudaSuccess) {                                                                       \
            fprintf(stderr, BENCH_NAME ": %s failed: %s (line %d)\n", #call, cudaGetErrorName(err_), __LINE__); \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

static inline double bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline double bench_now_us(void)
{
    return bench_now_ns() / 1e3;
}

#endif
