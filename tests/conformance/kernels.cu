// kernels.cu - the conformance kernels on a real GPU (conform.h). Built by
// nvcc into an object that gcc links with the shared libcudart, as the
// scenario kernels are (tests/scenarios/kernels.cu).
#include <cuda_runtime.h>

#include "conform.h"

__global__ void cf_spin_kernel(long long cycles)
{
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

__global__ void cf_set_flag_kernel(int *flag, int value, long long cycles)
{
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    *(volatile int *)flag = value;
    __threadfence_system();
}

__global__ void cf_copy_flag_kernel(const int *flag, int *out)
{
    *(volatile int *)out = *(const volatile int *)flag;
    __threadfence_system();
}

__global__ void cf_fill_kernel(uint32_t *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = cf_word(i, seed);
}

#define CF_MAX_DEVICES 64

// Cycles for `ms` milliseconds at the current device's peak SM clock.
static long long cycles_for(double ms)
{
    static int khz[CF_MAX_DEVICES];
    int dev = 0;
    CF_CK(cudaGetDevice(&dev));
    if (dev < 0 || dev >= CF_MAX_DEVICES)
        dev = 0;
    if (khz[dev] == 0) {
        int v = 0;
        CF_CK(cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, dev));
        khz[dev] = v > 0 ? v : 1000000;
    }
    return (long long)(ms * (double)khz[dev]);
}

extern "C" void cf_set_flag_after(cudaStream_t s, int *flag, int value, double ms)
{
    cf_set_flag_kernel<<<1, 1, 0, s>>>(flag, value, cycles_for(ms));
    CF_CK(cudaGetLastError());
}

extern "C" void cf_copy_flag(cudaStream_t s, const int *flag, int *out)
{
    cf_copy_flag_kernel<<<1, 1, 0, s>>>(flag, out);
    CF_CK(cudaGetLastError());
}

extern "C" void cf_sleep(cudaStream_t s, double ms)
{
    cf_spin_kernel<<<1, 1, 0, s>>>(cycles_for(ms));
    CF_CK(cudaGetLastError());
}

extern "C" void cf_fill(cudaStream_t s, uint32_t *p, size_t n, uint32_t seed, double ms)
{
    if (ms > 0)
        cf_sleep(s, ms);
    cf_fill_kernel<<<1024, 256, 0, s>>>(p, n, seed);
    CF_CK(cudaGetLastError());
}
