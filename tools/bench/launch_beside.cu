/* launch_beside.cu - another thread's kernel launches beside a loop of
 * 256 MiB D2H copies, by the way the copies are made and waited for: which
 * part of a fast D2H makes a launch call slow. One thread launches an empty
 * kernel on its own non-blocking stream in a loop (each launch call timed,
 * a stream synchronize every 64, as case_c_pageable_d2h's launch_latency
 * does) for 2 s while another copies in a loop, pattern by pattern:
 *   pageable      cudaMemcpyAsync into malloc memory + stream synchronize
 *                 (what case C times; under unstall, its pipeline)
 *   pinned        one cudaMemcpyAsync into pinned memory + stream synchronize
 *                 (the link's own speed: what a program that copies right gets)
 *   chunks_event  the same bytes as 8 MiB copies, 4 in flight, each followed
 *                 by an event record, the host waiting for each chunk's event
 *                 in cudaEventSynchronize (unstall's D2H without its host copy)
 *   chunks_flag   the same, each chunk followed by a cuStreamWriteValue32 of
 *                 its number into pinned memory, the host spinning on that
 *                 word (no driver call while it waits)
 *   pinned_load   pinned, while 16 other threads copy host memory to host
 *                 memory (unstall's host copy threads' memory traffic, without
 *                 a CUDA call)
 *   pinned_load_nt  the same with non-temporal stores (no read of the
 *                 destination's lines, the cache left alone)
 *   pinned_spin   pinned, while 16 other threads spin without touching memory
 *                 (their CPU time alone)
 * Rounds take turns between the patterns. Per pattern and round one LAUNCH
 * line: copies made, their GB/s, launches, p99 and worst launch call (us),
 * launches over 250 us. GPU only. Build and run (nvcc):
 *   nvcc -O2 tools/bench/launch_beside.cu -o launch_beside -lcuda && ./launch_beside [ROUNDS [PATTERN...]]
 */
#include <cuda.h>
#include <cuda_runtime.h>
#define BENCH_NAME "launch_beside"
#include "bench_cuda.h"
#include <emmintrin.h>
#include <pthread.h>
#include <atomic>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTES ((size_t)256 << 20)
#define CHUNK ((size_t)8 << 20)
#define CHUNKS (BYTES / CHUNK)
#define IN_FLIGHT 4
#define LOAD_THREADS 16
#define LOAD_BYTES ((size_t)64 << 20)
#define RUN_US 2e6

__global__ void empty_kernel(void) {}

static std::atomic<bool> stop_copies, stop_load;

/* --- the launching thread ------------------------------------------------------------- */

struct launches {
    double *lat;
    size_t cap, n;
};

static void *launcher(void *arg)
{
    struct launches *l = (struct launches *)arg;
    CHECK(cudaSetDevice(0));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    empty_kernel<<<1, 1, 0, s>>>();
    CHECK(cudaStreamSynchronize(s));
    double end = bench_now_us() + RUN_US;
    l->n = 0;
    while (l->n < l->cap) {
        double t0 = bench_now_us();
        if (t0 >= end)
            break;
        empty_kernel<<<1, 1, 0, s>>>();
        l->lat[l->n++] = bench_now_us() - t0;
        if (l->n % 64 == 0)
            CHECK(cudaStreamSynchronize(s));
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamDestroy(s));
    return NULL;
}

/* --- the copying thread ---------------------------------------------------------------- */

enum pattern { PAGEABLE, PINNED, CHUNKS_EVENT, CHUNKS_FLAG, PINNED_LOAD, PINNED_LOAD_NT, PINNED_SPIN, PATTERNS };
static const char *const pattern_name[PATTERNS] = {"pageable",    "pinned",         "chunks_event", "chunks_flag",
                                                   "pinned_load", "pinned_load_nt", "pinned_spin"};

struct copier {
    enum pattern pattern;
    void *dev, *pageable, *pinned;
    volatile uint32_t *flag; /* pinned, mapped */
    CUdeviceptr flag_dev;
    long copies;
    double copy_us;
    std::atomic<bool> started;
};

