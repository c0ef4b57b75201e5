/* mempool.cu - stream-ordered allocation (cudaMallocAsync/cudaFreeAsync from
 * the device's default pool, kept with a release threshold, as programs that
 * cache their allocations do), with pageable copies in and out between the
 * allocation and the free, on one stream and across two (freed on another
 * stream after an event, then reused). */
#include "compat.h"

#include <stdint.h>

int main(void)
{
    compat_name = "mempool";
    const size_t max = (size_t)4 << 20;
    unsigned char *h_in = (unsigned char *)malloc(max), *h_out = (unsigned char *)malloc(max);
    if (h_in == NULL || h_out == NULL)
        compat_fail("malloc");
    cudaMemPool_t pool;
    CK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t keep = UINT64_MAX;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    cudaStream_t s1, s2;
    cudaEvent_t done;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreate(&s2));
    CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    for (unsigned iter = 0; iter < 24; iter++) {
        size_t n = (size_t)4096 << (iter % 11); /* 4 KiB .. 4 MiB */
        cudaStream_t use = iter % 2 ? s2 : s1, other = iter % 2 ? s1 : s2;
        unsigned char *d_a, *d_b;
        compat_fill(h_in, n, iter);
        memset(h_out, 0, n);
        CK(cudaMallocAsync((void **)&d_a, n, use));
        CK(cudaMallocAsync((void **)&d_b, n, use));
        CK(cudaMemcpyAsync(d_a, h_in, n, cudaMemcpyHostToDevice, use));
        compat_add<<<32, 256, 0, use>>>(d_b, d_a, n, 0);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(h_out, d_b, n, cudaMemcpyDeviceToHost, use));
        CK(cudaFreeAsync(d_a, use));
        /* d_b freed on the other stream once this one is done with it */
        CK(cudaEventRecord(done, use));
        CK(cudaStreamWaitEvent(other, done, 0));
        CK(cudaFreeAsync(d_b, other));
        CK(cudaStreamSynchronize(use));
        COMPAT_EXPECT(h_out, n, iter, "pageable D2H of pool memory");
    }
    CK(cudaDeviceSynchronize());
    CK(cudaEventDestroy(done));
    CK(cudaStreamDestroy(s1));
    CK(cudaStreamDestroy(s2));
    return compat_pass();
}
