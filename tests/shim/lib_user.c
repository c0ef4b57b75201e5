/* lib_user.c - a library that links the runtime, loaded RTLD_LOCAL by
 * prog_dlopen (as Python loads extension modules): its runtime is not in the
 * global scope, so the shim must find it by soname. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

int user_pageable_round_trip(size_t bytes)
{
    unsigned char *src = malloc(bytes), *back = malloc(bytes);
    void *dev = NULL;
    for (size_t i = 0; i < bytes; i++)
        src[i] = (unsigned char)(i * 7 + 1);
    if (cudaMalloc(&dev, bytes) != cudaSuccess)
        return 2;
    cudaError_t err = cudaMemcpy(dev, src, bytes, cudaMemcpyHostToDevice);
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(back, dev, bytes, cudaMemcpyDeviceToHost, 0);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(0);
    int result = err != cudaSuccess ? 100 + (int)err : memcmp(src, back, bytes) != 0 ? 3 : 0;
    cudaFree(dev);
    free(src);
    free(back);
    return result;
}
