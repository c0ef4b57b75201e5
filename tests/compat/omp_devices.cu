/* omp_devices.cu - one OpenMP thread per device (two per device, for
 * contention), as multi-GPU HPC codes are written: each thread sets its
 * device, and moves pageable data in and out on its own stream and on the
 * legacy stream with a kernel between; every byte checked per thread. */
#include "compat.h"

#include <omp.h>

int main(void)
{
    compat_name = "omp_devices";
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    const size_t n = (size_t)6 << 20;
    int failures = 0;
#pragma omp parallel num_threads(2 * ndev) reduction(+ : failures)
    {
        int t = omp_get_thread_num();
        CK(cudaSetDevice(t % ndev));
        unsigned char *h_in = (unsigned char *)malloc(n), *h_out = (unsigned char *)malloc(n), *d_a, *d_b;
        cudaStream_t s;
        CK(cudaStreamCreate(&s));
        CK(cudaMalloc((void **)&d_a, n));
        CK(cudaMalloc((void **)&d_b, n));
        for (unsigned round = 0; round < 4 && h_in != NULL && h_out != NULL; round++) {
            unsigned seed = 200 + 10 * t + round;
            compat_fill(h_in, n, seed);
            memset(h_out, 0, n);
            cudaStream_t use = round % 2 ? s : 0;
            CK(cudaMemcpyAsync(d_a, h_in, n, cudaMemcpyHostToDevice, use));
            compat_add<<<64, 256, 0, use>>>(d_b, d_a, n, 0);
            CK(cudaGetLastError());
            if (round % 2)
                CK(cudaMemcpyAsync(h_out, d_b, n, cudaMemcpyDeviceToHost, s));
            else
                CK(cudaMemcpy(h_out, d_b, n, cudaMemcpyDeviceToHost));
            CK(cudaStreamSynchronize(use));
            failures += compat_check(h_out, n, seed) != n;
        }
        failures += h_in == NULL || h_out == NULL;
        CK(cudaFree(d_a));
        CK(cudaFree(d_b));
        CK(cudaStreamDestroy(s));
        free(h_in);
        free(h_out);
    }
    if (failures)
        compat_fail("a thread's bytes differ");
    return compat_pass();
}
