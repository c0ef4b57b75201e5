/* device_reset.c - copies, cudaDeviceReset, the same copies again. After a
 * reset the shim's streams, events and pinned slots of the
 * device are dead; the shim must forget them and make new ones, so the
 * copies after the reset must succeed with the right bytes, natively and
 * under the shim alike.
 *
 * Plain runtime API, no kernels: built with gcc against the real libcudart
 * (tests/gpu/run.sh, make gpu-test) or against fakecuda
 * (tests/pipelines/run.sh). Each round: a pageable H2D and D2H (async on a
 * created stream, and cudaMemcpy), and with two devices a cross-device copy
 * each way (cudaMemcpyPeerAsync, cudaMemcpy), all checked byte for byte;
 * then the current device (0) is reset. Prints one line per round and
 * "device_reset: ok=1" (exit 0) or "device_reset: ok=0" with the first
 * failure (exit 1). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define N ((size_t)(8u << 20) + 123)

static unsigned char pattern(size_t i, unsigned seed)
{
    uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u + 17;
    return (unsigned char)(x >> 13 ^ x);
}

static int fails;

static void check(int ok, const char *what, int round)
{
    if (!ok && fails++ == 0)
        printf("device_reset: round %d: %s\n", round, what);
}

static int same(const unsigned char *p, unsigned seed)
{
    for (size_t i = 0; i < N; i++)
        if (p[i] != pattern(i, seed))
            return 0;
    return 1;
}

static void round_trip(int round, int devices)
{
    unsigned char *h = malloc(N), *back = malloc(N), *d0 = NULL, *d1 = NULL;
    cudaStream_t s = NULL;
    unsigned seed = 7 + (unsigned)round;
    for (size_t i = 0; i < N; i++)
        h[i] = pattern(i, seed);
    check(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0)", round);
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreate", round);
    check(cudaMalloc((void **)&d0, N) == cudaSuccess, "cudaMalloc on 0", round);
    check(cudaMemcpyAsync(d0, h, N, cudaMemcpyHostToDevice, s) == cudaSuccess, "H2D async", round);
    memset(back, 0, N);
    check(cudaMemcpyAsync(back, d0, N, cudaMemcpyDeviceToHost, s) == cudaSuccess, "D2H async", round);
    check(cudaStreamSynchronize(s) == cudaSuccess, "cudaStreamSynchronize", round);
    check(same(back, seed), "async H2D + D2H data", round);
    memset(back, 0, N);
    check(cudaMemcpy(d0, h, N, cudaMemcpyHostToDevice) == cudaSuccess, "cudaMemcpy H2D", round);
    check(cudaMemcpy(back, d0, N, cudaMemcpyDeviceToHost) == cudaSuccess, "cudaMemcpy D2H", round);
    check(same(back, seed), "cudaMemcpy H2D + D2H data", round);
    if (devices >= 2) {
        check(cudaSetDevice(1) == cudaSuccess && cudaMalloc((void **)&d1, N) == cudaSuccess, "cudaMalloc on 1",
              round);
        check(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0)", round);
        check(cudaMemcpyPeerAsync(d1, 1, d0, 0, N, s) == cudaSuccess, "cudaMemcpyPeerAsync 0->1", round);
        check(cudaStreamSynchronize(s) == cudaSuccess, "cudaStreamSynchronize after peer", round);
        memset(back, 0, N);
        check(cudaMemcpy(back, d1, N, cudaMemcpyDeviceToHost) == cudaSuccess, "D2H from 1", round);
        check(same(back, seed), "peer 0->1 data", round);
        check(cudaMemset(d0, 0, N) == cudaSuccess, "cudaMemset", round);
        check(cudaMemcpy(d0, d1, N, cudaMemcpyDefault) == cudaSuccess, "cudaMemcpy 1->0", round);
        memset(back, 0, N);
        check(cudaMemcpy(back, d0, N, cudaMemcpyDeviceToHost) == cudaSuccess, "D2H from 0", round);
        check(same(back, seed), "1->0 data", round);
        check(cudaSetDevice(1) == cudaSuccess && cudaFree(d1) == cudaSuccess, "cudaFree on 1", round);
        check(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0)", round);
    }
    /* d0 and s are left to the reset, as a program that resets would */
    printf("device_reset: round %d done (%d devices)\n", round, devices);
    free(h);
    free(back);
}

int main(void)
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        printf("device_reset: no device\ndevice_reset: ok=0\n");
        return 1;
    }
    for (int round = 0; round < 3; round++) {
        round_trip(round, devices);
        check(cudaSetDevice(0) == cudaSuccess && cudaDeviceReset() == cudaSuccess, "cudaDeviceReset", round);
    }
    printf("device_reset: ok=%d\n", fails == 0);
    return fails == 0 ? 0 : 1;
}
