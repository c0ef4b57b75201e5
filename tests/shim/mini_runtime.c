/* mini_runtime.c - a runtime that lacks most functions (an older or
 * stripped libcudart): the shim must load, pass the calls it has, and answer
 * cudaErrorSharedObjectSymbolNotFound for the ones it lacks. */
#include <cuda_runtime_api.h>
#include <string.h>

cudaError_t cudaGetDevice(int *device) { *device = 0; return cudaSuccess; }
const char *cudaGetErrorName(cudaError_t error) { return error == cudaSuccess ? "cudaSuccess" : "cudaErrorMini"; }
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)kind;
    (void)stream;
    memmove(dst, src, count);
    return cudaSuccess;
}
