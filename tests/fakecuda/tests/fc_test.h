/* fc_test.h - helpers the fakecuda tests share: a clock, kernels of a given
 * duration, and child processes for scenarios that must hang or exit. */
#ifndef FAKECUDA_FC_TEST_H
#define FAKECUDA_FC_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "summary.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "fakecuda.h"
#include "ptsz.h"

#define CUDA_OK(call) assert_int_equal((call), cudaSuccess)

static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline void sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1e3), (long)((ms - (double)(time_t)(ms / 1e3) * 1e3) * 1e6)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static const dim3 one = {1, 1, 1};

/* Sets (value) or unsets (NULL) a FAKECUDA_* variable and makes it count. */
static inline void setenv_reload(const char *name, const char *value)
{
    if (value != NULL)
        setenv(name, value, 1);
    else
        unsetenv(name);
    fakecuda_reload_config();
}

/* sleep_kernel(double us) */
static void sleep_kernel(void **args)
{
    fakecuda_sleep_us(*(double *)args[0]);
}

/* fill_kernel(char *dst, int value, size_t n, double us): sleeps, then fills */
static void fill_kernel(void **args)
{
    fakecuda_sleep_us(*(double *)args[3]);
    memset(*(char **)args[0], *(int *)args[1], *(size_t *)args[2]);
}

static inline void register_test_kernels(void)
{
    size_t sleep_sizes[] = {sizeof(double)};
    size_t fill_sizes[] = {sizeof(char *), sizeof(int), sizeof(size_t), sizeof(double)};
    assert_int_equal(fakecuda_register_kernel((const void *)sleep_kernel, 1, sleep_sizes), 0);
    assert_int_equal(fakecuda_register_kernel((const void *)fill_kernel, 4, fill_sizes), 0);
}

static inline cudaError_t launch_sleep(cudaStream_t s, double ms)
{
    double us = ms * 1e3;
    void *args[] = {&us};
    return cudaLaunchKernel((const void *)sleep_kernel, one, one, args, 0, s);
}

/* The same kernel with one block per SM: it occupies every SM (case D). */
static inline cudaError_t launch_sleep_full(cudaStream_t s, double ms)
{
    double us = ms * 1e3;
    void *args[] = {&us};
    dim3 grid = {132, 1, 1};
    return cudaLaunchKernel((const void *)sleep_kernel, grid, one, args, 0, s);
}

static inline cudaError_t launch_fill(cudaStream_t s, void *dst, int value, size_t n, double ms)
{
    double us = ms * 1e3;
    void *args[] = {&dst, &value, &n, &us};
    return cudaLaunchKernel((const void *)fill_kernel, one, one, args, 0, s);
}

/* A host function that stores the time it ran (ms) into *(double *)arg. */
static inline void CUDART_CB stamp_fn(void *arg)
{
    *(volatile double *)arg = now_ms();
}

static inline void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 8));
}

/* --- child processes ------------------------------------------------------------------------- */

/* Runs this test program again as `prog --child name` and waits up to
 * timeout_ms. Returns its exit status, or -1 when it had to be killed. */
static inline int run_child(const char *name, double timeout_ms)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "fakecuda-child", "--child", name, (char *)NULL);
        _exit(127);
    }
    double deadline = now_ms() + timeout_ms;
    int status;
    while (now_ms() < deadline) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

#endif /* FAKECUDA_FC_TEST_H */
