/* compat.h - what the compatibility programs (tests/compat/*.cu) share: each
 * exercises one pattern real CUDA programs use (the ones NVIDIA's cuda-samples
 * exercise), checks its own results, and ends with one line
 * "COMPAT <name> PASS" (exit 0) or "COMPAT <name> FAIL <why>" (exit 1).
 * tests/compat/run.sh runs each natively and under unstall; any difference in
 * outcome is a failure. Built with nvcc -cudart shared, as the samples are. */
#ifndef UNSTALL_COMPAT_H
#define UNSTALL_COMPAT_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *compat_name = "?";

#define CK(call)                                                                                        \
    do {                                                                                                \
        cudaError_t err_ = (call);                                                                      \
        if (err_ != cudaSuccess) {                                                                      \
            printf("COMPAT %s FAIL %s:%d %s: %s\n", compat_name, __FILE__, __LINE__, #call,            \
                   cudaGetErrorName(err_));                                                             \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)

static inline void compat_fail(const char *why)
{
    printf("COMPAT %s FAIL %s\n", compat_name, why);
    exit(1);
}

static inline int compat_pass(void)
{
    printf("COMPAT %s PASS\n", compat_name);
    return 0;
}

/* Byte i of a buffer filled with seed s. */
static inline unsigned char compat_byte(unsigned s, size_t i)
{
    return (unsigned char)((i * 2654435761u) >> 13 ^ s * 97u);
}

static inline void compat_fill(unsigned char *p, size_t n, unsigned s)
{
    for (size_t i = 0; i < n; i++)
        p[i] = compat_byte(s, i);
}

/* The first index where p differs from seed s's pattern, or n. */
static inline size_t compat_check(const unsigned char *p, size_t n, unsigned s)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != compat_byte(s, i))
            return i;
    return n;
}

#define COMPAT_EXPECT(p, n, s, what)                                                   \
    do {                                                                               \
        size_t at_ = compat_check((p), (n), (s));                                      \
        if (at_ != (n)) {                                                              \
            char why_[160];                                                            \
            snprintf(why_, sizeof why_, "%s: byte %zu of %zu differs", (what), at_, (size_t)(n)); \
            compat_fail(why_);                                                         \
        }                                                                              \
    } while (0)

/* dst[i] = src[i] + add, byte-wise */
__global__ void compat_add(unsigned char *dst, const unsigned char *src, size_t n, unsigned char add)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = (unsigned char)(src[i] + add);
}

/* spins at least `us` microseconds on the GPU (the global timer counts ns) */
__global__ void compat_spin(unsigned long long us)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < us * 1000ull);
}

#endif
