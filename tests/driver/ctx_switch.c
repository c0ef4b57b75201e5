/* ctx_switch.c - pageable copies (large enough to be pipelined) as
 * contexts come and go, made with the runtime API. argv[1]:
 *   switch    the primary context and a created one of device 0 take turns
 *             (cuCtxSetCurrent between copies), each with work in flight on
 *             its own stream while the other copies: a host function holds
 *             the stream, the H2D is queued behind it, the other context
 *             copies, then both D2H back
 *   recreate  three rounds of: cuCtxCreate, H2D and D2H (asynchronous and
 *             synchronous, on a stream and on stream 0), a peer copy when
 *             there are two devices,
 *             cuCtxDestroy. A new context may get the address of the one
 *             destroyed before (FAKECUDA_CTX_REUSE=1 makes the simulated
 *             driver do so); the program prints how many rounds did on
 *             stderr ("reused N").
 *   stream_ctx  what cuStreamGetCtx answers (the shim's pipelines ask it:
 *             shim/fix/pipeline_common.c): a stream the runtime made in the
 *             primary context, the legacy and per-thread handles, and a
 *             stream of a created context asked while the primary one is
 *             current; then a pageable D2H on the runtime's stream
 * Checks every byte, every return code, and that the current context is the
 * one the program made current. Prints "ok" and exits 0, or says what went
 * wrong and exits 1. Built over fakecuda (CI) and over the real runtime and
 * driver (make gpu-test, tests/driver/run.sh gpu). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures;

#define CHECK_RT(call)                                                                            \
    do {                                                                                          \
        cudaError_t err_ = (call);                                                                \
        if (err_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(err_)); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)
#define CHECK_DRV(call)                                                                  \
    do {                                                                                 \
        CUresult rc_ = (call);                                                           \
        if (rc_ != CUDA_SUCCESS) {                                                       \
            fprintf(stderr, "%s:%d %s: CUresult %d\n", __FILE__, __LINE__, #call, (int)rc_); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

#define BYTES ((size_t)4 << 20)

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

/* A host function that keeps its stream busy for 20 ms: the copies queued
 * behind it are in flight while the program goes on. */
static void CUDART_CB hold_stream(void *arg)
{
    (void)arg;
    struct timespec t = {0, 20 * 1000 * 1000};
    nanosleep(&t, NULL);
}

/* One context's side of a round: its device buffer, stream and data. */
struct side {
    CUcontext ctx;
    cudaStream_t stream;
    void *dev;
    unsigned char *src, *back;
};

