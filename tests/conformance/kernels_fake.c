/* kernels_fake.c - the conformance kernels on the simulated runtime
 * (conform.h): host functions passed to cudaLaunchKernel, run in stream
 * order on the stream's worker, spending simulated time with
 * fakecuda_sleep_us (docs/fakecuda.md). */
#include "conform.h"

#include <pthread.h>

#include "../fakecuda/fakecuda.h"

static void set_flag_kernel(void **a) /* (int *flag, int value, double us) */
{
    fakecuda_sleep_us(*(double *)a[2]);
    __atomic_store_n(*(int **)a[0], *(int *)a[1], __ATOMIC_SEQ_CST);
}

static void copy_flag_kernel(void **a) /* (const int *flag, int *out) */
{
    __atomic_store_n(*(int **)a[1], __atomic_load_n(*(const int **)a[0], __ATOMIC_SEQ_CST), __ATOMIC_SEQ_CST);
}

static void fill_kernel(void **a) /* (uint32_t *p, size_t n, uint32_t seed, double us) */
{
    fakecuda_sleep_us(*(double *)a[3]);
    uint32_t *p = *(uint32_t **)a[0];
    size_t n = *(size_t *)a[1];
    for (size_t i = 0; i < n; i++)
        p[i] = cf_word(i, *(uint32_t *)a[2]);
}

static pthread_once_t registered = PTHREAD_ONCE_INIT;

static void register_kernels(void)
{
    size_t set_sizes[] = {sizeof(int *), sizeof(int), sizeof(double)};
    size_t copy_sizes[] = {sizeof(int *), sizeof(int *)};
    size_t fill_sizes[] = {sizeof(uint32_t *), sizeof(size_t), sizeof(uint32_t), sizeof(double)};
    fakecuda_register_kernel((const void *)set_flag_kernel, 3, set_sizes);
    fakecuda_register_kernel((const void *)copy_flag_kernel, 2, copy_sizes);
    fakecuda_register_kernel((const void *)fill_kernel, 4, fill_sizes);
}

static const dim3 one = {1, 1, 1};

void cf_set_flag_after(cudaStream_t s, int *flag, int value, double ms)
{
    pthread_once(&registered, register_kernels);
    double us = ms * 1000.0;
    void *a[] = {&flag, &value, &us};
    CF_CK(cudaLaunchKernel((const void *)set_flag_kernel, one, one, a, 0, s));
}

void cf_copy_flag(cudaStream_t s, const int *flag, int *out)
{
    pthread_once(&registered, register_kernels);
    void *a[] = {&flag, &out};
    CF_CK(cudaLaunchKernel((const void *)copy_flag_kernel, one, one, a, 0, s));
}

void cf_sleep(cudaStream_t s, double ms)
{
    static int unused;
    cf_set_flag_after(s, &unused, 0, ms);
}

void cf_occupy(cudaStream_t s, double ms, int *flag, int value)
{
    pthread_once(&registered, register_kernels);
    static int unused;
    int sms = 0;
    if (flag == NULL)
        flag = &unused;
    double us = ms * 1000.0;
    CF_CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    void *a[] = {&flag, &value, &us};
    dim3 grid = {(unsigned)(sms > 0 ? sms : 1), 1, 1}, block = {1024, 1, 1};
    CF_CK(cudaLaunchKernel((const void *)set_flag_kernel, grid, block, a, 0, s));
}

void cf_fill(cudaStream_t s, uint32_t *p, size_t n, uint32_t seed, double ms)
{
    pthread_once(&registered, register_kernels);
    double us = ms * 1000.0;
    void *a[] = {&p, &n, &seed, &us};
    CF_CK(cudaLaunchKernel((const void *)fill_kernel, one, one, a, 0, s));
}

/* The simulated runtime loads nothing lazily: nothing to warm up. */
void cf_warm_kernels(void) {}
