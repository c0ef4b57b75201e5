/* managed.cu - managed memory (cudaMallocManaged) prefetched to the device
 * and back (cudaMemPrefetchAsync), a kernel working on it in place, and
 * copies between it and pageable host memory both ways (managed memory is
 * neither pageable host memory nor plain device memory to the shim). */
#include "compat.h"

static void prefetch(void *p, size_t n, int device, cudaStream_t s)
{
#if CUDART_VERSION >= 13000
    cudaMemLocation loc;
    memset(&loc, 0, sizeof loc);
    loc.type = device >= 0 ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
    loc.id = device >= 0 ? device : 0;
    CK(cudaMemPrefetchAsync(p, n, loc, 0, s));
#else
    CK(cudaMemPrefetchAsync(p, n, device >= 0 ? device : cudaCpuDeviceId, s));
#endif
}

int main(void)
{
    compat_name = "managed";
    int managed = 0;
    CK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, 0));
    if (!managed) {
        printf("COMPAT %s PASS (no managed memory on this device: nothing to check)\n", compat_name);
        return 0;
    }
    const size_t n = (size_t)8 << 20;
    unsigned char *m, *m2, *h = (unsigned char *)malloc(n);
    if (h == NULL)
        compat_fail("malloc");
    CK(cudaMallocManaged((void **)&m, n));
    CK(cudaMallocManaged((void **)&m2, n));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    compat_fill(m, n, 90); /* written by the host */
    prefetch(m, n, 0, s);
    compat_add<<<128, 256, 0, s>>>(m2, m, n, 0);
    CK(cudaGetLastError());
    prefetch(m2, n, -1, s);
    CK(cudaStreamSynchronize(s));
    COMPAT_EXPECT(m2, n, 90, "managed memory after a kernel and a prefetch back");
    /* managed -> pageable, pageable -> managed, both directions' APIs */
    memset(h, 0, n);
    CK(cudaMemcpy(h, m2, n, cudaMemcpyDefault));
    COMPAT_EXPECT(h, n, 90, "cudaMemcpy managed -> pageable");
    compat_fill(h, n, 91);
    CK(cudaMemcpyAsync(m, h, n, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    COMPAT_EXPECT(m, n, 91, "cudaMemcpyAsync pageable -> managed");
    memset(h, 0, n);
    CK(cudaMemcpyAsync(h, m, n, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    COMPAT_EXPECT(h, n, 91, "cudaMemcpyAsync managed -> pageable");
    CK(cudaFree(m));
    CK(cudaFree(m2));
    return compat_pass();
}
