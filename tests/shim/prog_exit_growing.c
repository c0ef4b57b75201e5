/* prog_exit_growing.c - returns from main right after the process's first
 * large pageable copy and first small D2H, while unstall's grower thread
 * pins the slots they asked for: the exit must wait for the pinning in
 * progress and start no other (shim/fix/grower.c), or the driver unloads
 * under it (the simulated driver aborts then, as the real one crashes). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    const size_t n = 32u << 20;
    unsigned char *h = malloc(n);
    void *d = NULL;
    cudaStream_t s;
    if (h == NULL || cudaMalloc(&d, n) != cudaSuccess || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        return 1;
    memset(h, 7, n);
    if (cudaMemcpy(d, h, n, cudaMemcpyHostToDevice) != cudaSuccess)
        return 1;
    if (cudaMemcpyAsync(h, d, 4, cudaMemcpyDeviceToHost, s) != cudaSuccess || h[0] != 7)
        return 1;
    printf("prog_exit_growing: ok\n");
    free(h);
    return 0; /* the device memory and the stream are left: the exit is the test */
}
