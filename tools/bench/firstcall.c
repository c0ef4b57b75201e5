/* firstcall.c - what a process's first copies cost the caller: the calls a
 * program makes before any warm-up, which a benchmark of many calls hides in
 * its median. tools/bench/firstcall.sh runs it in many processes, natively
 * and under the shim, interleaved.
 *
 * The program allocates device memory and a stream, as a program does before
 * its first copy, then times each of these once, in this order, on the host:
 *   malloc_first  the first cudaMalloc: it creates the context, and the shim
 *                 pays its one-time costs there (us_copy_warm)
 *   h2d_4B        cudaMemcpy host-to-device, 4 bytes from malloc memory
 *   d2h_4B        cudaMemcpy device-to-host, 4 bytes into malloc memory
 *   d2h_4B_2nd    the same again
 *   d2h_async_4B  cudaMemcpyAsync device-to-host on the stream + cudaStreamSynchronize
 *   d2h_64KiB     cudaMemcpy device-to-host, 64 KiB
 *   h2d_1MiB      cudaMemcpy host-to-device, 1 MiB
 *   d2h_1MiB      cudaMemcpy device-to-host, 1 MiB
 * Output: one line, FIRSTCALL name=us name.faults=n ... ok=<0|1> (faults: the
 * page faults the thread took in the call; ok: the bytes came back as they
 * went). */
#define BENCH_NAME "firstcall"
#include "bench_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* each call's time, then the page faults the calling thread took in it
 * (minor: memory touched for the first time, code or data) */
#define TIMED(name, body)                                                           \
    do {                                                                            \
        long f0_ = thread_faults();                                                 \
        double t0_ = bench_now_us();                                                \
        body;                                                                       \
        double t_ = bench_now_us() - t0_;                                           \
        printf(" %s=%.1f %s.faults=%ld", name, t_, name, thread_faults() - f0_);    \
    } while (0)

static long thread_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_minflt + ru.ru_majflt : 0;
}

int main(void)
{
    enum { MiB = 1 << 20 };
    unsigned char *host = malloc(MiB), *back = malloc(MiB);
    if (host == NULL || back == NULL)
        return 1;
    for (int i = 0; i < MiB; i++)
        host[i] = (unsigned char)(i * 7 + 3);
    memset(back, 0, MiB);
    void *dev;
    cudaStream_t s;
    printf("FIRSTCALL");
    TIMED("malloc_first", CHECK(cudaMalloc(&dev, MiB)));
    CHECK(cudaStreamCreate(&s));
    TIMED("h2d_4B", CHECK(cudaMemcpy(dev, host, 4, cudaMemcpyHostToDevice)));
    TIMED("d2h_4B", CHECK(cudaMemcpy(back, dev, 4, cudaMemcpyDeviceToHost)));
    TIMED("d2h_4B_2nd", CHECK(cudaMemcpy(back, dev, 4, cudaMemcpyDeviceToHost)));
    TIMED("d2h_async_4B", {
        CHECK(cudaMemcpyAsync(back, dev, 4, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
    });
    TIMED("d2h_64KiB", CHECK(cudaMemcpy(back, dev, 64 << 10, cudaMemcpyDeviceToHost)));
    TIMED("h2d_1MiB", CHECK(cudaMemcpy(dev, host, MiB, cudaMemcpyHostToDevice)));
    TIMED("d2h_1MiB", CHECK(cudaMemcpy(back, dev, MiB, cudaMemcpyDeviceToHost)));
    printf(" ok=%d\n", memcmp(host, back, MiB) == 0);
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(dev));
    return 0;
}
