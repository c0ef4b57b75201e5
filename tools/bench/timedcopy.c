/* timedcopy.c - what the building blocks of busy_engine_d2d's timed copy cost
 * natively (engine_late.c): a capture-mode exchange there and back, a
 * capture check, an event recorded before a same-device copy, the copy after
 * it, an event recorded after it, the pair's elapsed time read once done;
 * beside them the same copy alone, and the records through the driver's
 * cuEventRecord. Each row: N calls on a non-blocking stream, the stream
 * synchronized between iterations; the row's first call, median, p90, p99
 * and worst, in microseconds on the calling thread.
 *
 * GAP_US > 0 sleeps that long before the plain copy, before the capture-mode
 * exchange and before the driver's records: each then starts as a timed copy
 * does, at most once per busy_d2d_probe_ms, after the thread and the stream
 * were idle (what the first submission after such a pause costs, whichever
 * call it is, is the point).
 *
 * Usage: ./timedcopy [GAP_US [BYTES]]   (default 0 and 4096). GPU only. Build:
 *   gcc -O2 -I/usr/local/cuda/include tools/bench/timedcopy.c -o timedcopy \
 *       -L/usr/local/cuda/lib64 -lcudart -lcuda -Wl,-rpath,/usr/local/cuda/lib64
 */
#define BENCH_NAME "timedcopy"
#include "bench_cuda.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CALLS 600

enum row {
    PLAIN_COPY, EXCHANGE_TWICE, IS_CAPTURING, RECORD_START, COPY_AFTER_RECORD, RECORD_END, ELAPSED_DONE,
    CU_RECORD_START, COPY_AFTER_CU_RECORD, CU_RECORD_END, ROWS
};
static const char *const row_name[ROWS] = {
    "plain copy", "capture xchg x2", "isCapturing", "cudaEventRecord start", "copy after record",
    "cudaEventRecord end", "elapsed (done)", "cuEventRecord start", "copy after cuRec", "cuEventRecord end",
};
static double t[ROWS][CALLS];

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void pause_us(long gap)
{
    if (gap > 0)
        nanosleep(&(struct timespec){.tv_sec = gap / 1000000, .tv_nsec = gap % 1000000 * 1000}, NULL);
}

int main(int argc, char **argv)
{
    long gap = argc > 1 ? atol(argv[1]) : 0;
    size_t bytes = argc > 2 ? (size_t)atol(argv[2]) : 4096;
    void *src, *dst;
    cudaStream_t s;
    cudaEvent_t start, end;
    if (cudaMalloc(&src, bytes) != cudaSuccess || cudaMalloc(&dst, bytes) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&end) != cudaSuccess) {
        fprintf(stderr, "timedcopy: no GPU to measure\n");
        return 1;
    }
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s); /* the stream's set-up, not measured */
    cudaStreamSynchronize(s);
    for (int i = 0; i < CALLS; i++) {
        double t0, t1;
        pause_us(gap);
        t0 = bench_now_us();
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
        t[PLAIN_COPY][i] = bench_now_us() - t0;
        cudaStreamSynchronize(s);

        pause_us(gap);
        enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
        t0 = bench_now_us();
        cudaThreadExchangeStreamCaptureMode(&mode);
        cudaThreadExchangeStreamCaptureMode(&mode);
        t[EXCHANGE_TWICE][i] = bench_now_us() - t0;
        enum cudaStreamCaptureStatus status;
        t0 = bench_now_us();
        cudaStreamIsCapturing(s, &status);
        t[IS_CAPTURING][i] = bench_now_us() - t0;
        t0 = bench_now_us();
        cudaEventRecord(start, s);
        t1 = bench_now_us();
        t[RECORD_START][i] = t1 - t0;
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
        t0 = bench_now_us();
        t[COPY_AFTER_RECORD][i] = t0 - t1;
        cudaEventRecord(end, s);
        t[RECORD_END][i] = bench_now_us() - t0;
        cudaStreamSynchronize(s);
        float ms;
        t0 = bench_now_us();
        cudaEventElapsedTime(&ms, start, end);
        t[ELAPSED_DONE][i] = bench_now_us() - t0;

        pause_us(gap);
        t0 = bench_now_us();
        cuEventRecord((CUevent)start, (CUstream)s);
        t1 = bench_now_us();
        t[CU_RECORD_START][i] = t1 - t0;
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
        t0 = bench_now_us();
        t[COPY_AFTER_CU_RECORD][i] = t0 - t1;
        cuEventRecord((CUevent)end, (CUstream)s);
        t[CU_RECORD_END][i] = bench_now_us() - t0;
        cudaStreamSynchronize(s);
    }
    printf("== gap %ld us, %zu bytes, %d calls a row\n", gap, bytes, CALLS);
    for (int r = 0; r < ROWS; r++) {
        double first = t[r][0];
        qsort(t[r], CALLS, sizeof t[r][0], cmp_double);
        printf("%-24s first %7.2f median %6.2f p90 %6.2f p99 %6.2f max %7.2f\n", row_name[r], first,
               t[r][CALLS / 2], t[r][CALLS * 9 / 10], t[r][CALLS * 99 / 100], t[r][CALLS - 1]);
    }
    return 0;
}
