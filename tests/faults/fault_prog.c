/* fault_prog.c - the pipelined copies that tests/faults/run.py injects
 * faults into: every rewritten path (pageable H2D and D2H, async and
 * synchronous, staged peer copies by cudaMemcpyPeer[Async] and by
 * cudaMemcpyAsync across devices), twice, so that the second round shows
 * whether the shim recovered. One line per step:
 *     STEP <name> copy=<error name> sync=<error name> data=<ok|bad|->
 * data is checked (reading device memory directly: fakecuda only) when the
 * copy and its synchronization both returned cudaSuccess; a pageable D2H is
 * checked on return, before the synchronization. Ends with "DONE". */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define N ((3u << 20) + 5) /* 12+ chunks of 256 KiB, not a multiple of one */

static unsigned char pattern(unsigned seed, size_t i)
{
    uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u;
    return (unsigned char)(x >> 13 ^ x);
}

static void fill(unsigned char *p, unsigned seed) /* p: idle memory, host or (fakecuda) device */
{
    for (size_t i = 0; i < N; i++)
        p[i] = pattern(seed, i);
}

static bool holds(const unsigned char *p, unsigned seed)
{
    for (size_t i = 0; i < N; i++)
        if (p[i] != pattern(seed, i))
            return false;
    return true;
}

static void step(const char *name, cudaError_t copy, cudaError_t sync, int data)
{
    printf("STEP %s copy=%s sync=%s data=%s\n", name, cudaGetErrorName(copy), cudaGetErrorName(sync),
           data < 0 ? "-" : data ? "ok" : "bad");
    fflush(stdout);
}

enum { STEPS = 7, ROUNDS = 2 };

/* Every step has buffers of its own: work a failed synchronization left in
 * flight cannot touch another step's data. */
static unsigned char *host[ROUNDS][STEPS], *d0[ROUNDS][STEPS], *d1[ROUNDS][STEPS];

static bool setup_failed(const char *what, cudaError_t err)
{
    if (err == cudaSuccess)
        return false;
    printf("SETUP %s %s\n", what, cudaGetErrorName(err));
    return true;
}

int main(void)
{
    const char *d = getenv("UNSTALL_D2H_DEFERRED");
    bool deferred = d != NULL && strcmp(d, "1") == 0;
    cudaStream_t s;
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < STEPS; k++) {
            if ((host[r][k] = malloc(N)) == NULL)
                return 2;
            if (setup_failed("cudaSetDevice", cudaSetDevice(0)) ||
                setup_failed("cudaMalloc", cudaMalloc((void **)&d0[r][k], N)) ||
                setup_failed("cudaSetDevice", cudaSetDevice(1)) ||
                setup_failed("cudaMalloc", cudaMalloc((void **)&d1[r][k], N)))
                return 3;
        }
    if (setup_failed("cudaSetDevice", cudaSetDevice(0)) ||
        setup_failed("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)))
        return 3;
    for (int round = 0; round < ROUNDS; round++) {
        unsigned seed = 10u * (unsigned)round;
        cudaError_t c, y;
        char name[64];
        unsigned char **h = host[round], **a = d0[round], **b = d1[round];
#define NAME(x) (snprintf(name, sizeof name, "%s.%d", x, round + 1), name)

        /* pageable H2D, async: the source may be overwritten on return */
        fill(h[0], seed + 1);
        c = cudaMemcpyAsync(a[0], h[0], N, cudaMemcpyHostToDevice, s);
        memset(h[0], 0, N);
        y = cudaStreamSynchronize(s);
        step(NAME("h2d_async"), c, y, c == cudaSuccess && y == cudaSuccess ? holds(a[0], seed + 1) : -1);

        /* pageable D2H, async: the data is in place on return (deferred
         * mode: once the stream is synchronized) */
        fill(a[1], seed + 2);
        c = cudaMemcpyAsync(h[1], a[1], N, cudaMemcpyDeviceToHost, s);
        int on_return = c == cudaSuccess && !deferred ? holds(h[1], seed + 2) : -1;
        y = cudaStreamSynchronize(s);
        if (deferred && c == cudaSuccess && y == cudaSuccess)
            on_return = holds(h[1], seed + 2);
        step(NAME("d2h_async"), c, y, y == cudaSuccess ? on_return : -1);

        /* synchronous H2D and D2H (the legacy stream) */
        fill(h[2], seed + 3);
        c = cudaMemcpy(a[2], h[2], N, cudaMemcpyHostToDevice);
        y = cudaStreamSynchronize(0);
        step(NAME("h2d_sync"), c, y, c == cudaSuccess && y == cudaSuccess ? holds(a[2], seed + 3) : -1);
        fill(a[3], seed + 4);
        c = cudaMemcpy(h[3], a[3], N, cudaMemcpyDeviceToHost);
        step(NAME("d2h_sync"), c, cudaSuccess, c == cudaSuccess ? holds(h[3], seed + 4) : -1);

        /* staged peer copies */
        fill(a[4], seed + 5);
        c = cudaMemcpyPeerAsync(b[4], 1, a[4], 0, N, s);
        y = cudaStreamSynchronize(s);
        step(NAME("peer_async"), c, y, c == cudaSuccess && y == cudaSuccess ? holds(b[4], seed + 5) : -1);
        fill(a[5], seed + 6);
        c = cudaMemcpyPeer(b[5], 1, a[5], 0, N);
        y = cudaDeviceSynchronize();
        step(NAME("peer_sync"), c, y, c == cudaSuccess && y == cudaSuccess ? holds(b[5], seed + 6) : -1);
        fill(a[6], seed + 7);
        c = cudaMemcpyAsync(b[6], a[6], N, cudaMemcpyDefault, s);
        y = cudaStreamSynchronize(s);
        step(NAME("d2d_cross"), c, y, c == cudaSuccess && y == cudaSuccess ? holds(b[6], seed + 7) : -1);
    }
    printf("DONE\n");
    /* what may still be in flight after an injected failure finishes before
     * the memory goes (a failed synchronization does not wait) */
    for (int i = 0; i < 100 && cudaStreamQuery(s) == cudaErrorNotReady; i++)
        cudaStreamSynchronize(s);
    cudaDeviceSynchronize();
    cudaStreamDestroy(s);
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < STEPS; k++) {
            cudaFree(d0[r][k]);
            cudaFree(d1[r][k]);
            free(host[r][k]);
        }
    return 0;
}
