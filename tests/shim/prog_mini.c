/* prog_mini.c - runs against mini_runtime: a copy through the one function
 * it has works; a function it lacks, reached through the shim's export,
 * returns cudaErrorSharedObjectSymbolNotFound instead of crashing. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    char a[64] = "copied through the shim", b[64] = { 0 };
    if (cudaMemcpyAsync(b, a, sizeof a, cudaMemcpyHostToHost, 0) != cudaSuccess || strcmp(a, b) != 0) {
        printf("prog_mini: copy failed\n");
        return 1;
    }
    cudaError_t (*peer)(void *, int, const void *, int, size_t, cudaStream_t) =
        (cudaError_t(*)(void *, int, const void *, int, size_t, cudaStream_t))dlsym(RTLD_DEFAULT, "cudaMemcpyPeerAsync");
    if (peer == NULL) {
        printf("prog_mini: no cudaMemcpyPeerAsync at all (shim not preloaded?)\n");
        return 1;
    }
    cudaError_t err = peer(b, 1, a, 0, sizeof a, 0);
    printf("prog_mini: missing function answered %d\n", (int)err);
    return err == cudaErrorSharedObjectSymbolNotFound ? 0 : 1;
}