static void chunked_copy(struct copier *c, cudaStream_t s, cudaEvent_t *ev, uint32_t *seq)
{
    for (size_t k = 0; k < CHUNKS + IN_FLIGHT; k++) {
        if (k >= IN_FLIGHT) { /* wait for chunk k - IN_FLIGHT */
            size_t w = k - IN_FLIGHT;
            if (c->pattern == CHUNKS_EVENT)
                CHECK(cudaEventSynchronize(ev[w % IN_FLIGHT]));
            else /* the GPU writes chunk w's number once its bytes are in */
                while ((int32_t)(*c->flag - (*seq + (uint32_t)w + 1)) < 0)
                    __builtin_ia32_pause();
        }
        if (k < CHUNKS) {
            char *dst = (char *)c->pinned + k * CHUNK;
            CHECK(cudaMemcpyAsync(dst, (char *)c->dev + k * CHUNK, CHUNK, cudaMemcpyDeviceToHost, s));
            if (c->pattern == CHUNKS_EVENT)
                CHECK(cudaEventRecord(ev[k % IN_FLIGHT], s));
            else if (cuStreamWriteValue32((CUstream)s, c->flag_dev, *seq + (uint32_t)k + 1, CU_STREAM_WRITE_VALUE_DEFAULT) !=
                     CUDA_SUCCESS) {
                fprintf(stderr, "cuStreamWriteValue32 failed\n");
                exit(1);
            }
        }
    }
    *seq += CHUNKS;
}

static void *copier_main(void *arg)
{
    struct copier *c = (struct copier *)arg;
    CHECK(cudaSetDevice(0));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t ev[IN_FLIGHT];
    for (int i = 0; i < IN_FLIGHT; i++)
        CHECK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
    uint32_t seq = *c->flag;
    while (!stop_copies.load()) {
        double t0 = bench_now_us();
        if (c->pattern == CHUNKS_EVENT || c->pattern == CHUNKS_FLAG) {
            chunked_copy(c, s, ev, &seq);
        } else { /* one whole copy, into malloc memory or pinned */
            CHECK(cudaMemcpyAsync(c->pattern == PAGEABLE ? c->pageable : c->pinned, c->dev, BYTES,
                                  cudaMemcpyDeviceToHost, s));
            CHECK(cudaStreamSynchronize(s));
        }
        c->copy_us += bench_now_us() - t0;
        c->copies++;
        c->started.store(true);
    }
    for (int i = 0; i < IN_FLIGHT; i++)
        CHECK(cudaEventDestroy(ev[i]));
    CHECK(cudaStreamDestroy(s));
    return NULL;
}

/* --- host memory traffic without CUDA ------------------------------------------------- */

struct load {
    char *a, *b;
    enum pattern pattern;
};

/* the stores of the shim's copies into pinned slots (hostcopy.c copy_to_staging), here
 * between two ordinary buffers: this program is built alone, without the shim */
static void copy_nt(char *dst, const char *src, size_t n)
{
    for (size_t i = 0; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
        _mm_stream_si128((__m128i *)(dst + i), a);
        _mm_stream_si128((__m128i *)(dst + i + 16), b);
        _mm_stream_si128((__m128i *)(dst + i + 32), c);
        _mm_stream_si128((__m128i *)(dst + i + 48), d);
    }
    _mm_sfence();
}

static void *load_main(void *arg)
{
    struct load *l = (struct load *)arg;
    volatile uint64_t spin = 0;
    while (!stop_load.load()) {
        if (l->pattern == PINNED_SPIN) {
            for (int i = 0; i < 100000; i++)
                spin = spin * 6364136223846793005u + 1;
        } else if (l->pattern == PINNED_LOAD_NT) {
            copy_nt(l->b, l->a, LOAD_BYTES);
            copy_nt(l->a, l->b, LOAD_BYTES);
        } else {
            memcpy(l->b, l->a, LOAD_BYTES);
            memcpy(l->a, l->b, LOAD_BYTES);
        }
    }
    return NULL;
}

