/* rt_inner.c - a copy the dynamic runtime makes inside one of its own calls
 * that the shim's runtime layer does not take: the program takes
 * cudaMemcpyAsync from libcudart with dlsym (so not the shim's export) and
 * copies device to pageable memory. Under the shim the runtime's call into
 * the driver arrives at the driver layer from inside libcudart, unmarked,
 * and must go native (re-entering the runtime from inside its own call is
 * not promised to be safe): data right, no driver-layer finding.
 * Prints "ok" or what went wrong. Usage: rt_inner LIBCUDART */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef cudaError_t (*copy_fn)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    void *rt = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (rt == NULL) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    copy_fn copy = (copy_fn)dlsym(rt, "cudaMemcpyAsync");
    cudaError_t (*dev_malloc)(void **, size_t) = (cudaError_t(*)(void **, size_t))dlsym(rt, "cudaMalloc");
    cudaError_t (*sync)(cudaStream_t) = (cudaError_t(*)(cudaStream_t))dlsym(rt, "cudaStreamSynchronize");
    if (copy == NULL || dev_malloc == NULL || sync == NULL) {
        printf("dlsym failed\n");
        return 1;
    }
    const size_t n = (size_t)1 << 20;
    unsigned char *src = malloc(n), *back = calloc(1, n);
    void *d = NULL;
    if (src == NULL || back == NULL || dev_malloc(&d, n) != cudaSuccess)
        return 1;
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    if (copy(d, src, n, cudaMemcpyHostToDevice, NULL) != cudaSuccess ||
        copy(back, d, n, cudaMemcpyDeviceToHost, NULL) != cudaSuccess || sync(NULL) != cudaSuccess) {
        printf("copy failed\n");
        return 1;
    }
    puts(memcmp(src, back, n) == 0 ? "ok" : "data wrong");
    free(src);
    free(back);
    return 0;
}
