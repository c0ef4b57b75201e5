/* prog_srcline.c - one synchronous copy at a known line, for the report's
 * native frames: built with -g its frame names main and prog_srcline.c:line
 * (the line marked below); stripped, the old "prog_srcline+0x..." stays.
 * Exit 0 when the copy succeeded. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    size_t bytes = 4u << 20;
    void *dev = NULL;
    char *host = calloc(1, bytes);
    if (host == NULL || cudaMalloc(&dev, bytes) != cudaSuccess)
        return 1;
    cudaError_t err = cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice); /* THE CALL */
    printf("prog_srcline: %s\n", cudaGetErrorName(err));
    return err == cudaSuccess ? 0 : 1;
}
