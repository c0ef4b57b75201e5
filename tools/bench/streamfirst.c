/* streamfirst.c - what a process's first calls on a fresh stream cost
 * natively: stream creation, a capture check, a capture-mode exchange, the
 * current device, four timing events made, then an event recorded, a 4 B
 * same-device copy and another record, synchronized; the same again, then
 * the copy alone. Each line is one call's time on the calling thread. The
 * measurement behind busy_engine_d2d's choices (engine_late.c): a stream's
 * first copy is not timed (a record that is the stream's first work costs
 * the stream's setup), and the table and a pair of timing events are made
 * inside the first device allocation.
 *
 * Usage: ./streamfirst [ORDER]   ORDER 0: as above; 1: one event without
 * timing made first; 2: a copy and a synchronize first (the stream has run
 * work before the records). GPU only. Build:
 *   gcc -O2 -I/usr/local/cuda/include tools/bench/streamfirst.c -o streamfirst \
 *       -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,/usr/local/cuda/lib64
 */
#define BENCH_NAME "streamfirst"
#include "bench_cuda.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#define T(label, call) do { double t0 = bench_now_us(); cudaError_t e = call; double t1 = bench_now_us(); printf("%-28s %8.2f us%s\n", label, t1 - t0, e ? " ERR" : ""); } while (0)
int main(int argc, char **argv)
{
    int order = argc > 1 ? atoi(argv[1]) : 0;
    void *a, *b;
    T("cudaFree(0)", cudaFree(0));
    T("cudaMalloc", cudaMalloc(&a, 1 << 20));
    T("cudaMalloc2", cudaMalloc(&b, 1 << 20));
    cudaStream_t s;
    T("cudaStreamCreate", cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e1, e2, e3, e4, d1;
    if (order == 1) {
        T("EventCreate disable-timing", cudaEventCreateWithFlags(&d1, cudaEventDisableTiming));
    }
    if (order == 2) {
        T("first memcpy D2D", cudaMemcpyAsync(b, a, 4, cudaMemcpyDeviceToDevice, s));
        T("sync", cudaStreamSynchronize(s));
    }
    enum cudaStreamCaptureStatus st;
    T("StreamIsCapturing", cudaStreamIsCapturing(s, &st));
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    T("ExchangeCaptureMode", cudaThreadExchangeStreamCaptureMode(&m));
    T("ExchangeCaptureMode back", cudaThreadExchangeStreamCaptureMode(&m));
    int dev;
    T("GetDevice", cudaGetDevice(&dev));
    T("EventCreate 1", cudaEventCreateWithFlags(&e1, cudaEventDefault));
    T("EventCreate 2", cudaEventCreateWithFlags(&e2, cudaEventDefault));
    T("EventCreate 3", cudaEventCreateWithFlags(&e3, cudaEventDefault));
    T("EventCreate 4", cudaEventCreateWithFlags(&e4, cudaEventDefault));
    T("EventRecord 1", cudaEventRecord(e1, s));
    T("memcpy D2D", cudaMemcpyAsync(b, a, 4, cudaMemcpyDeviceToDevice, s));
    T("EventRecord 2", cudaEventRecord(e2, s));
    T("sync", cudaStreamSynchronize(s));
    T("EventRecord 1 again", cudaEventRecord(e1, s));
    T("memcpy D2D again", cudaMemcpyAsync(b, a, 4, cudaMemcpyDeviceToDevice, s));
    T("EventRecord 2 again", cudaEventRecord(e2, s));
    T("sync", cudaStreamSynchronize(s));
    T("memcpy D2D plain", cudaMemcpyAsync(b, a, 4, cudaMemcpyDeviceToDevice, s));
    T("sync", cudaStreamSynchronize(s));
    return 0;
}
