/* pipe_tests.c - the pipelines (case A, B, C) under the shim on the simulated
 * runtime (docs/fakecuda.md): data, ordering, the native stalls gone, graph
 * capture, asynchronous errors and fault injection.
 *
 * Usage: pipe_tests TEST... (or "all": every test that needs no special
 * environment). Prints "PASS name" or "FAIL name: line: what" per test; the
 * exit status is the number of failures. PIPE_NATIVE=1: the program runs
 * without the shim (checks of what only the shim does are skipped), which
 * shows that the tests themselves are right. tests/pipelines/run.sh runs it. */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "fakecuda.h"
#include "thp.h"

/* the per-thread-stream entry a program built with --default-stream per-thread calls */
extern cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                        cudaStream_t stream);

#define CHUNK (256u << 10) /* run.sh sets UNSTALL_CHUNK_BYTES to this */

static bool native;   /* PIPE_NATIVE=1: no shim */
static bool sanitized; /* TEST_SANITIZER set (tests/sanitize.sh): speed-only checks are not judged */
static int failures;
static const char *current_test;
static char failure[512];

#define CHECK(cond, ...)                                                                   \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            int n_ = snprintf(failure, sizeof failure, "%d: %s: ", __LINE__, #cond);       \
            snprintf(failure + n_, sizeof failure - (size_t)n_, __VA_ARGS__);              \
            return false;                                                                   \
        }                                                                                   \
    } while (0)
#define CUDA(call) CHECK((call) == cudaSuccess, "%s", "CUDA call failed")

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static unsigned char pattern(size_t i, unsigned seed)
{
    uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u + 17;
    return (unsigned char)(x >> 13 ^ x);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(i, seed);
}

/* offset of the first wrong byte, or -1 */
static long mismatch(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern(i, seed))
            return (long)i;
    return -1;
}

static bool all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

/* --- kernels (host functions run by the stream workers) ---------------------------- */

static void sleep_kernel(void **args) /* (double us) */
{
    fakecuda_sleep_us(*(double *)args[0]);
}

static void write_kernel(void **args) /* (unsigned char *p, size_t n, unsigned seed, double us) */
{
    fakecuda_sleep_us(*(double *)args[3]);
    fill(*(unsigned char **)args[0], *(size_t *)args[1], *(unsigned *)args[2]);
}

static void check_kernel(void **args) /* (const unsigned char *p, size_t n, unsigned seed, int *ok) */
{
    **(int **)args[3] = mismatch(*(const unsigned char **)args[0], *(size_t *)args[1], *(unsigned *)args[2]) < 0;
}

static const dim3 one = {1, 1, 1};

static cudaError_t launch_sleep(cudaStream_t s, double us)
{
    void *args[] = {&us};
    return cudaLaunchKernel((const void *)sleep_kernel, one, one, args, 0, s);
}

static cudaError_t launch_write(cudaStream_t s, unsigned char *p, size_t n, unsigned seed, double us)
{
    void *args[] = {&p, &n, &seed, &us};
    return cudaLaunchKernel((const void *)write_kernel, one, one, args, 0, s);
}

static cudaError_t launch_check(cudaStream_t s, const unsigned char *p, size_t n, unsigned seed, int *ok)
{
    void *args[] = {&p, &n, &seed, &ok};
    return cudaLaunchKernel((const void *)check_kernel, one, one, args, 0, s);
}

static void write_words_kernel(void **args); /* cross-device tests, below */

static void register_kernels(void)
{
    size_t sleep_sizes[] = {sizeof(double)};
    size_t write_sizes[] = {sizeof(void *), sizeof(size_t), sizeof(unsigned), sizeof(double)};
    size_t check_sizes[] = {sizeof(void *), sizeof(size_t), sizeof(unsigned), sizeof(int *)};
    fakecuda_register_kernel((const void *)sleep_kernel, 1, sleep_sizes);
    fakecuda_register_kernel((const void *)write_kernel, 4, write_sizes);
    fakecuda_register_kernel((const void *)check_kernel, 4, check_sizes);
    size_t words_sizes[] = {sizeof(void *), sizeof(size_t), sizeof(uint32_t), sizeof(double)};
    fakecuda_register_kernel((const void *)write_words_kernel, 4, words_sizes);
}

static void *dev_alloc(int device, size_t bytes)
{
    int cur;
    void *p = NULL;
    cudaGetDevice(&cur);
    cudaSetDevice(device);
    if (cudaMalloc(&p, bytes) != cudaSuccess)
        p = NULL;
    cudaSetDevice(cur);
    return p;
}

static cudaStream_t stream_on(int device, unsigned flags)
{
    int cur;
    cudaStream_t s = NULL;
    cudaGetDevice(&cur);
    cudaSetDevice(device);
    cudaStreamCreateWithFlags(&s, flags);
    cudaSetDevice(cur);
    return s;
}

/* The shim rewrote what was copied since the last reset: no pageable or
 * staged copy reached the runtime. */
static bool rewritten(void)
{
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    return native || (st.copies_pageable == 0 && st.copies_staged == 0 && st.copies_pinned > 0);
}

/* --- data ------------------------------------------------------------------------- */

static const size_t sizes[] = {1, 4097, CHUNK - 1, CHUNK, CHUNK + 1, 5 * CHUNK + 123};
#define NSIZES (sizeof sizes / sizeof sizes[0])

enum dir { H2D, D2H, PEER };
enum api { ASYNC, ASYNC_PTSZ, SYNC, PEER_ASYNC, PEER_SYNC, ASYNC_D2D_KIND };

/* One copy of `bytes` into the middle of a buffer (offset 7) from the middle of
 * another (offset 3), then every byte of the destination checked. */
static bool copy_one(enum dir dir, enum api api, size_t bytes, cudaStream_t s, int dev_a, int dev_b,
                     unsigned seed)
{
    size_t total = bytes + 64;
    unsigned char *src, *dst, *hsrc = NULL, *hdst = NULL;
    if (dir == H2D) {
        src = hsrc = malloc(total);
        dst = dev_alloc(dev_a, total);
    } else if (dir == D2H) {
        src = dev_alloc(dev_a, total);
        dst = hdst = malloc(total);
    } else {
        src = dev_alloc(dev_a, total);
        dst = dev_alloc(dev_b, total);
    }
    CHECK(src != NULL && dst != NULL, "allocation");
    memset(dst, 0xEE, total); /* device memory is host memory in fakecuda */
    fill(src + 3, bytes, seed);
    cudaError_t err = cudaErrorUnknown;
    switch (api) {
    case ASYNC: err = cudaMemcpyAsync(dst + 7, src + 3, bytes, cudaMemcpyDefault, s); break;
    case ASYNC_PTSZ: err = cudaMemcpyAsync_ptsz(dst + 7, src + 3, bytes, cudaMemcpyDefault, s); break;
    case ASYNC_D2D_KIND: err = cudaMemcpyAsync(dst + 7, src + 3, bytes, cudaMemcpyDeviceToDevice, s); break;
    case SYNC: err = cudaMemcpy(dst + 7, src + 3, bytes, cudaMemcpyDefault); break;
    case PEER_ASYNC: err = cudaMemcpyPeerAsync(dst + 7, dev_b, src + 3, dev_a, bytes, s); break;
    case PEER_SYNC: err = cudaMemcpyPeer(dst + 7, dev_b, src + 3, dev_a, bytes); break;
    }
    CHECK(err == cudaSuccess, "copy of %zu bytes (dir %d api %d): %s", bytes, dir, api, cudaGetErrorName(err));
    if (api != SYNC && api != PEER_SYNC)
        CUDA(cudaStreamSynchronize(api == ASYNC_PTSZ && s == NULL ? cudaStreamPerThread : s));
    else if (dir == PEER && api == SYNC)
        CUDA(cudaDeviceSynchronize()); /* a D2D cudaMemcpy need not wait */
    long bad = mismatch(dst + 7, bytes, seed);
    CHECK(bad < 0, "%zu bytes (dir %d api %d): byte %ld differs", bytes, dir, api, bad);
    CHECK(all_bytes(dst, 7, 0xEE) && all_bytes(dst + 7 + bytes, total - 7 - bytes, 0xEE),
          "%zu bytes (dir %d api %d): wrote outside the range", bytes, dir, api);
    free(hsrc);
    free(hdst);
    if (dir != H2D)
        cudaFree(src);
    if (dir != D2H)
        cudaFree(dst);
    return true;
}

/* The first-use helpers (alloc_record.so, tests below). */
struct alloc_record {
    size_t (*largest_here)(void);
    size_t (*total_here)(void);
    void (*reset_here)(void);
    unsigned long (*done)(void);
};

static bool alloc_record_find(struct alloc_record *r)
{
    *(void **)&r->largest_here = dlsym(RTLD_DEFAULT, "alloc_record_largest_here");
    *(void **)&r->total_here = dlsym(RTLD_DEFAULT, "alloc_record_total_here");
    *(void **)&r->reset_here = dlsym(RTLD_DEFAULT, "alloc_record_reset_here");
    *(void **)&r->done = dlsym(RTLD_DEFAULT, "alloc_record_done");
    return r->largest_here && r->total_here && r->reset_here && r->done;
}

/* The copies since the last fakecuda_reset_stats() were all rewritten
 * (pageable ones: the peer copies are not counted). */
static bool all_rewritten(void)
{
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    return st.copies_pageable == 0 && st.copies_pinned > 0;
}

