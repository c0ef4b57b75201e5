// kernels.cu - the scenarios' kernels on a real GPU (kernels.h). Built by nvcc
// into build/gpu/kernels.o and linked by gcc with the shared libcudart, so a
// preloaded shim sees every launch (a <<<>>> launch is a cudaLaunchKernel).
#include <cuda_runtime.h>

#include "kernels.h"
#include "scenario.h"

// Spins for `cycles` SM clock cycles (one thread).
__global__ void scn_spin_kernel(long long cycles)
{
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

__global__ void scn_empty_kernel() {}

#define SCN_MAX_DEVICES 64

// The peak SM clock of the current device in kHz, read once per device.
static long long clock_khz(void)
{
    static int khz[SCN_MAX_DEVICES];
    int dev = 0;
    scn_ck(cudaGetDevice(&dev), "cudaGetDevice", __FILE__, __LINE__);
    if (dev < 0 || dev >= SCN_MAX_DEVICES)
        dev = 0;
    if (khz[dev] == 0) {
        int v = 0;
        scn_ck(cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, dev), "cudaDeviceGetAttribute(ClockRate)",
               __FILE__, __LINE__);
        khz[dev] = v > 0 ? v : 1000000;
    }
    return khz[dev];
}

extern "C" void scn_kernel_sleep(cudaStream_t stream, double ms)
{
    long long cycles = (long long)(ms * (double)clock_khz());
    scn_spin_kernel<<<1, 1, 0, stream>>>(cycles);
    scn_ck(cudaGetLastError(), "scn_spin_kernel<<<1, 1, 0, stream>>>", __FILE__, __LINE__);
}

// Every SM's thread slots filled with spinning blocks of 1024 threads: a
// copy kernel finds no room and waits for a time slice (case D, measured on
// an H200 with a kernel on all 132 SMs).
extern "C" void scn_kernel_occupy(cudaStream_t stream, double ms)
{
    int dev = 0, sms = 0, per_sm = 0;
    scn_ck(cudaGetDevice(&dev), "cudaGetDevice", __FILE__, __LINE__);
    scn_ck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute(SMs)", __FILE__,
           __LINE__);
    scn_ck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, scn_spin_kernel, 1024, 0),
           "cudaOccupancyMaxActiveBlocksPerMultiprocessor", __FILE__, __LINE__);
    long long cycles = (long long)(ms * (double)clock_khz());
    scn_spin_kernel<<<sms * (per_sm > 0 ? per_sm : 1), 1024, 0, stream>>>(cycles);
    scn_ck(cudaGetLastError(), "scn_spin_kernel<<<SMs x per SM, 1024, 0, stream>>>", __FILE__, __LINE__);
}

extern "C" void scn_kernel_empty(cudaStream_t stream)
{
    scn_empty_kernel<<<1, 1, 0, stream>>>();
    scn_ck(cudaGetLastError(), "scn_empty_kernel<<<1, 1, 0, stream>>>", __FILE__, __LINE__);
}
