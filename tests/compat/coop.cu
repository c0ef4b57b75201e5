/* coop.cu - a cooperative launch (cudaLaunchCooperativeKernel, a grid-wide
 * barrier in the kernel) between pageable copies in and out on the same
 * stream: every block reads what another wrote before the barrier. */
#include "compat.h"

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

/* out[i] = in[i] + 1 in a first pass, then, after the grid barrier, each
 * thread adds the value another block wrote: out2[i] = out[(i + half) % n] */
__global__ void exchange(const unsigned char *in, unsigned char *out, unsigned char *out2, size_t n)
{
    cg::grid_group grid = cg::this_grid();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = (unsigned char)(in[i] + 1);
    grid.sync();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
        out2[i] = out[(i + n / 2) % n];
}

int main(void)
{
    compat_name = "coop";
    int dev = 0, coop = 0, sms = 0, per_sm = 0;
    CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    if (!coop) {
        printf("COMPAT %s PASS (no cooperative launch on this device: nothing to check)\n", compat_name);
        return 0;
    }
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, exchange, 256, 0));
    const size_t n = (size_t)2 << 20;
    unsigned char *h_in = (unsigned char *)malloc(n), *h_out = (unsigned char *)malloc(n), *d_in, *d_mid, *d_out;
    if (h_in == NULL || h_out == NULL)
        compat_fail("malloc");
    compat_fill(h_in, n, 80);
    CK(cudaMalloc((void **)&d_in, n));
    CK(cudaMalloc((void **)&d_mid, n));
    CK(cudaMalloc((void **)&d_out, n));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    CK(cudaMemcpyAsync(d_in, h_in, n, cudaMemcpyHostToDevice, s));
    size_t nn = n;
    void *args[] = {&d_in, &d_mid, &d_out, &nn};
    CK(cudaLaunchCooperativeKernel((void *)exchange, dim3(sms * per_sm), dim3(256), args, 0, s));
    memset(h_out, 0, n);
    CK(cudaMemcpyAsync(h_out, d_out, n, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    for (size_t i = 0; i < n; i++)
        if (h_out[i] != (unsigned char)(h_in[(i + n / 2) % n] + 1))
            compat_fail("the grid barrier's exchange is wrong");
    return compat_pass();
}