/* Repeats a pageable copy of n bytes (H2D from h into d, or D2H from d into
 * h) until the shim rewrites it, 10 ms apart, for at most 5 s (a deadline for
 * a grower that never delivers, not a measure: it takes tens of ms); every
 * try's data is checked. Returns the tries it took (1: the first), 0 if it
 * never was. A rewritten copy must pin nothing on this thread (rec: NULL, not
 * checked). Warms the pool for a test that needs the copy rewritten: a copy
 * that finds too few slots goes native while the grower adds them. */
static unsigned until_rewritten(enum dir dir, unsigned char *h, unsigned char *d, size_t n, cudaStream_t s,
                                const struct alloc_record *rec, unsigned seed)
{
    double deadline = now_ms() + 5000;
    for (unsigned tries = 1; now_ms() < deadline; tries++) {
        fakecuda_reset_stats();
        if (rec != NULL)
            rec->reset_here();
        if (dir == H2D) {
            fill(h, n, seed + tries);
            if (cudaMemcpy(d, h, n, cudaMemcpyHostToDevice) != cudaSuccess || mismatch(d, n, seed + tries) >= 0)
                return 0;
        } else {
            fill(d, n, seed + tries); /* device memory is host memory in fakecuda */
            memset(h, 0, n);
            if (cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s) != cudaSuccess ||
                mismatch(h, n, seed + tries) >= 0)
                return 0;
        }
        if (all_rewritten())
            return rec == NULL || rec->total_here() == 0 ? tries : 0;
        usleep(10000);
    }
    return 0;
}

/* Every size of `sizes` in both directions until it is rewritten: once the
 * pool holds their slots, every copy is. */
static bool warm_pool(cudaStream_t s)
{
    if (native)
        return true;
    size_t max = sizes[NSIZES - 1];
    unsigned char *h = malloc(max), *d = dev_alloc(0, max);
    CHECK(h != NULL && d != NULL, "%s", "out of memory");
    for (size_t i = 0; i < NSIZES; i++)
        CHECK(until_rewritten(H2D, h, d, sizes[i], s, NULL, 200) > 0 &&
                  until_rewritten(D2H, h, d, sizes[i], s, NULL, 210) > 0,
              "copies of %zu bytes were never rewritten", sizes[i]);
    cudaFree(d);
    free(h);
    return true;
}

static bool t_data(void)
{
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    cudaStream_t b = stream_on(0, cudaStreamDefault);
    if (!warm_pool(s))
        return false;
    fakecuda_reset_stats();
    for (size_t i = 0; i < NSIZES; i++) {
        size_t n = sizes[i];
        unsigned seed = (unsigned)i + 1;
        if (!copy_one(H2D, ASYNC, n, s, 0, 0, seed) || !copy_one(H2D, SYNC, n, s, 0, 0, seed) ||
            !copy_one(H2D, ASYNC, n, b, 0, 0, seed) || !copy_one(H2D, ASYNC, n, NULL, 0, 0, seed) ||
            !copy_one(H2D, ASYNC_PTSZ, n, NULL, 0, 0, seed) ||
            !copy_one(D2H, ASYNC, n, s, 0, 0, seed) || !copy_one(D2H, SYNC, n, s, 1, 0, seed) ||
            !copy_one(D2H, ASYNC, n, cudaStreamPerThread, 0, 0, seed) ||
            !copy_one(D2H, ASYNC_PTSZ, n, NULL, 0, 0, seed) ||
            !copy_one(PEER, PEER_ASYNC, n, s, 0, 1, seed) || !copy_one(PEER, PEER_ASYNC, n, s, 1, 0, seed) ||
            !copy_one(PEER, PEER_SYNC, n, s, 0, 1, seed) || !copy_one(PEER, ASYNC, n, b, 1, 0, seed) ||
            !copy_one(PEER, ASYNC_D2D_KIND, n, NULL, 0, 1, seed) || !copy_one(PEER, SYNC, n, s, 0, 1, seed))
            return false;
    }
    CHECK(rewritten(), "%s", "some copies went native");
    return true;
}

/* Several threads, each on its own kind of stream, round trips through all three pipelines. */
struct worker {
    int id;
    bool ok;
    char why[512];
};

static bool round_trips(int id)
{
    int dev = id % 2, other = 1 - dev;
    cudaSetDevice(dev);
    cudaStream_t s = id == 0 ? stream_on(dev, cudaStreamNonBlocking)
                     : id == 1 ? stream_on(dev, cudaStreamDefault)
                     : id == 2 ? NULL /* legacy */
                               : cudaStreamPerThread;
    size_t max = 5 * CHUNK + 123;
    unsigned char *h = malloc(max), *back = malloc(max);
    unsigned char *a = dev_alloc(dev, max), *b = dev_alloc(other, max);
    CHECK(h && back && a && b, "allocation");
    for (int round = 0; round < 12; round++) {
        size_t n = sizes[(size_t)(round + id) % NSIZES];
        unsigned seed = (unsigned)(id * 100 + round);
        fill(h, n, seed);
        memset(back, 0, n);
        CUDA(cudaMemcpyAsync(a, h, n, cudaMemcpyHostToDevice, s));
        memset(h, 0, n); /* the source was consumed: the caller may reuse it at once */
        if (round % 3 == 0)
            CUDA(cudaMemcpyPeerAsync(b, other, a, dev, n, s));
        else
            CUDA(cudaMemcpyAsync(b, a, n, cudaMemcpyDefault, s));
        if (round % 4 == 1) { /* cudaMemcpy: the legacy stream, which a non-blocking s does not order */
            CUDA(cudaStreamSynchronize(s));
            CUDA(cudaMemcpy(back, b, n, cudaMemcpyDeviceToHost));
        } else {
            CUDA(cudaMemcpyAsync(back, b, n, cudaMemcpyDeviceToHost, s));
        }
        long bad = mismatch(back, n, seed); /* in place on return */
        CHECK(bad < 0, "thread %d round %d: %zu bytes, byte %ld differs", id, round, n, bad);
    }
    CUDA(cudaStreamSynchronize(s));
    free(h);
    free(back);
    return true;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    w->ok = round_trips(w->id);
    if (!w->ok)
        snprintf(w->why, sizeof w->why, "%s", failure);
    return NULL;
}

/* The round trips on four threads at once, with the right data every time.
 * A copy that finds the pool short (the other threads hold its slots) goes
 * native while the grower adds slots, so passes repeat until the pool holds
 * what four threads use at once; from then on every copy is rewritten (at
 * most 20 passes; one or two are usual). */
static bool t_threads(void)
{
    bool all = false;
    for (int pass = 0; pass < 20 && !all; pass++) {
        fakecuda_reset_stats();
        struct worker w[4];
        pthread_t t[4];
        for (int i = 0; i < 4; i++) {
            w[i] = (struct worker){.id = i};
            pthread_create(&t[i], NULL, worker_main, &w[i]);
        }
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
        for (int i = 0; i < 4; i++)
            CHECK(w[i].ok, "%s", w[i].why);
        all = rewritten();
    }
    CHECK(all, "%s", "some copies went native in every pass");
    return true;
}

/* --- ordering ---------------------------------------------------------------------- */

/* Work after the copy sees its data: a kernel on the same stream, a kernel on
 * another stream ordered by an event, the stream's and the event's syncs. */
static bool t_order(void)
{
    size_t n = 3 * CHUNK + 5;
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking), other = stream_on(1, cudaStreamNonBlocking);
    unsigned char *h = malloc(n), *a = dev_alloc(0, n), *b = dev_alloc(1, n), *back = malloc(n);
    int ok_same = 0, ok_peer = 0;
    cudaEvent_t ev;
    CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    fill(h, n, 11);
    /* H2D behind a kernel, a kernel after it on the stream */
    CUDA(launch_sleep(s, 100000));
    CUDA(cudaMemcpyAsync(a, h, n, cudaMemcpyHostToDevice, s));
    CUDA(launch_check(s, a, n, 11, &ok_same));
    /* a peer copy after it, then another device's stream ordered by an event */
    CUDA(cudaMemcpyPeerAsync(b, 1, a, 0, n, s));
    CUDA(cudaEventRecord(ev, s));
    CUDA(cudaStreamWaitEvent(other, ev, 0));
    CUDA(launch_check(other, b, n, 11, &ok_peer));
    if (!native)
        CHECK(cudaStreamQuery(s) == cudaErrorNotReady, "%s", "the stream is done before its kernel");
    CUDA(cudaStreamSynchronize(other));
    CHECK(ok_same && ok_peer, "a kernel after the copy saw other data (same stream %d, other stream %d)",
          ok_same, ok_peer);
    CHECK(cudaStreamQuery(s) == cudaSuccess, "%s", "the stream is not done after the event it waited for");
    CHECK(mismatch(b, n, 11) < 0, "%s", "peer data");

    /* D2H after a kernel that writes the source: the copy reads what the kernel wrote */
    CUDA(launch_write(s, a, n, 12, 100000));
    CUDA(cudaMemcpyAsync(back, a, n, cudaMemcpyDeviceToHost, s));
    CHECK(mismatch(back, n, 12) < 0, "%s", "the D2H did not see the kernel's data on return");

    /* cudaEventSynchronize and cudaDeviceSynchronize observe a peer copy */
    CUDA(launch_write(s, a, n, 13, 50000));
    CUDA(cudaMemcpyAsync(b, a, n, cudaMemcpyDefault, s));
    CUDA(cudaEventRecord(ev, s));
    CUDA(cudaEventSynchronize(ev));
    CHECK(mismatch(b, n, 13) < 0, "%s", "cudaEventSynchronize returned before the peer copy landed");
    CUDA(launch_write(s, a, n, 14, 50000));
    CUDA(cudaMemcpyAsync(b, a, n, cudaMemcpyDefault, s));
    CUDA(cudaDeviceSynchronize());
    CHECK(mismatch(b, n, 14) < 0, "%s", "cudaDeviceSynchronize returned before the peer copy landed");
    free(h);
    free(back);
    return true;
}

