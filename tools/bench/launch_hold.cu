/* launch_hold.cu - how long pinning host memory holds another thread's
 * kernel launches: one thread launches an empty kernel in a loop (each
 * launch call timed) while another pins memory as unstall's grower does
 * (staging.c: mmap, MADV_HUGEPAGE, fault in, cudaHostRegister), phase by
 * phase:
 *   idle       nobody else
 *   populate   8 MiB mappings faulted in (MADV_POPULATE_WRITE), no CUDA call
 *   register8  8 MiB mappings faulted in, then registered
 *   register2  the same bytes in 2 MiB mappings
 *   register8_cold  8 MiB registered without faulting in first
 *   register8a, register2a, register1a  faulted in and registered, each
 *              mapping on a 2 MiB boundary (whole huge pages)
 * Then SPAN lines: one 8 MiB mapping registered as pieces of 2 MiB, and
 * copied whole: whether the driver takes it as pinned (an H2D behind a 20 ms
 * kernel returns at once) and at what bandwidth, against one registration.
 * Per phase one LAUNCH line: launches, median / p99 / worst launch call (us),
 * and the pinning thread's steps: its worst fault-in and registration (us).
 * GPU only. Build and run (nvcc):
 *   nvcc -O2 tools/bench/launch_hold.cu -o launch_hold && ./launch_hold [ROUNDS]
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <atomic>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdint.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define CK(x)                                                                       \
    do {                                                                            \
        cudaError_t e_ = (x);                                                       \
        if (e_ != cudaSuccess) {                                                    \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

__global__ void empty_kernel(void) {}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static std::atomic<int> running;
static double *lat;
static size_t lat_cap, lat_n;

static void *launcher(void *arg)
{
    cudaStream_t s = *(cudaStream_t *)arg;
    CK(cudaSetDevice(0));
    while (running.load()) {
        double t0 = now_us();
        CK(cudaLaunchKernel((const void *)empty_kernel, dim3(1), dim3(1), NULL, 0, s));
        double d = now_us() - t0;
        if (lat_n < lat_cap)
            lat[lat_n++] = d;
        if ((lat_n & 1023) == 0)
            CK(cudaStreamSynchronize(s)); /* keep the queue short */
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One phase: `count` mappings of `bytes`, each faulted in (populate) and
 * registered (reg) as asked; the launcher runs throughout. */
__global__ void sleep_kernel(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

/* A mapping of `bytes` on a 2 MiB boundary (over-mapped, the rest given back). */
static void *map_aligned(size_t bytes)
{
    size_t huge = 2 << 20;
    char *p = (char *)mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    char *a = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (p + bytes + huge > a + bytes)
        munmap(a + bytes, (size_t)(p + bytes + huge - (a + bytes)));
    return a;
}

static int aligned_maps;

static void anon_huge(const char *when)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "AnonHugePages:", 14) == 0)
            printf("THP %s %s", when, line);
    if (f)
        fclose(f);
}

static void span(cudaStream_t s)
{
    size_t bytes = 8 << 20, piece = 2 << 20;
    void *dev;
    CK(cudaMalloc(&dev, bytes));
    char *one = (char *)map_aligned(bytes), *pieces = (char *)map_aligned(bytes);
    madvise(one, bytes, MADV_HUGEPAGE);
    madvise(pieces, bytes, MADV_HUGEPAGE);
    memset(one, 1, bytes);
    memset(pieces, 2, bytes);
    CK(cudaHostRegister(one, bytes, cudaHostRegisterPortable));
    for (size_t at = 0; at < bytes; at += piece)
        CK(cudaHostRegister(pieces + at, piece, cudaHostRegisterPortable));
    int rate;
    CK(cudaDeviceGetAttribute(&rate, cudaDevAttrClockRate, 0));
    for (int which = 0; which < 2; which++) {
        char *src = which ? pieces : one;
        cudaPointerAttributes a;
        CK(cudaPointerGetAttributes(&a, src + bytes - 1));
        sleep_kernel<<<1, 1, 0, s>>>((long long)rate * 20); /* 20 ms */
        double t0 = now_us();
        CK(cudaMemcpyAsync(dev, src, bytes, cudaMemcpyHostToDevice, s));
        double call = now_us() - t0;
        CK(cudaStreamSynchronize(s));
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            t0 = now_us();
            CK(cudaMemcpyAsync(dev, src, bytes, cudaMemcpyHostToDevice, s));
            CK(cudaStreamSynchronize(s));
            double d = now_us() - t0;
            if (d < best)
                best = d;
        }
        printf("SPAN %s type=%d call_behind_20ms_kernel_us=%.0f gbps=%.1f\n", which ? "pieces_2m" : "one",
               (int)a.type, call, bytes / best / 1e3);
    }
    CK(cudaHostUnregister(one));
    for (size_t at = 0; at < bytes; at += piece)
        CK(cudaHostUnregister(pieces + at));
    CK(cudaFree(dev));
}

