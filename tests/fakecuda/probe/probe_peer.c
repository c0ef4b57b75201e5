/* probe_peer.c - two-GPU behaviour of the real runtime that fakecuda models:
 * events across devices, staged (no peer access) and peer copies behind
 * 200 ms of queued work, and what the pinned allocation calls wait for.
 * Needs two GPUs. Build like probe_sync.c. */
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
    cudaSetDevice(1); cudaDeviceSynchronize(); cudaSetDevice(0); cudaDeviceSynchronize(); } while (0)

#define SHOW(call) do { cudaError_t e_ = (call); \
    printf("%-70s -> %s\n", #call, cudaGetErrorName(e_)); (void)cudaGetLastError(); } while (0)

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int n = 0, can = -1;
    cudaGetDeviceCount(&n);
    printf("devices %d\n", n);
    if (n < 2)
        return 1;
    size_t sz = 64 << 20;
    char *d0, *d0b, *d1, *h1;
    cudaStream_t s0, s0b, s1, nb0;
    cudaEvent_t e0, e1;
    cudaSetDevice(1);
    cudaMalloc((void **)&d1, sz);
    cudaStreamCreate(&s1);
    cudaEventCreate(&e1);
    cudaMallocHost((void **)&h1, 4096);
    cudaSetDevice(0);
    cudaMalloc((void **)&d0, sz);
    cudaMalloc((void **)&d0b, sz);
    cudaStreamCreate(&s0);
    cudaStreamCreate(&s0b);
    cudaStreamCreateWithFlags(&nb0, cudaStreamNonBlocking);
    cudaEventCreate(&e0);
    SHOW(cudaDeviceCanAccessPeer(&can, 0, 1));
    printf("can access 0->1 %d\n", can);
    struct cudaPointerAttributes a;
    cudaPointerGetAttributes(&a, h1);
    printf("pinned allocated under device 1: type %d device %d\n", (int)a.type, a.device);
    SHOW(cudaEventRecord(e1, s0));
    SHOW(cudaEventRecord(e0, s1));
    SHOW(cudaEventRecord(e1, s1));
    SHOW(cudaStreamWaitEvent(s0, e1, 0));
    SHOW(cudaEventSynchronize(e1));

    TIME("MallocHost behind blocking stream", s0, cudaMallocHost((void **)&h1, 4096));
    TIME("MallocHost behind legacy", 0, cudaMallocHost((void **)&h1, 4096));
    TIME("HostRegister behind blocking stream", s0, cudaHostRegister(malloc(1 << 20), 1 << 20, 0));
    TIME("FreeHost behind other device's stream", s1, cudaFreeHost(h1));
    TIME("Free(dev0 ptr) behind other device's stream", s1, cudaFree(d0b));
    cudaMalloc((void **)&d0b, sz);

    /* no peer access: staged */
    TIME("PeerAsync 64M no peer, behind own stream (s0)", s0, cudaMemcpyPeerAsync(d1, 1, d0, 0, sz, s0));
    TIME("PeerAsync 64M no peer, other stream busy (s0b idle)", s0, cudaMemcpyPeerAsync(d1, 1, d0, 0, sz, s0b));
    TIME("MemcpyAsync 64M D2D cross no peer, behind own stream", s0, cudaMemcpyAsync(d1, d0, sz, cudaMemcpyDeviceToDevice, s0));
    TIME("MemcpyAsync 4K D2D cross no peer, behind own stream", s0, cudaMemcpyAsync(d1, d0, 4096, cudaMemcpyDefault, s0));
    TIME("MemcpyAsync 64M D2D cross no peer, dst dev busy (s1)", s1, cudaMemcpyAsync(d1, d0, sz, cudaMemcpyDeviceToDevice, nb0));
    TIME("cudaMemcpyPeer 64M no peer, behind legacy dev0", 0, cudaMemcpyPeer(d1, 1, d0, 0, sz));
    TIME("cudaMemcpyPeer 4K no peer, behind s1 (dev1 blocking)", s1, cudaMemcpyPeer(d1, 1, d0, 0, 4096));
    TIME("cudaMemcpy D2D cross no peer, behind legacy", 0, cudaMemcpy(d1, d0, 4096, cudaMemcpyDeviceToDevice));

    /* case A's stall: when does an independent copy on another stream finish? */
    for (int peer = 0; peer < 2; peer++) {
        if (peer)
            cudaDeviceEnablePeerAccess(1, 0);
        cudaLaunchHostFunc(nb0, sleep200, NULL);
        double t0 = now_ms();
        cudaMemcpyPeerAsync(d1, 1, d0, 0, sz, nb0);
        double t1 = now_ms();
        cudaStream_t sb;
        cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking);
        cudaMemcpyPeerAsync(d1 + 0, 1, d0b, 0, sz, sb);
        double t2 = now_ms();
        cudaStreamSynchronize(sb);
        double t3 = now_ms();
        cudaDeviceSynchronize();
        printf("independent copy peer=%d: copy A call %.1f ms, copy B call %.1f ms, B done at %.1f ms\n", peer, t1 - t0,
               t2 - t1, t3 - t0);
        if (peer)
            cudaDeviceDisablePeerAccess(1);
        cudaStreamDestroy(sb);
    }
    SHOW(cudaDeviceEnablePeerAccess(1, 0));
    TIME("PeerAsync 64M peer on, behind own stream", s0, cudaMemcpyPeerAsync(d1, 1, d0, 0, sz, s0));
    TIME("MemcpyAsync 64M cross peer on, behind own stream", s0, cudaMemcpyAsync(d1, d0, sz, cudaMemcpyDefault, s0));
    TIME("cudaMemcpyPeer 4K peer on, behind legacy", 0, cudaMemcpyPeer(d1, 1, d0, 0, 4096));
    TIME("cudaMemcpy D2D cross peer on, behind legacy", 0, cudaMemcpy(d1, d0, 4096, cudaMemcpyDeviceToDevice));
    SHOW(cudaDeviceDisablePeerAccess(1));
    cudaSetDevice(1);
    SHOW(cudaDeviceEnablePeerAccess(0, 0));
    cudaSetDevice(0);
    TIME("PeerAsync 0->1 with only 1->0 enabled, behind own", s0, cudaMemcpyPeerAsync(d1, 1, d0, 0, sz, s0));
    return 0;
}