/* --- cross-device ordering of the legacy stream ----------------------------------- */

/* A copy on the legacy stream between two devices serializes with the legacy
 * streams, hence the blocking streams, of both devices, whichever is current
 * (contract.md §1; cudaMemcpyPeer's documentation): it
 * waits for their earlier work, and their later work waits for it. The
 * per-thread default stream is a blocking stream of the current device only:
 * a copy on it does not wait for another stream's work. 4 MiB of random
 * words, checked word by word. */
#define XDEV_WORDS (1u << 20)

enum xdev_api { X_MEMCPY, X_PEER, X_ASYNC_0, X_ASYNC_LEGACY, X_PEER_ASYNC_0, X_NAPIS };
static const char *const xdev_api_names[X_NAPIS] = {
    "cudaMemcpy", "cudaMemcpyPeer", "cudaMemcpyAsync(0)", "cudaMemcpyAsync(cudaStreamLegacy)",
    "cudaMemcpyPeerAsync(0)",
};

static uint32_t xdev_seed; /* random per run, printed on a failure */

static uint32_t word(size_t i, uint32_t seed)
{
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15u + seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return (uint32_t)(z ^ (z >> 31));
}

static void fill_words(uint32_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = word(i, seed);
}

static size_t words_right(const uint32_t *p, size_t n, uint32_t seed)
{
    size_t right = 0;
    for (size_t i = 0; i < n; i++)
        right += p[i] == word(i, seed);
    return right;
}

static void write_words_kernel(void **args) /* (uint32_t *p, size_t n, uint32_t seed, double us) */
{
    fakecuda_sleep_us(*(double *)args[3]);
    fill_words(*(uint32_t **)args[0], *(size_t *)args[1], *(uint32_t *)args[2]);
}

static cudaError_t launch_write_words(cudaStream_t s, uint32_t *p, size_t n, uint32_t seed, double us)
{
    void *args[] = {&p, &n, &seed, &us};
    return cudaLaunchKernel((const void *)write_words_kernel, one, one, args, 0, s);
}

/* d1 <- d0 (d0 on device 0, d1 on device 1) through `api`, device `current` current. */
static cudaError_t xdev_copy(enum xdev_api api, int current, uint32_t *d1, const uint32_t *d0)
{
    size_t bytes = XDEV_WORDS * sizeof(uint32_t);
    cudaError_t err = cudaSetDevice(current);
    if (err != cudaSuccess)
        return err;
    switch (api) {
    case X_MEMCPY: return cudaMemcpy(d1, d0, bytes, cudaMemcpyDeviceToDevice);
    case X_PEER: return cudaMemcpyPeer(d1, 1, d0, 0, bytes);
    case X_ASYNC_0: return cudaMemcpyAsync(d1, d0, bytes, cudaMemcpyDeviceToDevice, 0);
    case X_ASYNC_LEGACY: return cudaMemcpyAsync(d1, d0, bytes, cudaMemcpyDefault, cudaStreamLegacy);
    case X_PEER_ASYNC_0: return cudaMemcpyPeerAsync(d1, 1, d0, 0, bytes, 0);
    default: return cudaErrorInvalidValue;
    }
}

static bool both_devices_synchronize(void)
{
    for (int dev = 0; dev < 2; dev++) {
        CUDA(cudaSetDevice(dev));
        CUDA(cudaDeviceSynchronize());
    }
    CUDA(cudaSetDevice(0));
    return true;
}

/* Earlier work: a kernel on device 0's blocking stream writes the source, a
 * kernel on device 1's blocking stream writes junk into the destination; the
 * copy lands after both. The other device's kernel is the long one, so that
 * a copy ordered only with the current device's streams is caught every time. */
static bool t_cross_device_before(void)
{
    size_t bytes = XDEV_WORDS * sizeof(uint32_t);
    uint32_t *d0 = dev_alloc(0, bytes), *d1 = dev_alloc(1, bytes);
    cudaStream_t s0 = stream_on(0, cudaStreamDefault), s1 = stream_on(1, cudaStreamDefault);
    CHECK(d0 != NULL && d1 != NULL && s0 != NULL && s1 != NULL, "%s", "allocation");
    for (int api = 0; api < X_NAPIS; api++) {
        for (int current = 0; current < 2; current++) {
            uint32_t old = xdev_seed + 1, fresh = xdev_seed + 2, junk = xdev_seed + 3;
            fill_words(d0, XDEV_WORDS, old); /* device memory is host memory in fakecuda */
            memset(d1, 0, bytes);
            CUDA(launch_write_words(s0, d0, XDEV_WORDS, fresh, current == 0 ? 20000 : 200000));
            CUDA(launch_write_words(s1, d1, XDEV_WORDS, junk, current == 1 ? 20000 : 200000));
            cudaError_t err = xdev_copy(api, current, d1, d0);
            CHECK(err == cudaSuccess, "%s, current device %d: %s", xdev_api_names[api], current,
                  cudaGetErrorName(err));
            if (!both_devices_synchronize())
                return false;
            size_t right = words_right(d1, XDEV_WORDS, fresh);
            CHECK(right == XDEV_WORDS, "%s, current device %d: %zu of %u words right (seed %u)",
                  xdev_api_names[api], current, right, XDEV_WORDS, xdev_seed);
        }
    }
    cudaStreamDestroy(s0);
    cudaStreamDestroy(s1);
    cudaFree(d0);
    cudaFree(d1);
    return true;
}

/* Later work: the copy is held back by a kernel on the current device's
 * legacy stream; a kernel issued after it on the other device's blocking
 * stream overwrites that device's side, and must run after the copy: the
 * source was read before (device 0), the destination written before
 * (device 1). */
static bool t_cross_device_after(void)
{
    size_t bytes = XDEV_WORDS * sizeof(uint32_t);
    uint32_t *d0 = dev_alloc(0, bytes), *d1 = dev_alloc(1, bytes);
    cudaStream_t s[2] = {stream_on(0, cudaStreamDefault), stream_on(1, cudaStreamDefault)};
    CHECK(d0 != NULL && d1 != NULL && s[0] != NULL && s[1] != NULL, "%s", "allocation");
    for (int api = 0; api < X_NAPIS; api++) {
        for (int current = 0; current < 2; current++) {
            int other = 1 - current;
            uint32_t data = xdev_seed + 4, later = xdev_seed + 5;
            fill_words(d0, XDEV_WORDS, data);
            memset(d1, 0, bytes);
            CUDA(cudaSetDevice(current));
            CUDA(launch_sleep(0, 100000));
            cudaError_t err = xdev_copy(api, current, d1, d0);
            CHECK(err == cudaSuccess, "%s, current device %d: %s", xdev_api_names[api], current,
                  cudaGetErrorName(err));
            CUDA(cudaSetDevice(other));
            CUDA(launch_write_words(s[other], other == 0 ? d0 : d1, XDEV_WORDS, later, 0));
            if (!both_devices_synchronize())
                return false;
            uint32_t want = other == 0 ? data : later;
            size_t right = words_right(d1, XDEV_WORDS, want);
            CHECK(right == XDEV_WORDS, "%s, current device %d: %zu of %u words right: device %d's later "
                  "kernel did not wait for the copy (seed %u)", xdev_api_names[api], current, right, XDEV_WORDS,
                  other, xdev_seed);
        }
    }
    cudaStreamDestroy(s[0]);
    cudaStreamDestroy(s[1]);
    cudaFree(d0);
    cudaFree(d1);
    return true;
}

/* The per-thread default stream orders with nothing on the other device, nor
 * with the current device's other blocking streams: the copy is done while
 * the kernel ahead of it on device 0's blocking stream still runs. The
 * kernel writes a buffer of its own: were it the copy's source, the test
 * would itself be the data race it shows (ThreadSanitizer says so). */
static bool t_cross_device_ptsz(void)
{
    size_t bytes = XDEV_WORDS * sizeof(uint32_t);
    uint32_t *d0 = dev_alloc(0, bytes), *d1 = dev_alloc(1, bytes), *busy = dev_alloc(0, bytes);
    cudaStream_t s0 = stream_on(0, cudaStreamDefault);
    CHECK(d0 != NULL && d1 != NULL && busy != NULL && s0 != NULL, "%s", "allocation");
    for (int current = 0; current < 2; current++) {
        uint32_t source = xdev_seed + 6;
        fill_words(d0, XDEV_WORDS, source);
        memset(d1, 0, bytes);
        CUDA(launch_write_words(s0, busy, XDEV_WORDS, xdev_seed + 7, 300000));
        CUDA(cudaSetDevice(current));
        CUDA(cudaMemcpyAsync_ptsz(d1, d0, bytes, cudaMemcpyDeviceToDevice, 0));
        CUDA(cudaStreamSynchronize(cudaStreamPerThread));
        CHECK(cudaStreamQuery(s0) == cudaErrorNotReady,
              "current device %d: the per-thread stream waited for another stream's kernel", current);
        size_t right = words_right(d1, XDEV_WORDS, source);
        CHECK(right == XDEV_WORDS, "current device %d: %zu of %u words copied (seed %u)", current, right,
              XDEV_WORDS, xdev_seed);
        if (!both_devices_synchronize())
            return false;
    }
    cudaStreamDestroy(s0);
    cudaFree(d0);
    cudaFree(d1);
    cudaFree(busy);
    return true;
}

