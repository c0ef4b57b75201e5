/* probe_sync.c - which calls of the real runtime return at once and which
 * wait, when the device has 200 ms of work queued (a host function that
 * sleeps stands in for a kernel). Prints the time each call held its caller.
 * Run by hand on a GPU machine:
 *   gcc -std=c11 -D_GNU_SOURCE -I/usr/local/cuda/include probe_sync.c \
 *       -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,/usr/local/cuda/lib64 -o probe_sync
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void CUDART_CB sleep200(void *arg)
{
    (void)arg;
    usleep(200000);
}

#define TIME(label, setup_stream, call) do { \
    cudaLaunchHostFunc((setup_stream), sleep200, NULL); \
    double t0_ = now_ms(); cudaError_t e_ = (call); double dt_ = now_ms() - t0_; \
    printf("%-58s %-28s held %7.1f ms\n", label, cudaGetErrorName(e_), dt_); \
    cudaDeviceSynchronize(); } while (0)

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    cudaStream_t blk, nb;
    cudaEvent_t ev;
    size_t big = 64 << 20;
    char *d, *d2, *h, *m = malloc(big);
    cudaFree(0);
    cudaStreamCreate(&blk);
    cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
    cudaEventCreate(&ev);
    cudaMalloc((void **)&d, big);
    cudaMalloc((void **)&d2, big);
    cudaMallocHost((void **)&h, big);

    TIME("query(0) behind blocking stream", blk, cudaStreamQuery(0));
    TIME("sync(0) behind blocking stream", blk, cudaStreamSynchronize(0));
    TIME("query(0) behind non-blocking stream", nb, cudaStreamQuery(0));
    TIME("sync(0) behind non-blocking stream", nb, cudaStreamSynchronize(0));
    TIME("sync(legacy) behind blocking stream", blk, cudaStreamSynchronize(cudaStreamLegacy));
    TIME("query_perthread behind blocking stream", blk, cudaStreamQuery(cudaStreamPerThread));
    TIME("sync(perthread) behind legacy", 0, cudaStreamSynchronize(cudaStreamPerThread));
    TIME("sync(blk) behind legacy", 0, cudaStreamSynchronize(blk));
    TIME("query(blk) behind legacy", 0, cudaStreamQuery(blk));
    TIME("cudaMemset(dev) behind legacy", 0, cudaMemset(d, 1, 1 << 20));
    TIME("cudaMemset(pinned) behind legacy", 0, cudaMemset(h, 1, 1 << 20));
    TIME("cudaMemcpy D2D behind legacy", 0, cudaMemcpy(d2, d, 1 << 20, cudaMemcpyDeviceToDevice));
    TIME("cudaMemcpy H2D pinned behind legacy", 0, cudaMemcpy(d, h, 1 << 20, cudaMemcpyHostToDevice));
    TIME("cudaMemcpy H2D pageable 4K behind legacy", 0, cudaMemcpy(d, m, 4096, cudaMemcpyHostToDevice));
    TIME("cudaMemcpy H2H pageable behind legacy", 0, cudaMemcpy(m, m + 4096, 4096, cudaMemcpyHostToHost));
    TIME("cudaMemcpy H2H pinned behind legacy", 0, cudaMemcpy(h, h + 4096, 4096, cudaMemcpyHostToHost));
    TIME("MemcpyAsync H2D pageable 4K behind nb", nb, cudaMemcpyAsync(d, m, 4096, cudaMemcpyHostToDevice, nb));
    TIME("MemcpyAsync H2D pageable 1M behind nb", nb, cudaMemcpyAsync(d, m, 1 << 20, cudaMemcpyHostToDevice, nb));
    TIME("MemcpyAsync H2D pageable 1M+1 behind nb", nb, cudaMemcpyAsync(d, m, (1 << 20) + 1, cudaMemcpyHostToDevice, nb));
    TIME("MemcpyAsync H2D pageable 64M behind nb", nb, cudaMemcpyAsync(d, m, big, cudaMemcpyHostToDevice, nb));
    TIME("MemcpyAsync D2H pageable 4K behind nb", nb, cudaMemcpyAsync(m, d, 4096, cudaMemcpyDeviceToHost, nb));
    TIME("MemcpyAsync D2H pinned behind nb", nb, cudaMemcpyAsync(h, d, 4096, cudaMemcpyDeviceToHost, nb));
    TIME("MemcpyAsync H2H pageable behind nb", nb, cudaMemcpyAsync(m, m + 4096, 4096, cudaMemcpyHostToHost, nb));
    TIME("MemcpyAsync H2H pinned behind nb", nb, cudaMemcpyAsync(h, h + 4096, 4096, cudaMemcpyHostToHost, nb));
    TIME("MemsetAsync pinned behind nb", nb, cudaMemsetAsync(h, 0, 4096, nb));
    TIME("EventRecord+Query behind nb", nb, (cudaEventRecord(ev, nb), cudaEventQuery(ev)));
    TIME("cudaFree behind nb", nb, cudaFree(d2));
    void *p = NULL;
    TIME("cudaMallocHost behind nb", nb, cudaMallocHost(&p, 4096));
    TIME("cudaFreeHost behind nb", nb, cudaFreeHost(p));
    TIME("cudaMalloc behind nb", nb, cudaMalloc(&p, 4096));
    TIME("cudaHostRegister behind nb", nb, cudaHostRegister(m, 1 << 20, 0));
    TIME("cudaHostUnregister behind nb", nb, cudaHostUnregister(m));
    cudaStream_t tmp;
    cudaStreamCreate(&tmp);
    TIME("cudaStreamDestroy with pending work", tmp, cudaStreamDestroy(tmp));
    TIME("cudaDeviceSynchronize behind nb", nb, cudaDeviceSynchronize());
    return 0;
}
