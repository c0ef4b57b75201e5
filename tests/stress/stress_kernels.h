/* stress_kernels.h - the stress program's kernel: fills device bytes with a
 * pattern the host model can compute (stress_pattern). Two implementations,
 * like the scenarios': stress_kernels.cu (nvcc, real GPU) and
 * stress_kernels_fake.c (the simulated runtime). */
#ifndef STRESS_KERNELS_H
#define STRESS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __CUDACC__
#define STRESS_HD __host__ __device__
#else
#define STRESS_HD
#endif

/* byte i of the pattern `seed` */
static inline STRESS_HD unsigned char stress_pattern(uint32_t seed, size_t i)
{
    uint32_t x = (uint32_t)i * 2654435761u ^ seed * 40503u;
    x ^= x >> 15;
    x *= 2246822519u;
    return (unsigned char)(x >> 13 ^ x);
}

#ifdef __cplusplus
extern "C" {
#endif

/* Writes stress_pattern(seed, i) to dst[i], i < n, on `stream` (of the current
 * device, which must be dst's), after spending about `us` microseconds. */
cudaError_t stress_kernel_fill(cudaStream_t stream, unsigned char *dst, size_t n, uint32_t seed, double us);

#ifdef __cplusplus
}
#endif

#endif