/* --- the native stalls gone -------------------------------------------------------- */

/* A staged peer copy sent native on an idle stream asks the grower to fault
 * the next lane's ring in ahead; the copy that makes the lane (behind queued
 * work, rewritten) registers that ring instead of faulting one in inside its
 * call (run.sh checks the shim's debug log for both), and its data arrive. */
static bool t_peer_ring_ahead(void)
{
    const size_t small = CHUNK, large = 8 * CHUNK;
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    unsigned char *h = malloc(large), *a = dev_alloc(0, large), *b = dev_alloc(1, large);
    CHECK(h != NULL && a != NULL && b != NULL, "%s", "out of memory");
    fill(h, large, 31);
    CUDA(cudaMemcpy(a, h, large, cudaMemcpyHostToDevice));
    CUDA(cudaMemcpyPeerAsync(b, 1, a, 0, small, s)); /* idle stream: native */
    CUDA(cudaStreamSynchronize(s));
    CHECK(mismatch(b, small, 31) < 0, "%s", "the small copy's data");
    struct timespec pause = {0, 500 * 1000000L}; /* the grower faults a 1 MiB ring in within it */
    nanosleep(&pause, NULL);
    CUDA(launch_sleep(s, 20000));
    CUDA(cudaMemcpyPeerAsync(b, 1, a, 0, large, s)); /* behind the kernel: rewritten, the lane made */
    CUDA(cudaStreamSynchronize(s));
    CHECK(mismatch(b, large, 31) < 0, "%s", "the large copy's data");
    free(h);
    cudaFree(a);
    cudaFree(b);
    cudaStreamDestroy(s);
    return true;
}

/* A stream's first same-device copy is not timed (busy_d2d_probe_ms): its
 * timing event would be the new stream's first work, which costs a GPU's
 * stream setup inside the call. Three copies of different sizes, each
 * synchronized, 3 ms apart: the second is the stream's first timed copy,
 * read at the third (run.sh checks the debug log: a timed copy of the
 * second's size, none of the first's), and the data arrive. The
 * synchronization makes the pair done when the next copy reads it, however
 * slowly the simulated runtime runs (a sanitizer, a loaded machine). */
static bool t_d2d_first_untimed(void)
{
    const size_t sizes[3] = {4096, 8192, 12288};
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    unsigned char *a = dev_alloc(0, sizes[2]), *b = dev_alloc(0, sizes[2]);
    CHECK(a != NULL && b != NULL, "%s", "out of memory");
    fill(a, sizes[2], 43);
    struct timespec pause = {0, 3 * 1000000L};
    for (int i = 0; i < 3; i++) {
        if (i > 0)
            nanosleep(&pause, NULL);
        CUDA(cudaMemcpyAsync(b, a, sizes[i], cudaMemcpyDeviceToDevice, s));
        CUDA(cudaStreamSynchronize(s));
    }
    CHECK(mismatch(b, sizes[2], 43) < 0, "%s", "the copies' data");
    cudaFree(a);
    cudaFree(b);
    cudaStreamDestroy(s);
    return true;
}

/* Case A's stall of an independent copy: an independent staged copy on
 * stream B is not delayed by stream A's long kernel and staged copy. */
static bool t_independent_stream(void)
{
    size_t n = 16u << 20;
    unsigned char *a0 = dev_alloc(0, n), *a1 = dev_alloc(1, n), *b0 = dev_alloc(0, n), *b1 = dev_alloc(1, n);
    cudaStream_t sa = stream_on(0, cudaStreamNonBlocking), sb = stream_on(0, cudaStreamNonBlocking);
    cudaEvent_t done_b;
    CUDA(cudaEventCreateWithFlags(&done_b, cudaEventDisableTiming));
    fill(b0, n, 21);
    double t0 = now_ms();
    CUDA(launch_sleep(sa, 300000));
    CUDA(cudaMemcpyAsync(a1, a0, n, cudaMemcpyDeviceToDevice, sa));
    double call_a = now_ms() - t0;
    CUDA(cudaMemcpyAsync(b1, b0, n, cudaMemcpyDeviceToDevice, sb));
    CUDA(cudaEventRecord(done_b, sb));
    CUDA(cudaEventSynchronize(done_b));
    double done = now_ms() - t0;
    CHECK(mismatch(b1, n, 21) < 0, "%s", "stream B's data");
    if (!native && !sanitized) {
        CHECK(call_a < 100, "the copy behind the kernel held its caller %.1f ms", call_a);
        CHECK(done < 150, "the independent copy was done at %.1f ms (the kernel takes 300)", done);
    }
    CUDA(cudaStreamSynchronize(sa));
    return true;
}

/* The stream-0 D2H deadlock: a D2H on the legacy stream waits for an event
 * behind a host function that waits for another thread, which first
 * launches a kernel. */
static pthread_mutex_t sig_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sig_cv = PTHREAD_COND_INITIALIZER;
static bool signalled;

static void CUDART_CB block_fn(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&sig_mu);
    while (!signalled)
        pthread_cond_wait(&sig_cv, &sig_mu);
    pthread_mutex_unlock(&sig_mu);
}

static void *launcher(void *arg)
{
    cudaStream_t irrelevant = arg;
    usleep(20000);
    launch_sleep(irrelevant, 0); /* hangs natively: the D2H holds the API lock */
    pthread_mutex_lock(&sig_mu);
    signalled = true;
    pthread_cond_broadcast(&sig_cv);
    pthread_mutex_unlock(&sig_mu);
    return NULL;
}

static bool t_deadlock(void)
{
    float *h = malloc(sizeof(float)), *d = dev_alloc(0, sizeof(float));
    cudaStream_t blocker = stream_on(0, cudaStreamNonBlocking), irrelevant = stream_on(0, cudaStreamNonBlocking);
    cudaEvent_t unblock;
    CUDA(cudaEventCreateWithFlags(&unblock, cudaEventDisableTiming));
    *d = 42.0f;
    CUDA(cudaLaunchHostFunc(blocker, block_fn, NULL));
    CUDA(cudaEventRecord(unblock, blocker));
    CUDA(cudaStreamWaitEvent(0, unblock, 0));
    pthread_t t;
    pthread_create(&t, NULL, launcher, irrelevant);
    CUDA(cudaMemcpyAsync(h, d, sizeof(float), cudaMemcpyDeviceToHost, 0)); /* run.sh's watchdog: no hang */
    pthread_join(t, NULL);
    CHECK(*h == 42.0f, "%s", "data");
    free(h);
    return true;
}

/* Case B: a pageable H2D returns before a long kernel ahead of it ends, with
 * the source consumed. */