static void phase(const char *name, size_t bytes, int count, int populate, int reg, cudaStream_t s)
{
    lat_n = 0;
    running.store(1);
    pthread_t th;
    pthread_create(&th, NULL, launcher, &s);
    struct timespec settle = {0, 50 * 1000 * 1000};
    nanosleep(&settle, NULL);
    double worst_fault = 0, worst_reg = 0, sum_reg = 0;
    void **maps = (void **)calloc((size_t)count, sizeof(void *));
    for (int i = 0; i < count; i++) {
        void *p = aligned_maps ? map_aligned(bytes) : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            exit(1);
        }
        maps[i] = p;
        madvise(p, bytes, MADV_HUGEPAGE);
        if (populate) {
            double t0 = now_us();
            if (madvise(p, bytes, MADV_POPULATE_WRITE) != 0)
                memset(p, 0, bytes);
            double d = now_us() - t0;
            if (d > worst_fault)
                worst_fault = d;
        }
        if (reg) {
            double t0 = now_us();
            CK(cudaHostRegister(p, bytes, cudaHostRegisterPortable));
            double d = now_us() - t0;
            sum_reg += d;
            if (d > worst_reg)
                worst_reg = d;
        }
        struct timespec gap = {0, 200 * 1000};
        nanosleep(&gap, NULL);
    }
    if (!populate && !reg) { /* idle: as long as the others take */
        struct timespec idle = {0, 100 * 1000 * 1000};
        nanosleep(&idle, NULL);
    }
    nanosleep(&settle, NULL);
    running.store(0);
    pthread_join(th, NULL);
    if (count > 0)
        anon_huge(name);
    for (int i = 0; i < count; i++) {
        if (reg)
            CK(cudaHostUnregister(maps[i]));
        munmap(maps[i], bytes);
    }
    free(maps);
    qsort(lat, lat_n, sizeof(double), cmp);
    printf("LAUNCH phase=%s bytes=%zu count=%d launches=%zu median_us=%.1f p99_us=%.1f worst_us=%.1f "
           "fault_worst_us=%.0f register_worst_us=%.0f register_mean_us=%.0f\n",
           name, bytes, count, lat_n, lat[lat_n / 2], lat[lat_n * 99 / 100], lat[lat_n - 1], worst_fault, worst_reg,
           reg ? sum_reg / count : 0.0);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 2;
    lat_cap = 1 << 22;
    lat = (double *)malloc(lat_cap * sizeof(double));
    memset(lat, 0, lat_cap * sizeof(double)); /* faulted in before any phase */
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    empty_kernel<<<1, 1, 0, s>>>(); /* module loaded */
    CK(cudaStreamSynchronize(s));
    for (int r = 0; r < rounds; r++) {
        phase("idle", 0, 0, 0, 0, s);
        phase("populate", 8 << 20, 32, 1, 0, s);
        phase("register8", 8 << 20, 32, 1, 1, s);
        phase("register2", 2 << 20, 128, 1, 1, s);
        phase("register8_cold", 8 << 20, 32, 0, 1, s);
        aligned_maps = 1;
        phase("register8a", 8 << 20, 32, 1, 1, s);
        phase("register2a", 2 << 20, 128, 1, 1, s);
        phase("register1a", 1 << 20, 256, 1, 1, s);
        aligned_maps = 0;
    }
    span(s);
    return 0;
}
