/* hostfunc.cu - host functions and stream callbacks in stream order with
 * copies: a host function queued after a pageable D2H sees the copied bytes
 * (cudaLaunchHostFunc and cudaStreamAddCallback), behind a host function
 * that holds the stream for a while; and a pageable H2D has consumed its
 * source when it returns (the program overwrites it at once: the device must
 * get the bytes from before; measured on the GPU, conformance twin
 * pageable_h2d_return). */
#include "compat.h"

#include <time.h>

struct seen {
    const unsigned char *buf;
    size_t n;
    unsigned seed;
    int ran, right;
};

static void CUDART_CB look(void *p)
{
    struct seen *s = (struct seen *)p;
    s->ran++;
    s->right = compat_check(s->buf, s->n, s->seed) == s->n;
}

static void CUDART_CB look_callback(cudaStream_t stream, cudaError_t status, void *p)
{
    (void)stream;
    if (status == cudaSuccess)
        look(p);
}

static void CUDART_CB hold(void *p)
{
    (void)p;
    struct timespec ts = {0, 20 * 1000 * 1000}; /* 20 ms */
    nanosleep(&ts, NULL);
}

int main(void)
{
    compat_name = "hostfunc";
    const size_t sizes[] = {4, 4096, (size_t)1 << 20, (size_t)16 << 20};
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    for (unsigned k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        unsigned char *h_in = (unsigned char *)malloc(n), *h_out = (unsigned char *)malloc(n), *d;
        if (h_in == NULL || h_out == NULL)
            compat_fail("malloc");
        CK(cudaMalloc((void **)&d, n));
        /* the stream held by a host function; the H2D queued behind it has
         * consumed its source when it returns */
        compat_fill(h_in, n, 40 + k);
        CK(cudaLaunchHostFunc(s, hold, NULL));
        CK(cudaMemcpyAsync(d, h_in, n, cudaMemcpyHostToDevice, s));
        memset(h_in, 0xEE, n);
        /* the D2H back, then a host function and a callback look at it */
        memset(h_out, 0, n);
        CK(cudaMemcpyAsync(h_out, d, n, cudaMemcpyDeviceToHost, s));
        struct seen a = {h_out, n, 40 + k, 0, 0}, b = {h_out, n, 40 + k, 0, 0};
        CK(cudaLaunchHostFunc(s, look, &a));
        CK(cudaStreamAddCallback(s, look_callback, &b, 0));
        CK(cudaStreamSynchronize(s));
        if (a.ran != 1 || b.ran != 1)
            compat_fail("a host function or callback did not run once");
        if (!a.right)
            compat_fail("a host function after a pageable D2H saw bytes not yet copied");
        if (!b.right)
            compat_fail("a stream callback after a pageable D2H saw bytes not yet copied");
        COMPAT_EXPECT(h_out, n, 40 + k, "round trip behind a host function");
        CK(cudaFree(d));
        free(h_in);
        free(h_out);
    }
    CK(cudaStreamDestroy(s));
    return compat_pass();
}