static bool t_h2d_behind_kernel(void)
{
    size_t n = 16u << 20;
    unsigned char *h = malloc(n), *d = dev_alloc(0, n);
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    CHECK(native || until_rewritten(H2D, h, d, n, s, NULL, 30) > 0, "%s", "the pool never grew"); /* warm */
    fill(h, n, 31);
    CUDA(launch_sleep(s, 300000));
    double t0 = now_ms();
    CUDA(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
    double held = now_ms() - t0;
    memset(h, 0, n); /* consumed */
    if (!native) {
        CHECK(sanitized || held < 150, "the caller was held %.1f ms behind a 300 ms kernel", held);
        CHECK(sanitized || cudaStreamQuery(s) == cudaErrorNotReady, "%s", "the kernel was already done");
    }
    CUDA(cudaStreamSynchronize(s));
    CHECK(mismatch(d, n, 31) < 0, "%s", "data");
    free(h);
    return true;
}

/* A D2H into a pageable buffer, then an H2D from that same buffer on the same
 * stream: correctly ordered code, so the H2D must send what the D2H brought
 * back. run.sh also runs it with UNSTALL_D2H_DEFERRED=1, the removed mode that
 * returned before the data was in place and sent stale bytes (4,177,938 of
 * 4,194,304 wrong on a GPU). */
static bool t_d2h_then_h2d(void)
{
    size_t n = 5 * CHUNK + 77;
    unsigned char *h = calloc(1, n), *a = dev_alloc(0, n), *b = dev_alloc(0, n), *back = calloc(1, n);
    CHECK(h != NULL && a != NULL && b != NULL && back != NULL, "%s", "out of memory");
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    for (unsigned round = 0; round < 3; round++) {
        CUDA(launch_write(s, a, n, 51 + round, 20000));
        CUDA(cudaMemcpyAsync(h, a, n, cudaMemcpyDeviceToHost, s));
        CUDA(cudaMemcpyAsync(b, h, n, cudaMemcpyHostToDevice, s));
        CUDA(cudaStreamSynchronize(s));
        CUDA(cudaMemcpy(back, b, n, cudaMemcpyDeviceToHost));
        long bad = mismatch(back, n, 51 + round);
        CHECK(bad < 0, "round %u: the H2D sent stale bytes (first at %ld)", round, bad);
    }
    cudaStreamDestroy(s);
    cudaFree(a);
    cudaFree(b);
    free(h);
    free(back);
    return true;
}

/* First use: another thread launches kernels while this one makes its first
 * pageable D2H copies (8 MiB each). Pinning memory holds the driver, in
 * proportion to its size (run.sh sets FAKECUDA_HOST_ALLOC_US_PER_MIB=400:
 * 32 MiB hold it 12.8 ms, as the first staging pool did on an H200;
 * FAKECUDA_HOST_REGISTER_US_PER_MIB=110, as registering memory already faulted
 * in did on an H100), and a native 8 MiB pageable D2H holds it about 0.8 ms
 * (BW_PAGEABLE 10 GB/s). The pool's growth must not hold the driver much
 * longer than the native copies do: no single pinning may hold it longer than
 * half the native copy (it was 32 MiB of cudaHostAlloc, 12.8 ms). That is
 * asserted from the sizes pinned and the modelled costs; the other thread's
 * worst launch and the longest API lock hold are printed, not asserted: on a
 * loaded CI machine a descheduled holder adds tens of ms to either (0.5-1.5 ms
 * idle, against 12.9 before). Run with the default chunk_bytes (8m). */
struct launch_probe {
    atomic_bool stop;
    _Atomic double worst_ms; /* written by the probe, reset and read by the test */
    cudaStream_t s;
};

static void *launch_probe_main(void *arg)
{
    struct launch_probe *lp = arg;
    cudaSetDevice(0);
    while (!atomic_load(&lp->stop)) {
        double t0 = now_ms();
        launch_sleep(lp->s, 0);
        double dt = now_ms() - t0;
        if (dt > atomic_load(&lp->worst_ms))
            atomic_store(&lp->worst_ms, dt);
        usleep(100);
    }
    return NULL;
}

static bool t_first_use_launch(void)
{
    const size_t n = 8u << 20;
    unsigned char *h = malloc(n), *d = dev_alloc(0, n);
    CHECK(h != NULL && d != NULL, "%s", "out of memory");
    struct launch_probe lp = {.s = stream_on(0, cudaStreamNonBlocking)};
    atomic_init(&lp.stop, false);
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    CUDA(launch_write(s, d, n, 61, 0));
    CUDA(cudaStreamSynchronize(s));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, launch_probe_main, &lp) == 0, "%s", "pthread_create");
    usleep(20000); /* the probe's own first launches are not the copies' doing */
    atomic_store(&lp.worst_ms, 0.0);
    fakecuda_reset_stats();
    bool data_ok = true;
    for (int i = 0; i < 6; i++) {
        memset(h, 0, n);
        if (cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost) != cudaSuccess || mismatch(h, n, 61) >= 0)
            data_ok = false;
    }
    usleep(5000);
    atomic_store(&lp.stop, true);
    pthread_join(t, NULL);
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    printf("first_use_launch: worst launch of another thread %.2f ms, longest API lock hold %.2f ms, "
           "largest pinned allocation %llu KiB\n",
           atomic_load(&lp.worst_ms), st.api_lock_max_hold_us / 1e3, st.pinned_alloc_max_bytes >> 10);
    CHECK(data_ok, "%s", "a copy failed or its data is wrong");
    const char *alloc_cost = getenv("FAKECUDA_HOST_ALLOC_US_PER_MIB"), *register_cost = getenv("FAKECUDA_HOST_REGISTER_US_PER_MIB");
    double hold_alloc_us = (alloc_cost ? atof(alloc_cost) : 0) * (double)st.pinned_alloc_max_bytes / (1 << 20);
    double hold_register_us = (register_cost ? atof(register_cost) : 0) * (double)st.host_register_max_bytes / (1 << 20);
    double native_hold_us = (double)n / 10e3; /* BW_PAGEABLE 10 GB/s */
    printf("first_use_launch: largest cudaHostAlloc %llu KiB (%.0f us), cudaHostRegister %llu KiB (%.0f us)\n",
           st.pinned_alloc_max_bytes >> 10, hold_alloc_us, st.host_register_max_bytes >> 10, hold_register_us);
    CHECK(native || (hold_alloc_us <= native_hold_us / 2 && hold_register_us <= native_hold_us / 2),
          "a pinning held the driver %.0f us during the first copies (native copy: %.0f us)",
          hold_alloc_us > hold_register_us ? hold_alloc_us : hold_register_us, native_hold_us);
    cudaFree(d);
    free(h);
    return true;
}

/* Another thread frees the device buffer while a pageable D2H copies it. Racy,
 * but natively the copy (held behind the kernel, under the API lock) finishes
 * before cudaFree, which synchronizes the device, frees the memory: the
 * program survives with the data in place. The shim's chunked copy outlived
 * that; a release must wait for the shim's chunks on its range. Also with an
 * H2D into the buffer being freed. */
struct freer {
    void *ptr;
    unsigned delay_us;
    cudaError_t result;
};

static void *freer_main(void *arg)
{
    struct freer *f = arg;
    usleep(f->delay_us);
    f->result = cudaFree(f->ptr);
    return NULL;
}

static bool t_free_during_copy(void)
{
    const size_t n = 40 * CHUNK + 5;
    unsigned char *h = malloc(n);
    CHECK(h != NULL, "%s", "out of memory");
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    for (int dir = 0; dir < 2; dir++) {
        unsigned char *d = dev_alloc(0, n);
        CHECK(d != NULL, "%s", "cudaMalloc");
        struct freer f = {.ptr = d, .delay_us = 10000, .result = cudaErrorUnknown};
        pthread_t t;
        if (dir == 0) { /* D2H out of the buffer being freed */
            CUDA(launch_write(s, d, n, 91, 30000));
            CHECK(pthread_create(&t, NULL, freer_main, &f) == 0, "%s", "pthread_create");
            CUDA(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s));
            pthread_join(t, NULL);
            long bad = mismatch(h, n, 91);
            CHECK(bad < 0, "the D2H data is wrong at %ld", bad);
        } else { /* H2D into it, behind a kernel */
            fill(h, n, 92);
            CUDA(launch_sleep(s, 30000));
            CHECK(pthread_create(&t, NULL, freer_main, &f) == 0, "%s", "pthread_create");
            CUDA(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
            pthread_join(t, NULL);
            CUDA(cudaStreamSynchronize(s));
        }
        CHECK(f.result == cudaSuccess, "cudaFree returned %d", (int)f.result);
    }
    cudaStreamDestroy(s);
    free(h);
    return true;
}

/* --- capture and errors ----------------------------------------------------------------- */

struct capturer {
    cudaStream_t s;
    cudaError_t end;
    pthread_barrier_t *begun, *finish;
};

static void *capture_main(void *arg)
{
    struct capturer *c = arg;
    cudaStreamBeginCapture(c->s, cudaStreamCaptureModeGlobal);
    pthread_barrier_wait(c->begun);
    pthread_barrier_wait(c->finish);
    cudaGraph_t g;
    c->end = cudaStreamEndCapture(c->s, &g);
    return NULL;
}

static bool t_capture(void)
{
    size_t n = 2 * CHUNK + 3;
    unsigned char *h = malloc(n), *back = malloc(n), *a = dev_alloc(0, n), *b = dev_alloc(1, n);
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking), s2 = stream_on(0, cudaStreamNonBlocking);
    cudaStream_t c = stream_on(0, cudaStreamNonBlocking);
    fill(h, n, 51);

    /* a copy into a capturing stream goes native: captured, not executed */
    struct fakecuda_stats st0, st1;
    fakecuda_stats(&st0);
    CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA(cudaMemcpyAsync(a, h, n, cudaMemcpyHostToDevice, s));
    CUDA(cudaMemcpyPeerAsync(b, 1, a, 0, n, s));
    cudaGraph_t g;
    cudaError_t end = cudaStreamEndCapture(s, &g);
    CHECK(end == cudaSuccess, "the capture was broken: %s", cudaGetErrorName(end));
    fakecuda_stats(&st1);
    CHECK(st1.captured_ops >= st0.captured_ops + 2, "%s", "the copies were not captured");
    CHECK(st1.copies_pinned == st0.copies_pinned, "%s", "the shim issued work during a capture");

    /* another thread's global capture survives the shim's calls on this thread */
    CUDA(cudaMemcpyAsync(a, h, n, cudaMemcpyHostToDevice, s2)); /* warm: the pool exists */
    CUDA(cudaStreamSynchronize(s2));
    pthread_barrier_t begun, finish;
    pthread_barrier_init(&begun, NULL, 2);
    pthread_barrier_init(&finish, NULL, 2);
    struct capturer cap = {c, cudaErrorUnknown, &begun, &finish};
    pthread_t t;
    pthread_create(&t, NULL, capture_main, &cap);
    pthread_barrier_wait(&begun);
    cudaError_t e1 = cudaMemcpyAsync(back, a, n, cudaMemcpyDeviceToHost, s2); /* host waits on events */
    cudaError_t e2 = cudaMemcpyAsync(a, h, n, cudaMemcpyHostToDevice, s2);   /* queries slot events */
    cudaError_t e3 = cudaMemcpyPeerAsync(b, 1, a, 0, n, s2);
    pthread_barrier_wait(&finish);
    pthread_join(t, NULL);
    CHECK(e1 == cudaSuccess && e2 == cudaSuccess && e3 == cudaSuccess, "copies during the capture: %s %s %s",
          cudaGetErrorName(e1), cudaGetErrorName(e2), cudaGetErrorName(e3));
    CHECK(cap.end == cudaSuccess, "the other thread's capture was invalidated: %s", cudaGetErrorName(cap.end));
    CHECK(mismatch(back, n, 51) < 0, "%s", "D2H data");
    CUDA(cudaStreamSynchronize(s2));
    CHECK(mismatch(b, n, 51) < 0, "%s", "peer data");
    free(h);
    free(back);
    return true;
}

