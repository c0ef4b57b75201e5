/* kernels_fake.c - the scenarios' kernels on the simulated runtime
 * (kernels.h). A fakecuda kernel is a host function `void (*)(void **args)`
 * passed as `func` to cudaLaunchKernel; it runs on the stream's worker and
 * spends simulated time with fakecuda_sleep_us (docs/fakecuda.md). */
#include "kernels.h"

#include <pthread.h>

#include "../fakecuda/fakecuda.h"
#include "scenario.h"

#include <stdint.h>

/* the runtime's launch entry of nvcc's <<<>>> since CUDA 13; declared for
 * C++ only (crt/device_functions.h) */
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shared_mem,
                               cudaStream_t stream);

static void sleep_kernel(void **args)
{
    fakecuda_sleep_us(*(double *)args[0]);
}

static void empty_kernel(void **args)
{
    (void)args;
}

static pthread_once_t registered = PTHREAD_ONCE_INIT;

/* The argument values are copied at launch, as a real launch does. */
static void register_kernels(void)
{
    size_t sizes[] = {sizeof(double)};
    fakecuda_register_kernel((const void *)sleep_kernel, 1, sizes);
    fakecuda_register_kernel((const void *)empty_kernel, 0, NULL);
}

void scn_kernel_sleep(cudaStream_t stream, double ms)
{
    pthread_once(&registered, register_kernels);
    double us = ms * 1000.0;
    void *args[] = {&us};
    dim3 one = {1, 1, 1};
    SCN_CK(cudaLaunchKernel((const void *)sleep_kernel, one, one, args, 0, stream));
}

/* One block per SM: the simulated runtime treats it as occupying every SM. */
void scn_kernel_occupy(cudaStream_t stream, double ms)
{
    pthread_once(&registered, register_kernels);
    int sms = 0;
    SCN_CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    double us = ms * 1000.0;
    void *args[] = {&us};
    dim3 grid = {(unsigned)(sms > 0 ? sms : 1), 1, 1}, block = {1024, 1, 1};
    SCN_CK(cudaLaunchKernel((const void *)sleep_kernel, grid, block, args, 0, stream));
}

void scn_kernel_empty(cudaStream_t stream)
{
    pthread_once(&registered, register_kernels);
    dim3 one = {1, 1, 1};
    /* as nvcc's <<<>>> launches since CUDA 13 (the others: cudaLaunchKernel) */
    SCN_CK(__cudaLaunchKernel((cudaKernel_t)(uintptr_t)empty_kernel, one, one, NULL, 0, stream));
}
