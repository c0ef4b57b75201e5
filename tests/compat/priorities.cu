/* priorities.cu - streams created with priorities: pageable copies and
 * kernels on a high- and a low-priority stream at once; the bytes, and the
 * priorities the runtime reports, are those the program set (a stream the
 * shim works on for a copy keeps the program's). */
#include "compat.h"

int main(void)
{
    compat_name = "priorities";
    int least, greatest;
    CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t hi, lo;
    CK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest));
    CK(cudaStreamCreateWithPriority(&lo, cudaStreamNonBlocking, least));
    const size_t n = (size_t)8 << 20;
    unsigned char *h_in[2], *h_out[2], *d_in[2], *d_out[2];
    cudaStream_t st[2] = {hi, lo};
    for (int k = 0; k < 2; k++) {
        h_in[k] = (unsigned char *)malloc(n);
        h_out[k] = (unsigned char *)malloc(n);
        if (h_in[k] == NULL || h_out[k] == NULL)
            compat_fail("malloc");
        compat_fill(h_in[k], n, 60 + k);
        memset(h_out[k], 0, n);
        CK(cudaMalloc((void **)&d_in[k], n));
        CK(cudaMalloc((void **)&d_out[k], n));
    }
    compat_spin<<<1, 1, 0, lo>>>(20000); /* the low-priority stream is busy first */
    CK(cudaGetLastError());
    for (int k = 0; k < 2; k++) {
        CK(cudaMemcpyAsync(d_in[k], h_in[k], n, cudaMemcpyHostToDevice, st[k]));
        compat_add<<<128, 256, 0, st[k]>>>(d_out[k], d_in[k], n, 0);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(h_out[k], d_out[k], n, cudaMemcpyDeviceToHost, st[k]));
    }
    CK(cudaDeviceSynchronize());
    for (int k = 0; k < 2; k++)
        COMPAT_EXPECT(h_out[k], n, 60 + k, k == 0 ? "high-priority stream" : "low-priority stream");
    int got_hi, got_lo;
    CK(cudaStreamGetPriority(hi, &got_hi));
    CK(cudaStreamGetPriority(lo, &got_lo));
    if (got_hi != greatest || got_lo != least)
        compat_fail("a stream's priority changed");
    return compat_pass();
}
