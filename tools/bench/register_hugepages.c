/* register_hugepages.c - what staging's registration costs (shim/fix/staging.c,
 * fault_in): memory mapped and faulted in with 4 KiB pages (MAP_POPULATE) or
 * with huge pages (MADV_HUGEPAGE, then MADV_POPULATE_WRITE), then
 * cudaHostRegister(portable) and cudaHostUnregister; 2, 16 and 64 MiB, median
 * and worst of 7 (the first included). Needs a GPU:
 *   gcc -O2 -I$CUDA_HOME/include tools/bench/register_hugepages.c -o register_hugepages \
 *       -L$CUDA_HOME/lib64 -lcudart -Wl,-rpath,$CUDA_HOME/lib64 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
int main(void)
{
    cudaFree(0);
    size_t sizes[] = {2u << 20, 16u << 20, 64u << 20};
    for (int si = 0; si < 3; si++)
        for (int huge = 0; huge <= 1; huge++) {
            double pop[7], reg[7], unreg[7];
            for (int r = 0; r < 7; r++) {
                size_t n = sizes[si];
                double t0 = now_ms();
                void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (huge ? 0 : MAP_POPULATE), -1, 0);
                if (huge) { madvise(p, n, MADV_HUGEPAGE); madvise(p, n, MADV_POPULATE_WRITE); }
                madvise(p, n, MADV_DONTFORK);
                double t1 = now_ms();
                if (cudaHostRegister(p, n, cudaHostRegisterPortable) != cudaSuccess) { printf("register failed\n"); return 1; }
                double t2 = now_ms();
                cudaHostUnregister(p);
                double t3 = now_ms();
                munmap(p, n);
                pop[r] = t1 - t0; reg[r] = t2 - t1; unreg[r] = t3 - t2;
            }
            qsort(pop, 7, sizeof(double), cmp); qsort(reg, 7, sizeof(double), cmp); qsort(unreg, 7, sizeof(double), cmp);
            printf("REG %3zu MiB %-9s populate %.3f ms (worst %.3f)  register %.3f ms (worst %.3f)  unregister %.3f ms\n",
                   sizes[si] >> 20, huge ? "hugepage" : "4k", pop[3], pop[6], reg[3], reg[6], unreg[3]);
        }
    return 0;
}
