/* prog_copies.c - a small CUDA program for the preload tests: pageable and
 * pinned copies both ways, checked byte for byte. Exit 0 when every byte
 * landed, 1 otherwise; prints the first CUDA error it meets. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                 \
    do {                                                                            \
        cudaError_t err_ = (call);                                                  \
        if (err_ != cudaSuccess) {                                                  \
            printf("prog_copies: %s failed: %s (%d)\n", #call, cudaGetErrorName(err_), (int)err_); \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

/* file scope: still reachable for LeakSanitizer when a failed call ends the
 * program with exit(1) (locals may live only in registers by then) */
static unsigned char *src, *back;

int main(int argc, char **argv)
{
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (3u << 20) + 7;
    unsigned char *pinned = NULL;
    src = malloc(bytes);
    back = malloc(bytes);
    void *dev = NULL;
    cudaStream_t stream;
    for (size_t i = 0; i < bytes; i++)
        src[i] = (unsigned char)(i * 131 + 7);
    CHECK(cudaMalloc(&dev, bytes));
    CHECK(cudaMallocHost((void **)&pinned, bytes));
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK(cudaMemcpyAsync(dev, src, bytes, cudaMemcpyHostToDevice, stream));   /* pageable H2D */
    CHECK(cudaMemcpyAsync(back, dev, bytes, cudaMemcpyDeviceToHost, stream));  /* pageable D2H */
    CHECK(cudaStreamSynchronize(stream));
    if (memcmp(src, back, bytes) != 0) {
        printf("prog_copies: pageable round trip differs\n");
        exit(1); /* not return: the buffers stay reachable for LeakSanitizer */
    }
    memset(back, 0, bytes);
    CHECK(cudaMemcpy(dev, src, bytes, cudaMemcpyDefault));
    CHECK(cudaMemcpyAsync(pinned, dev, bytes, cudaMemcpyDefault, stream));     /* pinned D2H */
    CHECK(cudaStreamSynchronize(stream));
    if (memcmp(src, pinned, bytes) != 0) {
        printf("prog_copies: pinned round trip differs\n");
        exit(1); /* not return: the buffers stay reachable for LeakSanitizer */
    }
    CHECK(cudaStreamDestroy(stream));
    CHECK(cudaFreeHost(pinned));
    CHECK(cudaFree(dev));
    free(src);
    free(back);
    printf("prog_copies: ok %zu bytes\n", bytes);
    return 0;
}
