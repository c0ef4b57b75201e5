/* kernels.h - the two kernels the scenarios need. Two implementations:
 * kernels.cu (nvcc, real GPU: a clock64 spin kernel) and kernels_fake.c (the
 * simulated runtime: a host function passed to cudaLaunchKernel, run on the
 * stream's worker). Both launch through the runtime's cudaLaunchKernel, so a
 * preloaded shim sees the launches; a failed launch ends the program through
 * scn_ck. */
#ifndef SCN_KERNELS_H
#define SCN_KERNELS_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A kernel that occupies the GPU (one block, one thread) for about `ms`
 * milliseconds, on the device of the calling thread's current device. */
void scn_kernel_sleep(cudaStream_t stream, double ms);
/* A kernel that occupies every SM of the current device for about `ms`
 * milliseconds (enough blocks of 1024 threads to fill every SM's thread
 * slots), so that no copy kernel finds room beside it (case D). */
void scn_kernel_occupy(cudaStream_t stream, double ms);
/* A kernel that does nothing. */
void scn_kernel_empty(cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
