/* ctx_copies.c - pageable and peer copies made with the runtime API inside
 * a context the program made with cuCtxCreate (case D's setting), or in
 * the primary context: argv[1] "created" or "primary". Checks every byte,
 * every return code, and that the thread's current context is the one the
 * program made current (a preload must not switch it). Prints "ok" and
 * exits 0, or says what went wrong and exits 1. Built over fakecuda (CI)
 * and over the real runtime and driver (make gpu-test). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK_RT(call)                                                               \
    do {                                                                             \
        cudaError_t err_ = (call);                                                   \
        if (err_ != cudaSuccess) {                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(err_)); \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)
#define CHECK_DRV(call)                                                              \
    do {                                                                             \
        CUresult rc_ = (call);                                                       \
        if (rc_ != CUDA_SUCCESS) {                                                   \
            fprintf(stderr, "%s:%d %s: CUresult %d\n", __FILE__, __LINE__, #call, (int)rc_); \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 131u + seed + (i >> 9));
}

static void expect_same(const unsigned char *a, const unsigned char *b, size_t n, const char *what)
{
    if (memcmp(a, b, n) != 0) {
        fprintf(stderr, "data wrong after %s\n", what);
        failures++;
    }
}

static void expect_current(CUcontext want, const char *after)
{
    CUcontext cur = NULL;
    CHECK_DRV(cuCtxGetCurrent(&cur));
    if (cur != want) {
        fprintf(stderr, "current context changed by %s\n", after);
        failures++;
    }
}

int main(int argc, char **argv)
{
    int created = argc > 1 && strcmp(argv[1], "created") == 0;
    size_t n = (size_t)4 << 20;
    int ndev = 0;
    CHECK_DRV(cuInit(0));
    CHECK_RT(cudaGetDeviceCount(&ndev));
    CUdevice dev;
    CHECK_DRV(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    if (created) {
        CHECK_DRV(cuCtxCreate(&ctx, NULL, 0, dev));
    } else {
        CHECK_RT(cudaSetDevice(0));
        CHECK_RT(cudaFree(NULL)); /* the runtime makes the primary context current */
        CHECK_DRV(cuCtxGetCurrent(&ctx));
    }
    unsigned char *src = malloc(n), *back = malloc(n);
    fill(src, n, 5);
    void *d;
    cudaStream_t s;
    CHECK_RT(cudaMalloc(&d, n));
    CHECK_RT(cudaStreamCreate(&s));

    /* pageable D2H, synchronous: the call the issue saw fail */
    CHECK_RT(cudaMemcpy(d, src, n, cudaMemcpyHostToDevice));
    memset(back, 0, n);
    CHECK_RT(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost));
    expect_same(src, back, n, "cudaMemcpy D2H");
    expect_current(ctx, "cudaMemcpy");

    /* pageable H2D and D2H on a stream of the context */
    fill(src, n, 9);
    CHECK_RT(cudaMemcpyAsync(d, src, n, cudaMemcpyHostToDevice, s));
    memset(back, 0, n);
    CHECK_RT(cudaMemcpyAsync(back, d, n, cudaMemcpyDeviceToHost, s));
    CHECK_RT(cudaStreamSynchronize(s));
    expect_same(src, back, n, "cudaMemcpyAsync H2D + D2H");
    expect_current(ctx, "cudaMemcpyAsync");

    /* peer: device 0 (this context) to device 1's primary context, and back */
    if (ndev > 1) {
        void *d1;
        CHECK_RT(cudaSetDevice(1));
        CHECK_RT(cudaMalloc(&d1, n));
        CHECK_DRV(cuCtxSetCurrent(ctx));
        CHECK_RT(cudaMemcpyPeerAsync(d1, 1, d, 0, n, s));
        CHECK_RT(cudaMemset(d, 0, n));
        CHECK_RT(cudaStreamSynchronize(s));
        CHECK_RT(cudaMemcpyPeer(d, 0, d1, 1, n));
        memset(back, 0, n);
        CHECK_RT(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost));
        expect_same(src, back, n, "cudaMemcpyPeer there and back");
        expect_current(ctx, "cudaMemcpyPeer");
        CHECK_RT(cudaFree(d1));
        CHECK_DRV(cuCtxSetCurrent(ctx));
    }
    CHECK_RT(cudaStreamDestroy(s));
    CHECK_RT(cudaFree(d));
    if (created)
        CHECK_DRV(cuCtxDestroy(ctx));
    free(src);
    free(back);
    if (failures == 0)
        puts("ok");
    return failures == 0 ? 0 : 1;
}
