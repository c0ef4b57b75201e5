/* prog_fork.c - CUDA is undefined in a forked child until exec: the shim must
 * pass the child's calls straight to the runtime (no pipeline, no finding),
 * so the child sees exactly the runtime's own answer. The parent goes on
 * using the shim normally. Exit 0 when the child's answer equals the answer
 * of the same call made without the shim (argv[1], a number). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    size_t bytes = 1u << 20;
    void *dev = NULL;
    char *host = malloc(bytes);
    memset(host, 7, bytes);
    if (cudaMalloc(&dev, bytes) != cudaSuccess || cudaMemcpy(dev, host, bytes, cudaMemcpyDefault) != cudaSuccess) {
        printf("prog_fork: setup failed\n");
        return 1;
    }
    pid_t child = fork();
    if (child == 0) {
        cudaError_t err = cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, 0); /* pageable D2H */
        printf("prog_fork: child got %d\n", (int)err);
        fflush(stdout);
        _exit(argc > 1 && (int)err == atoi(argv[1]) ? 0 : 2);
    }
    int status = 0;
    waitpid(child, &status, 0);
    /* the parent still works, through the shim */
    memset(host, 0, bytes);
    if (cudaMemcpy(host, dev, bytes, cudaMemcpyDefault) != cudaSuccess || host[bytes - 1] != 7) {
        printf("prog_fork: parent copy after fork failed\n");
        return 1;
    }
    free(host);
    cudaFree(dev);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}