/* An asynchronous failure inside a pipeline shows where a native one would. */
static bool t_async_error(void)
{
    /* Under ThreadSanitizer this test is left out: after the injected error
     * the simulated runtime's fakecuda_reset_faults() lets operations the
     * error would have skipped run late, onto a slot the next copy reuses
     * (TSan saw it about one run in four). The real driver's error is sticky
     * for the context, so nothing runs late there; the model is at fault,
     * and the fix belongs in fakecuda's error handling. */
    const char *san = getenv("TEST_SANITIZER");
    if (san != NULL && strcmp(san, "tsan") == 0) {
        printf("SKIP async_error: under ThreadSanitizer (see the comment)\n");
        return true;
    }
    size_t n = 3 * CHUNK;
    unsigned char *h = malloc(n), *a = dev_alloc(0, n), *b = dev_alloc(1, n);
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    fill(h, n, 61);
    /* H2D: the stream's next operation fails */
    CUDA(fakecuda_fail_stream(s, cudaErrorLaunchFailure));
    CUDA(cudaMemcpyAsync(a, h, n, cudaMemcpyHostToDevice, s));
    cudaError_t err = cudaStreamSynchronize(s);
    CHECK(err == cudaErrorLaunchFailure, "H2D: cudaStreamSynchronize said %s", cudaGetErrorName(err));
    /* D2H: the wait for a chunk reports it (fakecuda's native copy does not
     * report a kept error; the real runtime's does) */
    err = cudaMemcpyAsync(h, a, n, cudaMemcpyDeviceToHost, s);
    CHECK(native || err == cudaErrorLaunchFailure, "D2H said %s", cudaGetErrorName(err));
    fakecuda_reset_faults();
    /* peer, synchronous: a chunk fails on the shim's own stream */
    CUDA(cudaMemcpy(a, h, n, cudaMemcpyHostToDevice));
    CUDA(fakecuda_set_fault(FAKECUDA_FAULT_ASYNC, 2, 1, cudaSuccess) == 0 ? cudaSuccess : cudaErrorUnknown);
    err = cudaMemcpyPeer(b, 1, a, 0, n);
    if (!native)
        CHECK(err == cudaErrorLaunchFailure, "cudaMemcpyPeer said %s", cudaGetErrorName(err));
    fakecuda_reset_faults();
    /* peer, asynchronous: the next copy through the same lane reports it */
    if (!native) {
        CUDA(fakecuda_set_fault(FAKECUDA_FAULT_ASYNC, 2, 1, cudaSuccess) == 0 ? cudaSuccess : cudaErrorUnknown);
        CUDA(cudaMemcpyPeerAsync(b, 1, a, 0, n, s));
        CUDA(cudaStreamSynchronize(s));
        err = cudaMemcpyPeerAsync(b, 1, a, 0, n, s);
        CHECK(err == cudaErrorLaunchFailure, "the next cudaMemcpyPeerAsync said %s", cudaGetErrorName(err));
        fakecuda_reset_faults();
    }
    /* everything works again once the errors are cleared */
    memset(b, 0, n);
    CUDA(cudaMemcpyPeerAsync(b, 1, a, 0, n, s));
    CUDA(cudaStreamSynchronize(s));
    CHECK(mismatch(b, n, 61) < 0, "%s", "data after the errors were cleared");
    free(h);
    return true;
}

/* Fault injection (run.sh arms FAKECUDA_FAULT_* or the test arms it): every
 * pipeline goes native, with the right data. */
static bool copies_native(void)
{
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    fakecuda_reset_stats();
    for (int round = 0; round < 2; round++) {
        size_t n = 2 * CHUNK + 9;
        if (!copy_one(H2D, ASYNC, n, s, 0, 0, 71) || !copy_one(D2H, ASYNC, n, s, 0, 0, 72) ||
            !copy_one(PEER, PEER_ASYNC, n, s, 0, 1, 73))
            return false;
    }
    return true;
}

static bool t_fault_no_pinned(void) /* FAKECUDA_FAULT_HOST_ALLOC=1 */
{
    if (!copies_native())
        return false;
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    CHECK(st.copies_pageable == 4 && st.copies_staged == 2, "%s", "the copies did not go native");
    return true;
}

static bool t_fault_no_events(void)
{
    cudaStream_t warm = stream_on(0, cudaStreamNonBlocking);
    (void)warm;
    fakecuda_set_fault(FAKECUDA_FAULT_EVENT_CREATE, 1, 0, cudaSuccess);
    if (!copies_native())
        return false;
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    CHECK(st.copies_pageable == 4 && st.copies_staged == 2, "%s", "the copies did not go native");
    return true;
}

static bool t_fault_no_streams(void)
{
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    fakecuda_set_fault(FAKECUDA_FAULT_STREAM_CREATE, 1, 0, cudaSuccess);
    unsigned char *h = malloc(CHUNK), *d = dev_alloc(0, CHUNK); /* the pool warm: H2D needs no stream to grow */
    CHECK(h != NULL && d != NULL, "%s", "out of memory");
    CHECK(native || until_rewritten(H2D, h, d, CHUNK, s, NULL, 80) > 0, "%s", "the H2D was never rewritten");
    fakecuda_reset_stats();
    for (int round = 0; round < 2; round++)
        if (!copy_one(PEER, PEER_ASYNC, 2 * CHUNK + 9, s, 0, 1, 81) || !copy_one(H2D, ASYNC, CHUNK, s, 0, 0, 82))
            return false;
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    CHECK(st.copies_staged == 2, "%s", "the peer copies did not go native");
    CHECK(native || st.copies_pageable == 0, "%s", "H2D needs no stream of its own: it should stay rewritten");
    cudaFree(d);
    free(h);
    return true;
}

/* First use must not be slower than native (contract.md §4): the first
 * pageable copy of a process used to pin its staging slots inside the call
 * (PyTorch's first blocking .to('cuda') of 64 MiB: 13.9 ms under the shim,
 * 8.8 ms natively on an H100). Pinning costs what run.sh models
 * (FAKECUDA_HOST_ALLOC_US_PER_MIB=400, as on an H100/H200), so the cost is
 * asserted through what was pinned on the copying thread, not through wall
 * time: no more than the inline budget (staging.h, US_STAGING_INLINE_MAX: an
 * eighth of the copy, 64 KiB at least, 1 MiB at most). alloc_record.so,
 * preloaded after the shim, tells what was pinned on which thread. Each test
 * runs as the process's first copies, with the default chunk_bytes (8m), and
 * with a cold pool (warm_pinned=0: the first cudaMalloc pins one 64 KiB slot,
 * run.sh) except the one about warm_pinned, first_malloc_pins_a_slot, which
 * runs both ways. */
#define INLINE_MAX ((size_t)1 << 20)
#define INLINE_MIN ((size_t)64 << 10)

/* The first large pageable H2D and D2H of a process: native (nothing pinned
 * on the caller's thread beyond the inline budget; the old shim pinned 4 and
 * 8 slots of 4 MiB inside these calls); then, once the grower has added the
 * slots, the same copies are rewritten, with the right data throughout. */
static bool t_first_use_large(void)
{
    const size_t n = 32u << 20;
    struct alloc_record rec;
    CHECK(alloc_record_find(&rec), "%s", "alloc_record.so is not preloaded (run.sh does it)");
    unsigned char *h = malloc(n), *d = dev_alloc(0, n);
    CHECK(h != NULL && d != NULL, "%s", "out of memory");
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);

    fill(h, n, 101);
    rec.reset_here();
    CUDA(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)); /* the process's first pageable copy */
    CHECK(mismatch(d, n, 101) < 0, "%s", "first H2D: data");
    CHECK(rec.total_here() <= INLINE_MAX, "the first %zu MiB H2D pinned %zu bytes inside the call (largest %zu)",
          n >> 20, rec.total_here(), rec.largest_here());

    fill(d, n, 102);
    memset(h, 0, n);
    rec.reset_here();
    CUDA(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s)); /* the first D2H */
    CHECK(mismatch(h, n, 102) < 0, "%s", "first D2H: data in place on return");
    CHECK(rec.total_here() <= INLINE_MAX, "the first %zu MiB D2H pinned %zu bytes inside the call (largest %zu)",
          n >> 20, rec.total_here(), rec.largest_here());

    if (!native) {
        unsigned h2d = until_rewritten(H2D, h, d, n, s, &rec, 110);
        CHECK(h2d > 0, "%s", "the H2D was never rewritten, or a rewritten one pinned memory in the call");
        unsigned d2h = until_rewritten(D2H, h, d, n, s, &rec, 120);
        CHECK(d2h > 0, "%s", "the D2H was never rewritten, or a rewritten one pinned memory in the call");
        printf("first_use_large: H2D rewritten after %u tries, D2H after %u\n", h2d, d2h);
    }
    cudaStreamDestroy(s);
    cudaFree(d);
    free(h);
    return true;
}

/* A D2H of n bytes on s, from d filled with `seed` into h zeroed, after the
 * pinning record and the fake's counts were reset; the data checked. */
static bool idle_d2h_checked(unsigned char *h, unsigned char *d, size_t n, cudaStream_t s, unsigned seed,
                             struct alloc_record *rec)
{
    fill(d, n, seed);
    memset(h, 0, n);
    rec->reset_here();
    fakecuda_reset_stats();
    CUDA(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s));
    CHECK(mismatch(h, n, seed) < 0, "%zu bytes: data", n);
    return true;
}

