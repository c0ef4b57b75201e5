/* pin_unseen.c - memory a copy met as pageable, then pinned through the
 * driver (cuMemHostRegister, the program linked against libcuda): the next
 * asynchronous D2H into it must be what CUDA makes of pinned memory, a copy
 * that returns at once, whatever the shim remembered of the page
 * (shim/model/hostpages.h). With the driver layer on the shim sees the
 * registration; with it off (UNSTALL_DRIVER_LAYER=0) it does not, and the
 * D2H pipeline's second look at the memory must catch it.
 *
 *   pin_unseen   runtime API (-lcudart) and cuMemHostRegister (-lcuda)
 *
 * A pageable D2H into the buffer twice (the shim's rewrite, which waits for
 * the stream); then the buffer registered; then on a stream held by a host
 * function until this thread says so, a D2H into the registered buffer: it
 * must return while the stream is held (a copy that waited for the stream
 * would wait for the host function, which waits for this thread: the host
 * function gives up after 10 s and the program says "waited"). Then the
 * stream is released and every byte checked. Prints "ok" and exits 0, or says
 * what went wrong and exits 1. Built over fakecuda (CI) and the real driver
 * (make gpu-test). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BYTES (256u << 10)
#define CHECK(x)                                                                             \
    do {                                                                                     \
        int rc_ = (int)(x);                                                                  \
        if (rc_ != 0) {                                                                      \
            printf("%s: %d at line %d\n", #x, rc_, __LINE__);                                \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static atomic_int released, gave_up;

/* holds the stream until main releases it, or 10 s */
static void CUDART_CB hold(void *arg)
{
    (void)arg;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (!atomic_load(&released)) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= 10) {
            atomic_store(&gave_up, 1);
            return;
        }
        nanosleep(&(struct timespec){0, 100000}, NULL);
    }
}

int main(void)
{
    unsigned char *host = aligned_alloc(4096, BYTES), *dev;
    if (host == NULL)
        return 1;
    CHECK(cudaMalloc((void **)&dev, BYTES));
    CHECK(cudaMemset(dev, 0x5a, BYTES));
    CHECK(cudaDeviceSynchronize()); /* the copies' stream does not wait for the legacy one */
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < 2; i++) { /* pageable: met, and remembered */
        memset(host, 0, BYTES);
        CHECK(cudaMemcpyAsync(host, dev, BYTES, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        if (host[0] != 0x5a || host[BYTES - 1] != 0x5a) {
            printf("pageable copy %d: wrong bytes\n", i);
            return 1;
        }
    }
    CHECK(cuMemHostRegister(host, BYTES, 0));
    memset(host, 0, BYTES);
    CHECK(cudaMemset(dev, 0x3c, BYTES));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaLaunchHostFunc(s, hold, NULL));
    CHECK(cudaMemcpyAsync(host, dev, BYTES, cudaMemcpyDeviceToHost, s));
    atomic_store(&released, 1);
    CHECK(cudaStreamSynchronize(s));
    if (atomic_load(&gave_up)) {
        printf("waited: the D2H into registered memory waited for its stream\n");
        return 1;
    }
    for (unsigned i = 0; i < BYTES; i++)
        if (host[i] != 0x3c) {
            printf("registered copy: byte %u is %#x\n", i, host[i]);
            return 1;
        }
    CHECK(cuMemHostUnregister(host));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(dev));
    free(host);
    printf("ok\n");
    return 0;
}
