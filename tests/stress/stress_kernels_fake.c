/* stress_kernels_fake.c - stress_kernel_fill on the simulated runtime: a host
 * function run on the stream's worker (docs/fakecuda.md). */
#include "stress_kernels.h"

#include <pthread.h>

#include "../fakecuda/fakecuda.h"

static void fill_kernel(void **args)
{
    unsigned char *dst = *(unsigned char **)args[0];
    size_t n = *(size_t *)args[1];
    uint32_t seed = *(uint32_t *)args[2];
    fakecuda_sleep_us(*(double *)args[3]);
    for (size_t i = 0; i < n; i++)
        dst[i] = stress_pattern(seed, i);
}

static pthread_once_t registered = PTHREAD_ONCE_INIT;

static void register_kernel(void)
{
    size_t sizes[] = {sizeof(unsigned char *), sizeof(size_t), sizeof(uint32_t), sizeof(double)};
    fakecuda_register_kernel((const void *)fill_kernel, 4, sizes);
}

cudaError_t stress_kernel_fill(cudaStream_t stream, unsigned char *dst, size_t n, uint32_t seed, double us)
{
    pthread_once(&registered, register_kernel);
    void *args[] = {&dst, &n, &seed, &us};
    dim3 one = {1, 1, 1};
    return cudaLaunchKernel((const void *)fill_kernel, one, one, args, 0, stream);
}