/* A small D2H that finds no pinned slot ready (the process's first):
 * behind work queued on its stream it is rewritten from its first use, since
 * a native one can deadlock a program whose stream waits for another thread's
 * launch (t_deadlock): 4 bytes and 256 KiB pin at most one 64 KiB slot inside
 * the call (their inline budget; the old shim pinned 4 slots of a 1 MiB
 * copy's 128 KiB). On an idle stream, up to 1 MiB, it goes native instead,
 * pinning nothing inside the call (a 64 KiB slot took 0.25 ms on an H100
 * host, the native 4 B copy 8-10 us), and is rewritten once the grower has
 * pinned its slots; over 1 MiB it is rewritten (a native one holds the
 * runtime lock for its whole length). */
static bool t_first_use_small_d2h(void)
{
    const size_t sizes_[] = {4, 256u << 10};
    const size_t budget[] = {INLINE_MIN, INLINE_MIN};
    struct alloc_record rec;
    CHECK(alloc_record_find(&rec), "%s", "alloc_record.so is not preloaded (run.sh does it)");
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    for (int i = 0; i < 2; i++) {
        size_t n = sizes_[i];
        unsigned char *h = malloc(n), *d = dev_alloc(0, n);
        CHECK(h != NULL && d != NULL, "%s", "out of memory");
        fill(d, n, 130 + (unsigned)i);
        memset(h, 0, n);
        rec.reset_here();
        fakecuda_reset_stats();
        CUDA(launch_sleep(s, 2000)); /* queued work the copy waits for */
        CUDA(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s));
        CHECK(mismatch(h, n, 130 + (unsigned)i) < 0, "%zu bytes: data", n);
        CHECK(native || all_rewritten(), "the first D2H of %zu bytes behind queued work went native", n);
        CHECK(rec.total_here() <= budget[i], "the first D2H of %zu bytes pinned %zu bytes inside the call",
              n, rec.total_here());
        cudaFree(d);
        free(h);
    }
    /* idle stream, no slot ready: a D2H of 1 MiB (512 KiB slots, none there)
     * goes native and pins nothing here; one over 1 MiB (the inline budget)
     * is rewritten all the same, pinning one slot of its budget (a native one
     * would hold the runtime lock for its whole length) */
    const size_t big = 4u << 20, n = 1u << 20;
    unsigned char *h = malloc(big), *d = dev_alloc(0, big);
    CHECK(h != NULL && d != NULL, "%s", "out of memory");
    CUDA(cudaStreamSynchronize(s));
    if (!idle_d2h_checked(h, d, n, s, 134, &rec))
        return false;
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    CHECK(native || (st.copies_pageable == 1 && st.copies_pinned == 0),
          "the first 1 MiB D2H on an idle stream was not the native call (%lu pageable, %lu pinned copies)",
          st.copies_pageable, st.copies_pinned);
    CHECK(rec.total_here() == 0, "the first 1 MiB D2H on an idle stream pinned %zu bytes inside the call",
          rec.total_here());
    fill(d, big, 133); /* slots of 2 MiB: none, the grower adds 512 KiB ones */
    memset(h, 0, big);
    rec.reset_here();
    fakecuda_reset_stats();
    CUDA(cudaMemcpyAsync(h, d, big, cudaMemcpyDeviceToHost, s));
    CHECK(mismatch(h, big, 133) < 0, "%s", "idle stream, 4 MiB: data");
    CHECK(native || all_rewritten(), "%s", "the first 4 MiB D2H on an idle stream went native");
    CHECK(rec.total_here() <= big / 8, "the first 4 MiB D2H pinned %zu bytes inside the call", rec.total_here());
    CHECK(native || until_rewritten(D2H, h, d, n, s, &rec, 135) > 0, "%s",
          "the 1 MiB D2H was never rewritten, or a rewritten one pinned memory in the call");
    cudaFree(d);
    free(h);
    cudaStreamDestroy(s);
    return true;
}

/* The grower's allocations keep another thread's global-mode capture valid
 * (a cudaHostAlloc on a thread not in relaxed mode ends it with
 * cudaErrorStreamCaptureInvalidated): a thread begins a capture, this one
 * makes its first large H2D (native; the grower pins the slots) and repeats
 * it until it is rewritten, then the capture ends. */
static bool t_first_use_capture(void)
{
    const size_t n = 32u << 20;
    struct alloc_record rec;
    CHECK(alloc_record_find(&rec), "%s", "alloc_record.so is not preloaded (run.sh does it)");
    unsigned char *h = malloc(n), *d = dev_alloc(0, n);
    CHECK(h != NULL && d != NULL, "%s", "out of memory");
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking), c = stream_on(0, cudaStreamNonBlocking);
    pthread_barrier_t begun, finish;
    pthread_barrier_init(&begun, NULL, 2);
    pthread_barrier_init(&finish, NULL, 2);
    struct capturer cap = {c, cudaErrorUnknown, &begun, &finish};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, capture_main, &cap) == 0, "%s", "pthread_create");
    pthread_barrier_wait(&begun);
    unsigned long pinned_before = rec.done();
    unsigned tries = native ? 1 : until_rewritten(H2D, h, d, n, s, &rec, 140);
    unsigned long pinned_during = rec.done() - pinned_before;
    pthread_barrier_wait(&finish);
    pthread_join(t, NULL);
    CHECK(cap.end == cudaSuccess, "the other thread's capture was invalidated: %s", cudaGetErrorName(cap.end));
    CHECK(tries > 0, "%s", "the H2D was never rewritten");
    CHECK(native || pinned_during > 0, "%s", "nothing was pinned during the capture: the test proves nothing");
    cudaStreamDestroy(s);
    cudaFree(d);
    free(h);
    return true;
}

/* Whether a thread of this process has that name (its comm). */
static bool thread_named(const char *name)
{
    DIR *dir = opendir("/proc/self/task");
    if (dir == NULL)
        return false;
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(dir)) != NULL;) {
        char path[300], comm[32];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        found = fgets(comm, sizeof comm, f) != NULL && strncmp(comm, name, strlen(name)) == 0;
        fclose(f);
    }
    closedir(dir);
    return found;
}

/* The grower thread starts with the pool's first pinning, at the program's
 * first device allocation (us_staging_warm), so that the first copy that
 * asks for slots does not pay its start: none before it (kernels and pinned
 * copies alone make none), one ("unstall-grow") after it, and a first large
 * pageable copy is right. Natively, none ever. */