static void side_init(struct side *s, CUcontext ctx)
{
    s->ctx = ctx;
    CHECK_DRV(cuCtxSetCurrent(ctx));
    CHECK_RT(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    CHECK_RT(cudaMalloc(&s->dev, BYTES));
    s->src = malloc(BYTES);
    s->back = malloc(BYTES);
}

/* H2D queued behind a host function on the side's stream: in flight on return. */
static void side_put(struct side *s, unsigned seed)
{
    CHECK_DRV(cuCtxSetCurrent(s->ctx));
    fill(s->src, BYTES, seed);
    CHECK_RT(cudaLaunchHostFunc(s->stream, hold_stream, NULL));
    CHECK_RT(cudaMemcpyAsync(s->dev, s->src, BYTES, cudaMemcpyHostToDevice, s->stream));
    memset(s->src, 0xEE, BYTES / 2); /* the call consumed the source: it may change at once */
    fill(s->src, BYTES / 2, seed);
    expect_current(s->ctx, "cudaMemcpyAsync H2D");
}

static void side_get(struct side *s, const char *what)
{
    CHECK_DRV(cuCtxSetCurrent(s->ctx));
    memset(s->back, 0, BYTES);
    CHECK_RT(cudaMemcpyAsync(s->back, s->dev, BYTES, cudaMemcpyDeviceToHost, s->stream));
    CHECK_RT(cudaStreamSynchronize(s->stream));
    expect_same(s->src, s->back, BYTES, what);
    expect_current(s->ctx, what);
}

static void side_free(struct side *s)
{
    CHECK_DRV(cuCtxSetCurrent(s->ctx));
    CHECK_RT(cudaStreamDestroy(s->stream));
    CHECK_RT(cudaFree(s->dev));
    free(s->src);
    free(s->back);
}

static void run_switch(CUdevice dev)
{
    CUcontext primary, created;
    CHECK_RT(cudaSetDevice(0));
    CHECK_RT(cudaFree(NULL)); /* the runtime makes the primary context current */
    CHECK_DRV(cuCtxGetCurrent(&primary));
    CHECK_DRV(cuCtxCreate(&created, NULL, 0, dev));
    struct side p, c;
    side_init(&p, primary);
    side_init(&c, created);
    for (unsigned round = 0; round < 4; round++) {
        /* both H2Ds in flight at once, each behind its stream's host function */
        side_put(&p, 3 * round + 1);
        side_put(&c, 3 * round + 2);
        /* D2H in the other order: each context's copy issued while the
         * other's may still be queued */
        side_get(&c, "D2H in the created context");
        side_get(&p, "D2H in the primary context");
        /* synchronous pageable copies right after a switch */
        CHECK_DRV(cuCtxSetCurrent(round % 2 ? primary : created));
        struct side *s = round % 2 ? &p : &c;
        fill(s->src, BYTES, 7 * round + 5);
        CHECK_RT(cudaMemcpy(s->dev, s->src, BYTES, cudaMemcpyHostToDevice));
        memset(s->back, 0, BYTES);
        CHECK_RT(cudaMemcpy(s->back, s->dev, BYTES, cudaMemcpyDeviceToHost));
        expect_same(s->src, s->back, BYTES, "cudaMemcpy after a switch");
        expect_current(s->ctx, "cudaMemcpy after a switch");
    }
    side_free(&c);
    side_free(&p);
    CHECK_DRV(cuCtxDestroy(created));
}

static void run_recreate(CUdevice dev, int ndev)
{
    CUcontext before = NULL;
    int reused = 0;
    void *d1 = NULL;
    if (ndev > 1) {
        CHECK_RT(cudaSetDevice(1));
        CHECK_RT(cudaMalloc(&d1, BYTES));
    }
    for (unsigned round = 0; round < 3; round++) {
        CUcontext ctx;
        CHECK_DRV(cuCtxCreate(&ctx, NULL, 0, dev));
        reused += ctx == before;
        struct side s;
        side_init(&s, ctx);
        side_put(&s, round + 11);
        side_get(&s, "D2H in a new context");
        fill(s.src, BYTES, round + 21);
        CHECK_RT(cudaMemcpy(s.dev, s.src, BYTES, cudaMemcpyHostToDevice));
        memset(s.back, 0, BYTES);
        CHECK_RT(cudaMemcpy(s.back, s.dev, BYTES, cudaMemcpyDeviceToHost));
        expect_same(s.src, s.back, BYTES, "cudaMemcpy in a new context");
        expect_current(ctx, "cudaMemcpy in a new context");
        /* on the legacy stream (legacy_stream moves it to a stream of this context) */
        fill(s.src, BYTES, round + 31);
        CHECK_RT(cudaMemcpyAsync(s.dev, s.src, BYTES, cudaMemcpyHostToDevice, 0));
        memset(s.back, 0, BYTES);
        CHECK_RT(cudaMemcpyAsync(s.back, s.dev, BYTES, cudaMemcpyDeviceToHost, 0));
        CHECK_RT(cudaStreamSynchronize(0));
        expect_same(s.src, s.back, BYTES, "stream-0 copies in a new context");
        expect_current(ctx, "stream-0 copies in a new context");
        if (d1 != NULL) {
            /* there and back through device 1's primary context */
            CHECK_RT(cudaMemcpyPeerAsync(d1, 1, s.dev, 0, BYTES, s.stream));
            CHECK_RT(cudaMemsetAsync(s.dev, 0, BYTES, s.stream));
            CHECK_RT(cudaMemcpyPeerAsync(s.dev, 0, d1, 1, BYTES, s.stream));
            memset(s.back, 0, BYTES);
            CHECK_RT(cudaMemcpyAsync(s.back, s.dev, BYTES, cudaMemcpyDeviceToHost, s.stream));
            CHECK_RT(cudaStreamSynchronize(s.stream));
            expect_same(s.src, s.back, BYTES, "cudaMemcpyPeerAsync there and back");
            expect_current(ctx, "cudaMemcpyPeerAsync");
        }
        side_free(&s);
        CHECK_DRV(cuCtxDestroy(ctx));
        before = ctx;
    }
    if (d1 != NULL) {
        CHECK_RT(cudaSetDevice(1));
        CHECK_RT(cudaFree(d1));
    }
    fprintf(stderr, "reused %d\n", reused);
}

static void expect_ctx(CUstream s, CUcontext want, const char *what)
{
    CUcontext got = NULL;
    CHECK_DRV(cuStreamGetCtx(s, &got));
    if (got != want) {
        fprintf(stderr, "cuStreamGetCtx(%s) is not the context it belongs to\n", what);
        failures++;
    }
}

static void run_stream_ctx(CUdevice dev)
{
    CHECK_RT(cudaSetDevice(0));
    CHECK_RT(cudaFree(NULL));
    CUcontext primary = NULL, created = NULL, current = NULL;
    CHECK_DRV(cuCtxGetCurrent(&primary));
    cudaStream_t s;
    CHECK_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    expect_ctx((CUstream)s, primary, "a runtime stream");
    expect_ctx(CU_STREAM_LEGACY, primary, "CU_STREAM_LEGACY");
    expect_ctx(CU_STREAM_PER_THREAD, primary, "CU_STREAM_PER_THREAD");
    CHECK_DRV(cuCtxCreate(&created, NULL, 0, dev));
    CUstream theirs;
    CHECK_DRV(cuStreamCreate(&theirs, CU_STREAM_NON_BLOCKING));
    expect_ctx(theirs, created, "a created context's stream, that context current");
    expect_ctx(CU_STREAM_LEGACY, created, "CU_STREAM_LEGACY, a created context current");
    CHECK_DRV(cuCtxSetCurrent(primary));
    expect_ctx(theirs, created, "a created context's stream, the primary current");
    CHECK_DRV(cuCtxGetCurrent(&current));
    if (current != primary) {
        fprintf(stderr, "the current context changed\n");
        failures++;
    }
    /* a pageable D2H on the runtime's stream: under the shim, through the driver */
    unsigned char *host = malloc(BYTES), *back = malloc(BYTES);
    void *d;
    fill(host, BYTES, 7);
    CHECK_RT(cudaMalloc(&d, BYTES));
    CHECK_RT(cudaMemcpyAsync(d, host, BYTES, cudaMemcpyHostToDevice, s));
    memset(back, 0, BYTES);
    CHECK_RT(cudaMemcpyAsync(back, d, BYTES, cudaMemcpyDeviceToHost, s));
    CHECK_RT(cudaStreamSynchronize(s));
    expect_same(host, back, BYTES, "a D2H on the runtime's stream");
    CHECK_RT(cudaFree(d));
    CHECK_RT(cudaStreamDestroy(s));
    CHECK_DRV(cuCtxSetCurrent(created));
    CHECK_DRV(cuStreamDestroy(theirs));
    CHECK_DRV(cuCtxSetCurrent(primary));
    CHECK_DRV(cuCtxDestroy(created));
    free(host);
    free(back);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "switch";
    int ndev = 0;
    CHECK_DRV(cuInit(0));
    CHECK_RT(cudaGetDeviceCount(&ndev));
    CUdevice dev;
    CHECK_DRV(cuDeviceGet(&dev, 0));
    if (strcmp(mode, "recreate") == 0) {
        run_recreate(dev, ndev);
    } else if (strcmp(mode, "switch") == 0) {
        run_switch(dev);
    } else if (strcmp(mode, "stream_ctx") == 0) {
        run_stream_ctx(dev);
    } else {
        fprintf(stderr, "usage: ctx_switch switch|recreate|stream_ctx\n");
        return 2;
    }
    if (failures == 0)
        puts("ok");
    return failures == 0 ? 0 : 1;
}
