/* freshcopy.c - what a copy into freshly allocated host memory costs, the way
 * the shim's D2H host copy writes a program's new buffer (torch's x.cpu()
 * allocates a new tensor every time): a warm source, a destination from
 * malloc each round (an mmap of its own at these sizes), parts copied by T
 * threads, then free(). No GPU: it measures the host alone.
 *
 * Modes: plain (the pages fault in as the copy writes them), hugepage
 * (madvise(MADV_HUGEPAGE) on the destination first), populate
 * (madvise(MADV_POPULATE_WRITE) first, then the copy).
 *
 * Build: gcc -O2 -pthread tools/bench/freshcopy.c -o freshcopy
 * Usage: freshcopy [MiB [rounds [threads...]]]  (default 256 MiB, 6 rounds, 1 and 8 threads)
 * Output, a line per (mode, threads): median and worst GB/s of the copy
 * (madvise included), median and worst ms of the free(). The first round counts. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum mode { PLAIN, HUGEPAGE, POPULATE, MODES };
static const char *const mode_name[MODES] = { "plain", "hugepage", "populate" };

struct part { char *dst; const char *src; size_t bytes; };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *copy_part(void *arg)
{
    struct part *p = arg;
    memcpy(p->dst, p->src, p->bytes);
    return NULL;
}

static void parallel_copy(char *dst, const char *src, size_t bytes, unsigned threads)
{
    pthread_t tid[64];
    struct part parts[64];
    size_t each = (bytes / threads + 4095) & ~(size_t)4095;
    unsigned n = 0;
    for (size_t off = 0; off < bytes && n < threads; off += each, n++) {
        parts[n] = (struct part){ dst + off, src + off, bytes - off < each ? bytes - off : each };
        if (n > 0)
            pthread_create(&tid[n], NULL, copy_part, &parts[n]);
    }
    copy_part(&parts[0]);
    for (unsigned i = 1; i < n; i++)
        pthread_join(tid[i], NULL);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t bytes = (argc > 1 ? strtoull(argv[1], NULL, 0) : 256) << 20;
    int rounds = argc > 2 ? atoi(argv[2]) : 6;
    unsigned tlist[8] = { 1, 8 }, tcount = 2;
    if (argc > 3) {
        tcount = 0;
        for (int i = 3; i < argc && tcount < 8; i++)
            tlist[tcount++] = (unsigned)atoi(argv[i]);
    }
    if (rounds < 1 || rounds > 64)
        rounds = 6;
    char *src = malloc(bytes);
    if (src == NULL)
        return 1;
    memset(src, 7, bytes);
    printf("freshcopy: %zu MiB, %d rounds (GB/s of the copy into new memory; ms of its free)\n", bytes >> 20, rounds);
    for (unsigned t = 0; t < tcount; t++)
        for (int m = 0; m < MODES; m++) {
            double gbps[64], freems[64];
            for (int r = 0; r < rounds; r++) {
                double t0 = now_s();
                char *dst = malloc(bytes);
                if (dst == NULL)
                    return 1;
                if (m == HUGEPAGE || m == POPULATE) {
                    char *lo = (char *)(((size_t)dst + 4095) & ~(size_t)4095);
                    size_t len = (size_t)(dst + bytes - lo) & ~(size_t)4095;
                    (void)madvise(lo, len, m == HUGEPAGE ? MADV_HUGEPAGE : MADV_POPULATE_WRITE);
                }
                parallel_copy(dst, src, bytes, tlist[t]);
                double t1 = now_s();
                if (dst[bytes - 1] != 7)
                    return 2;
                free(dst);
                double t2 = now_s();
                gbps[r] = bytes / (t1 - t0) / 1e9;
                freems[r] = (t2 - t1) * 1e3;
            }
            qsort(gbps, rounds, sizeof gbps[0], cmp);
            qsort(freems, rounds, sizeof freems[0], cmp);
            printf("FRESHCOPY mode=%-8s threads=%-2u gbps_median=%6.2f gbps_worst=%6.2f free_ms_median=%7.2f free_ms_worst=%7.2f\n",
                   mode_name[m], tlist[t], gbps[rounds / 2], gbps[0], freems[rounds / 2], freems[rounds - 1]);
            fflush(stdout);
        }
    free(src);
    return 0;
}