static bool t_grower_at_first_malloc(void)
{
    const size_t n = 32u << 20;
    unsigned char *h = malloc(n), *pinned = NULL;
    CHECK(h != NULL && cudaMallocHost((void **)&pinned, n) == cudaSuccess, "%s", "out of memory");
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    CUDA(launch_sleep(s, 20));
    CUDA(cudaStreamSynchronize(s));
    CHECK(!thread_named("unstall-grow"), "%s", "a grower thread before the first device allocation");
    unsigned char *d = dev_alloc(0, n);
    CHECK(d != NULL, "%s", "out of memory");
    CHECK(native != thread_named("unstall-grow"), "%s",
          native ? "a grower thread natively" : "no grower thread after the first device allocation");
    CUDA(cudaMemcpyAsync(d, pinned, n, cudaMemcpyHostToDevice, s));
    CUDA(cudaStreamSynchronize(s));
    fill(h, n, 150);
    CUDA(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    CHECK(mismatch(d, n, 150) < 0, "%s", "data");
    cudaFreeHost(pinned);
    cudaFree(d);
    free(h);
    return true;
}

/* The program's first cudaMalloc rehearses its first pageable H2D copies
 * through cudaMemcpy and cudaMemcpyAsync (us_entry_rehearse_copies): nothing
 * may be issued or held then, and each real copy after it is the program's
 * own (run.sh checks that the report counts exactly the two below). */
static bool t_first_malloc_rehearses(void)
{
    fakecuda_reset_stats();
    unsigned char *d = dev_alloc(0, 4096), *h = malloc(8);
    CHECK(d != NULL && h != NULL, "%s", "out of memory");
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    CHECK(st.copies_pageable == 0 && st.pageable_h2d_snapshots == 0 && st.pageable_h2d_waits == 0 &&
              st.implicit_syncs == 0,
          "the first cudaMalloc made %lu pageable copies and %lu implicit syncs", st.copies_pageable,
          st.implicit_syncs);
    fill(h, 4, 200);
    CUDA(cudaMemcpy(d, h, 4, cudaMemcpyHostToDevice)); /* the device bytes the rehearsal named */
    CHECK(mismatch(d, 4, 200) < 0, "%s", "data of the first cudaMemcpy");
    fill(h, 4, 201);
    CUDA(cudaMemcpyAsync(d, h, 4, cudaMemcpyHostToDevice, 0));
    CUDA(cudaStreamSynchronize(0));
    CHECK(mismatch(d, 4, 201) < 0, "%s", "data of the first cudaMemcpyAsync");
    fakecuda_stats(&st);
    CHECK(st.copies_pageable == 2, "%lu pageable copies, expected the program's 2", st.copies_pageable);
    cudaFree(d);
    free(h);
    return true;
}

/* The program's first cudaMalloc pins the pool's first slots (us_staging_warm):
 * a pinning holds the driver for a while (0.13-0.5 ms on an H100 host), which
 * the first copies paid, inline or beside a native copy. With warm_pinned=0
 * one 64 KiB slot; by default one block of two slots of each size from 64 KiB
 * to 4 MiB (15.9 MiB), through which a first 1 MiB D2H on an idle stream is
 * rewritten, not sent native while the grower pins (on an H100 the first
 * 1 MiB D2H took 1.3-1.5 ms that way, natively 0.8-1.0). The first 4-byte
 * D2H on an idle stream runs through the first slot, pinning nothing. */
static bool t_first_malloc_pins_a_slot(void)
{
    const char *warm = getenv("UNSTALL_WARM_PINNED");
    bool cold = warm != NULL && strcmp(warm, "0") == 0;
    const unsigned long long ladder = 2ull * 127 * INLINE_MIN; /* 64 KiB + 128 KiB + ... + 4 MiB, twice */
    struct alloc_record rec;
    CHECK(alloc_record_find(&rec), "%s", "alloc_record.so is not preloaded (run.sh does it)");
    fakecuda_reset_stats();
    unsigned char *d = dev_alloc(0, 4096), *h = malloc(4);
    CHECK(d != NULL && h != NULL, "%s", "out of memory");
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    /* in registrations of at most US_STAGING_PIN_PIECE (2 MiB) each: a
     * registration holds other threads' launches while it runs */
    const unsigned long long piece = 2ull << 20, pinned_now = cold ? INLINE_MIN : ladder;
    CHECK(native ? st.host_registers == 0
                 : st.host_registers == (pinned_now + piece - 1) / piece &&
                       st.host_register_max_bytes == (pinned_now < piece ? pinned_now : piece),
          "%lu registrations (largest %llu bytes) at the first cudaMalloc", st.host_registers,
          (unsigned long long)st.host_register_max_bytes);
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    fill(d, 4, 190);
    rec.reset_here();
    fakecuda_reset_stats();
    CUDA(cudaMemcpyAsync(h, d, 4, cudaMemcpyDeviceToHost, s));
    CHECK(mismatch(h, 4, 190) < 0, "%s", "data");
    CHECK(native || all_rewritten(), "%s", "the first 4-byte D2H went native");
    CHECK(rec.total_here() == 0, "the first 4-byte D2H pinned %zu bytes inside the call", rec.total_here());
    if (!native && !cold) {
        const size_t n = 1u << 20;
        unsigned char *d1 = dev_alloc(0, n), *h1 = malloc(n);
        CHECK(d1 != NULL && h1 != NULL, "%s", "out of memory");
        if (!idle_d2h_checked(h1, d1, n, s, 191, &rec))
            return false;
        CHECK(all_rewritten(), "%s", "the first 1 MiB D2H on an idle stream went native");
        CHECK(rec.total_here() == 0, "the first 1 MiB D2H pinned %zu bytes inside the call", rec.total_here());
        cudaFree(d1);
        free(h1);
    }
    cudaStreamDestroy(s);
    cudaFree(d);
    free(h);
    return true;
}

/* The staging slots are memory the shim maps itself and registers (the
 * page faults outside the driver's lock, in huge pages where the kernel gives
 * them: staging.c), and a forked child does
 * not share them: VmFlags "dc" (MADV_DONTFORK) on every registered mapping,
 * or a DataLoader-style fork would make the parent's next write to a slot
 * land on a copy-on-write page the GPU does not read. */
static bool t_staging_registered(void)
{
    const size_t n = 4099; /* the process's first D2H, behind queued work, pins its one slot inside the call */
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    CUDA(launch_sleep(s, 2000));
    fakecuda_reset_stats();
    if (!copy_one(D2H, ASYNC, n, s, 0, 0, 160))
        return false;
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    if (native) {
        CHECK(st.host_registers == 0, "%lu registrations without the shim", st.host_registers);
        return true;
    }
    CHECK(all_rewritten(), "%s", "the copies went native");
    CHECK(st.host_registers > 0 && st.pinned_allocs == 0,
          "staging came from %lu cudaHostAlloc and %lu cudaHostRegister calls", st.pinned_allocs, st.host_registers);
    FILE *f = fopen("/proc/self/smaps", "r");
    CHECK(f != NULL, "%s", "/proc/self/smaps");
    char line[512];
    unsigned long dontfork = 0, huge = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "VmFlags:", 8) == 0 && strstr(line, " dc") != NULL) {
            dontfork++;
            huge += strstr(line, " hg") != NULL;
        }
    fclose(f);
    CHECK(dontfork >= 1, "%s", "no mapping is marked MADV_DONTFORK: a forked child would share the slots");
    /* faulted in with huge pages where the kernel gives them (staging.c, fault_in) */
    CHECK(huge == (thp_advice_works() ? dontfork : 0), "%lu of %lu staging mappings advised huge pages", huge,
          dontfork);
    cudaStreamDestroy(s);
    return true;
}

/* A large D2H into memory the program has not touched yet (torch's x.cpu()
 * makes a new tensor every call) advises the kernel to use huge pages for
 * the destination's 2 MiB-aligned interior before the host copy writes it
 * (hostcopy.h, option d2h_hugepages); one into memory already written does
 * not; the bytes are right either way. Natively nothing is advised. */
static bool t_d2h_fresh_hugepages(void)
{
    const size_t n = 12u << 20, map = 16u << 20, off = 4096 + 5;
    cudaStream_t s = stream_on(0, cudaStreamNonBlocking);
    unsigned char *d = dev_alloc(0, n), *warm = malloc(n);
    CHECK(d != NULL && warm != NULL, "%s", "out of memory");
    CHECK(native || until_rewritten(D2H, warm, d, n, s, NULL, 230) > 0, "%s", "a 12 MiB D2H was never rewritten");
    fill(d, n, 231);
    for (int used = 0; used <= 1; used++) {
        unsigned char *h = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(h != MAP_FAILED, "%s", "mmap");
        unsigned char *inner = (unsigned char *)(((uintptr_t)(h + off) + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
        if (used)
            memset(h, 0, map);
        fakecuda_reset_stats();
        CUDA(cudaMemcpyAsync(h + off, d, n, cudaMemcpyDeviceToHost, s));
        CHECK(mismatch(h + off, n, 231) < 0, "the D2H into %s memory landed wrong bytes", used ? "used" : "new");
        CHECK(h[off - 1] == 0 && h[off + n] == 0, "%s", "bytes around the destination changed");
        bool want = !native && !used && thp_advice_works();
        CHECK(native || all_rewritten(), "%s", "the D2H went native");
        CHECK(thp_advised_at(inner) == (want ? 1 : 0), "the %s destination was %sadvised huge pages",
              used ? "used" : "new", want ? "not " : "");
        munmap(h, map);
    }
    cudaFree(d);
    free(warm);
    cudaStreamDestroy(s);
    return true;
}

/* --- main ---------------------------------------------------------------------------------- */

struct test {
    const char *name;
    bool (*fn)(void);
    bool in_all; /* needs no special environment */
};

static const struct test tests[] = {
    {"data", t_data, true},
    {"threads", t_threads, true},
    {"order", t_order, true},
    {"cross_device_before", t_cross_device_before, true},
    {"cross_device_after", t_cross_device_after, true},
    {"cross_device_ptsz", t_cross_device_ptsz, true},
    {"independent_stream", t_independent_stream, true},
    {"peer_ring_ahead", t_peer_ring_ahead, false},
    {"d2d_first_untimed", t_d2d_first_untimed, false},
    {"deadlock", t_deadlock, true},
    {"h2d_behind_kernel", t_h2d_behind_kernel, true},
    {"capture", t_capture, true},
    {"async_error", t_async_error, true},
    {"d2h_then_h2d", t_d2h_then_h2d, true},
    {"free_during_copy", t_free_during_copy, true},
    {"d2h_fresh_hugepages", t_d2h_fresh_hugepages, true},
    {"staging_registered", t_staging_registered, false},
    {"first_malloc_pins_a_slot", t_first_malloc_pins_a_slot, false},
    {"first_malloc_rehearses", t_first_malloc_rehearses, false},
    {"first_use_launch", t_first_use_launch, false},
    {"first_use_large", t_first_use_large, false},
    {"first_use_small_d2h", t_first_use_small_d2h, false},
    {"first_use_capture", t_first_use_capture, false},
    {"grower_at_first_malloc", t_grower_at_first_malloc, false},
    {"fault_no_pinned", t_fault_no_pinned, false},
    {"fault_no_events", t_fault_no_events, false},
    {"fault_no_streams", t_fault_no_streams, false},
};

static void watchdog(int sig)
{
    (void)sig;
    char line[160];
    int n = snprintf(line, sizeof line, "FAIL %s: hung (watchdog)\n", current_test ? current_test : "?");
    if (write(STDOUT_FILENO, line, (size_t)n) < 0)
        _exit(99);
    _exit(99);
}

static void run(const struct test *t)
{
    current_test = t->name;
    alarm(20);
    bool ok = t->fn();
    alarm(0);
    if (ok)
        printf("PASS %s\n", t->name);
    else
        printf("FAIL %s: %s\n", t->name, failure);
    fflush(stdout);
    failures += !ok;
}

int main(int argc, char **argv)
{
    native = getenv("PIPE_NATIVE") != NULL && strcmp(getenv("PIPE_NATIVE"), "1") == 0;
    sanitized = getenv("TEST_SANITIZER") != NULL && *getenv("TEST_SANITIZER") != '\0';
    signal(SIGALRM, watchdog);
    xdev_seed = (uint32_t)time(NULL) ^ (uint32_t)getpid() << 16;
    register_kernels();
    cudaSetDevice(0);
    for (int i = 1; i < argc; i++) {
        bool found = false;
        for (size_t k = 0; k < sizeof tests / sizeof tests[0]; k++) {
            if (strcmp(argv[i], tests[k].name) == 0 || (strcmp(argv[i], "all") == 0 && tests[k].in_all)) {
                run(&tests[k]);
                found = true;
            }
        }
        if (!found) {
            printf("FAIL %s: no such test\n", argv[i]);
            failures++;
        }
    }
    return failures;
}
