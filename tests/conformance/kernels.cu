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

static __device__ __forceinline__ unsigned long long global_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// state[0]: the deadline, set by the first block to start; state[1]: whether
// a block has left (the first stores the flag)
__global__ void cf_occupy_reset_kernel(unsigned long long *state)
{
    state[0] = 0;
    state[1] = 0;
}

__global__ void cf_occupy_kernel(unsigned long long *state, unsigned long long ns, int *flag, int value)
{
    if (threadIdx.x == 0)
        atomicCAS(&state[0], 0ull, global_ns() + ns);
    __syncthreads();
    unsigned long long deadline = *(volatile unsigned long long *)&state[0];
    while (global_ns() < deadline) {
    }
    __syncthreads();
    if (threadIdx.x == 0 && flag != NULL && atomicExch(&state[1], 1ull) == 0) {
        *(volatile int *)flag = value;
        __threadfence_system();
    }
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

// The blocks spin to one deadline on the global timer, not for a number of
// cycles each from its own start: blocks that start later would otherwise
// leave later, and a copy kernel waiting behind them ran on the SMs the
// first ones freed while the last still spun (on an H200, d2d_busy_engine
// full saw its copies end "during" the kernel in 4 of 12 runs).
extern "C" void cf_occupy(cudaStream_t s, double ms, int *flag, int value)
{
    static unsigned long long *state[CF_MAX_DEVICES];
    int dev = 0, sms = 0, per_sm = 0;
    CF_CK(cudaGetDevice(&dev));
    if (dev < 0 || dev >= CF_MAX_DEVICES)
        dev = 0;
    if (state[dev] == NULL)
        CF_CK(cudaMalloc((void **)&state[dev], 2 * sizeof(unsigned long long)));
    CF_CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CF_CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cf_occupy_kernel, 1024, 0));
    cf_occupy_reset_kernel<<<1, 1, 0, s>>>(state[dev]);
    cf_occupy_kernel<<<sms * (per_sm > 0 ? per_sm : 1), 1024, 0, s>>>(state[dev], (unsigned long long)(ms * 1e6),
                                                                       flag, value);
    CF_CK(cudaGetLastError());
}

extern "C" void cf_fill(cudaStream_t s, uint32_t *p, size_t n, uint32_t seed, double ms)
{
    if (ms > 0)
        cf_sleep(s, ms);
    cf_fill_kernel<<<1024, 256, 0, s>>>(p, n, seed);
    CF_CK(cudaGetLastError());
}

// Each kernel launched once on every device before the program's rule runs:
// CUDA loads a kernel's module at its first launch (lazy loading, the default),
// and that load waits for the work in flight, which would order two streams
// that the rule says are independent (seen on an H100: two blocking streams
// and a non-blocking one against the legacy stream all read saw=1).
extern "C" void cf_warm_kernels(void)
{
    int count = 0, current = 0;
    CF_CK(cudaGetDeviceCount(&count));
    CF_CK(cudaGetDevice(&current));
    for (int d = 0; d < count; d++) {
        int *flag = NULL;
        uint32_t *words = NULL;
        CF_CK(cudaSetDevice(d));
        CF_CK(cudaMalloc((void **)&flag, 2 * sizeof(int)));
        CF_CK(cudaMalloc((void **)&words, 64 * sizeof(uint32_t)));
        cf_spin_kernel<<<1, 1>>>(0);
        cf_occupy_reset_kernel<<<1, 1>>>((unsigned long long *)words);
        cf_occupy_kernel<<<1, 1>>>((unsigned long long *)words, 0, NULL, 0);
        cf_set_flag_kernel<<<1, 1>>>(flag, 0, 0);
        cf_copy_flag_kernel<<<1, 1>>>(flag, flag + 1);
        cf_fill_kernel<<<1, 64>>>(words, 64, 0);
        CF_CK(cudaGetLastError());
        CF_CK(cudaDeviceSynchronize());
        CF_CK(cudaFree(flag));
        CF_CK(cudaFree(words));
    }
    CF_CK(cudaSetDevice(current));
}