/* --- one round of one pattern ---------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void round_of(struct copier *c, struct launches *l, int round)
{
    c->copies = 0;
    c->copy_us = 0;
    c->started.store(false);
    stop_copies.store(false);
    stop_load.store(false);
    pthread_t load_tid[LOAD_THREADS];
    struct load loads[LOAD_THREADS];
    int loaders = 0;
    bool others_busy = c->pattern == PINNED_LOAD || c->pattern == PINNED_LOAD_NT || c->pattern == PINNED_SPIN;
    if (others_busy)
        for (; loaders < LOAD_THREADS; loaders++) {
            loads[loaders].pattern = c->pattern;
            loads[loaders].a = (char *)malloc(LOAD_BYTES);
            loads[loaders].b = (char *)malloc(LOAD_BYTES);
            memset(loads[loaders].a, 1, LOAD_BYTES);
            memset(loads[loaders].b, 2, LOAD_BYTES);
            pthread_create(&load_tid[loaders], NULL, load_main, &loads[loaders]);
        }
    pthread_t ct, lt;
    pthread_create(&ct, NULL, copier_main, c);
    while (!c->started.load())
        ;
    pthread_create(&lt, NULL, launcher, l);
    pthread_join(lt, NULL);
    stop_copies.store(true);
    pthread_join(ct, NULL);
    stop_load.store(true);
    for (int i = 0; i < loaders; i++) {
        pthread_join(load_tid[i], NULL);
        free(loads[i].a);
        free(loads[i].b);
    }
    qsort(l->lat, l->n, sizeof *l->lat, cmp_double);
    size_t over = 0;
    for (size_t i = 0; i < l->n; i++)
        over += l->lat[i] > 250;
    double mean_copy = c->copies > 0 ? c->copy_us / c->copies : 0;
    printf("LAUNCH pattern=%s round=%d copies=%ld gbps=%.1f launches=%zu p99_us=%.1f max_us=%.1f over_250us=%zu\n",
           pattern_name[c->pattern], round, c->copies, mean_copy > 0 ? BYTES / mean_copy / 1e3 : 0.0, l->n,
           l->n ? l->lat[(size_t)(0.99 * (l->n - 1))] : 0.0, l->n ? l->lat[l->n - 1] : 0.0, over);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    bool want[PATTERNS];
    for (int p = 0; p < PATTERNS; p++)
        want[p] = argc <= 2;
    for (int i = 2; i < argc; i++)
        for (int p = 0; p < PATTERNS; p++)
            if (strcmp(argv[i], pattern_name[p]) == 0)
                want[p] = true;
    CHECK(cudaSetDevice(0));
    struct copier c;
    memset((void *)&c, 0, sizeof c);
    CHECK(cudaMalloc(&c.dev, BYTES));
    CHECK(cudaMemset(c.dev, 7, BYTES));
    c.pageable = malloc(BYTES);
    memset(c.pageable, 0, BYTES);
    CHECK(cudaHostAlloc(&c.pinned, BYTES, cudaHostAllocDefault));
    memset(c.pinned, 0, BYTES);
    uint32_t *flag;
    CHECK(cudaHostAlloc((void **)&flag, 4096, cudaHostAllocMapped));
    *flag = 0;
    c.flag = flag;
    void *flag_dev;
    CHECK(cudaHostGetDevicePointer(&flag_dev, flag, 0));
    c.flag_dev = (CUdeviceptr)flag_dev;
    CUdevice cu_dev;
    int mem_ops = -1;
    if (cuDeviceGet(&cu_dev, 0) == CUDA_SUCCESS)
        cuDeviceGetAttribute(&mem_ops, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, cu_dev);
    printf("stream memory operations: %d (chunks_flag exits where the write is refused)\n", mem_ops);
    struct launches l = {NULL, (size_t)4 << 20, 0};
    l.lat = (double *)malloc(l.cap * sizeof *l.lat);
    for (int r = 1; r <= rounds; r++)
        for (int p = 0; p < PATTERNS; p++)
            if (want[p]) {
                c.pattern = (enum pattern)p;
                round_of(&c, &l, r);
            }
    return 0;
}
