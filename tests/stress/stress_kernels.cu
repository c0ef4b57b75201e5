// stress_kernels.cu - stress_kernel_fill on a real GPU: a grid-stride fill
// after a clock64 spin of about `us` microseconds (thread 0 of each block).
#include "stress_kernels.h"

static __global__ void fill_kernel(unsigned char *dst, size_t n, uint32_t seed, long long spin_cycles)
{
    if (threadIdx.x == 0) {
        long long t0 = clock64();
        while (clock64() - t0 < spin_cycles)
            ;
    }
    __syncthreads();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = stress_pattern(seed, i);
}

extern "C" cudaError_t stress_kernel_fill(cudaStream_t stream, unsigned char *dst, size_t n, uint32_t seed, double us)
{
    int device = 0, khz = 1980000;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device);
    long long cycles = (long long)(us * khz / 1000.0);
    unsigned blocks = n == 0 ? 1 : (unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024);
    fill_kernel<<<blocks, 256, 0, stream>>>(dst, n, seed, cycles);
    return cudaGetLastError();
}
