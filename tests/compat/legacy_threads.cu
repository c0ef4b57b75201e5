/* legacy_threads.cu - several host threads sharing the legacy default stream
 * (stream 0, a plain build): each copies pageable data in, runs a kernel and
 * copies back with cudaMemcpy while the others do the same; a blocking stream
 * of the main thread has work queued meanwhile. Every byte checked. */
#include "compat.h"

#include <pthread.h>

#define THREADS 4
static const size_t n = (size_t)3 << 20;

static void *worker(void *arg)
{
    long t = (long)arg;
    unsigned char *h_in = (unsigned char *)malloc(n), *h_out = (unsigned char *)malloc(n), *d_a, *d_b;
    if (h_in == NULL || h_out == NULL)
        return (void *)1;
    CK(cudaMalloc((void **)&d_a, n));
    CK(cudaMalloc((void **)&d_b, n));
    long bad = 0;
    for (unsigned round = 0; round < 6; round++) {
        unsigned seed = 300 + 10 * (unsigned)t + round;
        compat_fill(h_in, n, seed);
        memset(h_out, 0, n);
        CK(cudaMemcpyAsync(d_a, h_in, n, cudaMemcpyHostToDevice, 0));
        compat_add<<<64, 256>>>(d_b, d_a, n, 0);
        CK(cudaGetLastError());
        CK(cudaMemcpy(h_out, d_b, n, cudaMemcpyDeviceToHost));
        bad += compat_check(h_out, n, seed) != n;
    }
    CK(cudaFree(d_a));
    CK(cudaFree(d_b));
    free(h_in);
    free(h_out);
    return (void *)bad;
}

int main(void)
{
    compat_name = "legacy_threads";
    cudaStream_t blocking;
    CK(cudaStreamCreate(&blocking));
    compat_spin<<<1, 1, 0, blocking>>>(5000);
    CK(cudaGetLastError());
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)t) != 0)
            compat_fail("pthread_create");
    long bad = 0;
    for (int t = 0; t < THREADS; t++) {
        void *r;
        pthread_join(th[t], &r);
        bad += (long)r;
    }
    CK(cudaDeviceSynchronize());
    if (bad)
        compat_fail("a thread's bytes differ");
    return compat_pass();
}
