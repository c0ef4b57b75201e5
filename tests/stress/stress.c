/* stress.c - random copies through the public CUDA runtime API, every byte
 * checked against a host model.
 *
 * Threads x streams (legacy, per-thread, blocking, non-blocking) x devices x
 * directions (H2D, D2H, D2D on one device and across two, cudaMemcpyPeer and
 * cudaMemcpyPeerAsync, cudaMemcpyDefault) x host memory kinds (pageable,
 * pinned, registered) x sizes (0 to STRESS_MAX_BYTES, log-distributed, mostly
 * small) x unaligned offsets, mixed with fill kernels, events and the
 * synchronizations a correct program uses. Each thread owns its buffers and
 * runs chains: operations on one stream after another, linked by events or by
 * the legacy stream's implicit ordering, then one synchronization, then every
 * touched range (and 16 bytes each side) is compared with the model. Two host
 * promises are checked on return, without synchronizing: a pageable D2H
 * cudaMemcpyAsync has its data in place, and a pageable H2D source may be
 * overwritten at once.
 *
 * Seeded: STRESS_SEED (default: from the clock), printed first; the same seed
 * gives the same operations per thread. Prints "stress: copies N bytes B
 * mismatches M" and exits 0, 1 on any mismatch, 2 on a CUDA error.
 *
 * Environment: STRESS_SEED, STRESS_THREADS (3), STRESS_CHAINS per thread
 * (200), STRESS_MAX_BYTES (256 MiB; suffix k/m), STRESS_DEVICES (at most the
 * device count; default all, at most 4), STRESS_KERNEL_US (longest fill
 * kernel spin, 2000), STRESS_PEER=1 (enable peer access both ways),
 * STRESS_VERBOSE=1 (print every operation), STRESS_CROSS_LEGACY=0 (order a
 * cudaMemcpy between devices after another device's blocking stream by an
 * event, not by the legacy stream's implicit ordering). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "stress_kernels.h"

#define MAX_DEVICES 4
#define GUARD 16
#define SLACK 64  /* offsets are in [0, SLACK) */
#define MAX_CHAIN 8

enum buf_kind { PAGEABLE, PINNED, REGISTERED, HOST_KINDS, DEVICE = HOST_KINDS };
static const char *const kind_names[] = {"pageable", "pinned", "registered", "device"};

enum stream_type { LEGACY, PER_THREAD, BLOCKING, NON_BLOCKING, STREAM_TYPES };
static const char *const stream_names[] = {"legacy", "per-thread", "blocking", "non-blocking"};

struct buf {
    enum buf_kind kind;
    int device;           /* -1 for host memory */
    unsigned char *p;
    unsigned char *model; /* what every byte should be once the work issued so far is done */
};

struct range {
    struct buf *b;
    size_t off, n;
};

struct stream_ref {
    int device;
    enum stream_type type;
};

struct worker {
    int id;
    uint64_t rng;
    struct buf host[HOST_KINDS];
    struct buf dev[MAX_DEVICES][2];
    cudaStream_t created[MAX_DEVICES][2]; /* BLOCKING, NON_BLOCKING */
    cudaEvent_t event[MAX_DEVICES];
    unsigned char *scratch;               /* pinned: device ranges are read back through it */
    unsigned long long copies, bytes, mismatches;
    char last_ops[MAX_CHAIN * 2][160];    /* the chain, for a mismatch report */
    int nops;
};

static int ndev;
static size_t max_bytes = 256u << 20;
static size_t buf_bytes;
static double kernel_us = 2000;
static bool verbose;
static atomic_int cuda_failed;

/* --- helpers ------------------------------------------------------------------------ */

static uint64_t next(struct worker *w)
{
    /* splitmix64: one sequence per thread, fixed by the seed */
    uint64_t z = (w->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned pick(struct worker *w, unsigned n) { return (unsigned)(next(w) % n); }
static bool chance(struct worker *w, unsigned percent) { return pick(w, 100) < percent; }

#define CK(w, call)                                                                                  \
    do {                                                                                             \
        cudaError_t err_ = (call);                                                                   \
        if (err_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "stress: thread %d: %s failed: %s\n", (w)->id, #call, cudaGetErrorName(err_)); \
            atomic_store(&cuda_failed, 1);                                                           \
            return false;                                                                            \
        }                                                                                            \
    } while (0)

static void note(struct worker *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (w->nops < (int)(sizeof w->last_ops / sizeof w->last_ops[0]))
        vsnprintf(w->last_ops[w->nops++], sizeof w->last_ops[0], fmt, ap);
    va_end(ap);
    if (verbose)
        fprintf(stderr, "[%d] %s\n", w->id, w->last_ops[w->nops - 1]);
}

static size_t parse_size(const char *s, size_t dflt)
{
    if (s == NULL || *s == '\0')
        return dflt;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || end == s)
        return dflt;
    if (*end == 'k' || *end == 'K')
        v <<= 10;
    else if (*end == 'm' || *end == 'M')
        v <<= 20;
    else if (*end == 'g' || *end == 'G')
        v <<= 30;
    return (size_t)v;
}

/* 0 now and then; otherwise log-distributed, mostly small */
static size_t pick_size(struct worker *w)
{
    if (chance(w, 3))
        return 0;
    double top = 0;
    for (size_t m = max_bytes; m > 1; m >>= 1)
        top += 1;
    double u = (double)pick(w, 1u << 20) / (1u << 20);
    double e = top * u * u;
    size_t n = (size_t)1 << (unsigned)e;
    n += pick(w, (unsigned)(n < (1u << 30) ? n : (1u << 30)));
    return n > max_bytes ? max_bytes : n;
}

static cudaStream_t handle(struct worker *w, struct stream_ref s)
{
    switch (s.type) {
    case LEGACY: return cudaStreamLegacy;
    case PER_THREAD: return cudaStreamPerThread;
    case BLOCKING: return w->created[s.device][0];
    default: return w->created[s.device][1];
    }
}

static bool is_blocking(enum stream_type t) { return t != NON_BLOCKING; }

/* --- setup -------------------------------------------------------------------------- */

static bool worker_setup(struct worker *w)
{
    for (int k = 0; k < HOST_KINDS; k++) {
        struct buf *b = &w->host[k];
        b->kind = (enum buf_kind)k;
        b->device = -1;
        if (k == PINNED)
            CK(w, cudaMallocHost((void **)&b->p, buf_bytes));
        else if ((b->p = aligned_alloc(4096, (buf_bytes + 4095) & ~(size_t)4095)) == NULL) /* a multiple of the alignment */
            return false;
        if (k == REGISTERED)
            CK(w, cudaHostRegister(b->p, buf_bytes, cudaHostRegisterDefault));
    }
    for (int d = 0; d < ndev; d++) {
        CK(w, cudaSetDevice(d));
        for (int i = 0; i < 2; i++) {
            w->dev[d][i] = (struct buf){DEVICE, d, NULL, NULL};
            CK(w, cudaMalloc((void **)&w->dev[d][i].p, buf_bytes));
        }
        CK(w, cudaStreamCreate(&w->created[d][0]));
        CK(w, cudaStreamCreateWithFlags(&w->created[d][1], cudaStreamNonBlocking));
        CK(w, cudaEventCreateWithFlags(&w->event[d], cudaEventDisableTiming));
    }
    CK(w, cudaMallocHost((void **)&w->scratch, buf_bytes));
    /* every buffer starts with a known content, the model with the same */
    struct buf *all[HOST_KINDS + 2 * MAX_DEVICES];
    int n = 0;
    for (int k = 0; k < HOST_KINDS; k++)
        all[n++] = &w->host[k];
    for (int d = 0; d < ndev; d++)
        for (int i = 0; i < 2; i++)
            all[n++] = &w->dev[d][i];
    for (int i = 0; i < n; i++) {
        struct buf *b = all[i];
        if ((b->model = malloc(buf_bytes)) == NULL)
            return false;
        uint32_t seed = (uint32_t)next(w);
        for (size_t j = 0; j < buf_bytes; j++)
            b->model[j] = stress_pattern(seed, j);
        if (b->kind == DEVICE)
            CK(w, cudaMemcpy(b->p, b->model, buf_bytes, cudaMemcpyHostToDevice));
        else
            memcpy(b->p, b->model, buf_bytes);
    }
    CK(w, cudaDeviceSynchronize());
    return true;
}

static void worker_teardown(struct worker *w)
{
    for (int k = 0; k < HOST_KINDS; k++) {
        struct buf *b = &w->host[k];
        if (k == REGISTERED && b->p != NULL)
            cudaHostUnregister(b->p);
        if (k == PINNED)
            cudaFreeHost(b->p);
        else
            free(b->p);
        free(b->model);
    }
    for (int d = 0; d < ndev; d++) {
        cudaSetDevice(d);
        for (int i = 0; i < 2; i++) {
            cudaFree(w->dev[d][i].p);
            free(w->dev[d][i].model);
        }
        cudaStreamDestroy(w->created[d][0]);
        cudaStreamDestroy(w->created[d][1]);
        cudaEventDestroy(w->event[d]);
    }
    cudaFreeHost(w->scratch);
}

/* --- verification ------------------------------------------------------------------- */

/* Compares range r (and GUARD bytes each side, within the buffer) with the
 * model; true when equal. */
static bool verify_range(struct worker *w, const struct range *r, const char *when)
{
    size_t lo = r->off > GUARD ? r->off - GUARD : 0;
    size_t hi = r->off + r->n + GUARD < buf_bytes ? r->off + r->n + GUARD : buf_bytes;
    const unsigned char *have = r->b->p + lo;
    if (r->b->kind == DEVICE) {
        cudaError_t err = cudaMemcpy(w->scratch, r->b->p + lo, hi - lo, cudaMemcpyDeviceToHost);
        if (err != cudaSuccess) {
            fprintf(stderr, "stress: thread %d: reading back: %s\n", w->id, cudaGetErrorName(err));
            atomic_store(&cuda_failed, 1);
            return false;
        }
        have = w->scratch;
    }
    if (memcmp(have, r->b->model + lo, hi - lo) == 0)
        return true;
    size_t bad = 0, first = SIZE_MAX;
    for (size_t i = 0; i < hi - lo; i++)
        if (have[i] != r->b->model[lo + i]) {
            bad++;
            if (first == SIZE_MAX)
                first = lo + i;
        }
    fprintf(stderr,
            "stress: MISMATCH thread %d %s: %s buffer (device %d) range [%zu, %zu): %zu bytes differ, first at "
            "%zu (have 0x%02x, want 0x%02x); the chain:\n",
            w->id, when, kind_names[r->b->kind], r->b->device, r->off, r->off + r->n, bad, first,
            have[first - lo], r->b->model[first]);
    for (int i = 0; i < w->nops; i++)
        fprintf(stderr, "    %s\n", w->last_ops[i]);
    w->mismatches++;
    /* the model takes what is there, so that one fault is counted once */
    if (r->b->kind == DEVICE)
        memcpy(r->b->model + lo, have, hi - lo);
    else
        memcpy(r->b->model + lo, r->b->p + lo, hi - lo);
    return false;
}

/* --- operations --------------------------------------------------------------------- */

static struct buf *pick_buf(struct worker *w, bool device, int dev)
{
    return device ? &w->dev[dev][pick(w, 2)] : &w->host[pick(w, HOST_KINDS)];
}

/* Orders `to` after everything issued to `from`: an event, or nothing where the
 * legacy stream's implicit ordering already does it (docs/fakecuda.md:
 * the legacy stream and the blocking streams of one device wait for each
 * other). */
static bool cross_legacy = true;

#define EARLY_READ_MAX ((size_t)16 << 10) /* see the copy's link below */

/* `legacy_copy_devices`: for a cudaMemcpy/cudaMemcpyPeer between two devices
 * (the legacy stream), the bit of each: such a copy waits for the blocking
 * streams of both devices, not only the current one's (measured on H200s:
 * tests/conformance xdev_copy_before; docs/contract.md §1). */
static bool link_streams(struct worker *w, struct stream_ref from, struct stream_ref to, unsigned legacy_copy_devices,
                         bool implicit_ok)
{
    if (from.device == to.device && from.type == to.type)
        return true;
    bool implicit = implicit_ok && from.device == to.device && ((from.type == LEGACY && is_blocking(to.type)) ||
                                                 (to.type == LEGACY && is_blocking(from.type)));
    if (cross_legacy && to.type == LEGACY && is_blocking(from.type) && (legacy_copy_devices >> from.device & 1))
        implicit = true;
    if (implicit && chance(w, 50)) {
        note(w, "implicit order %s(%d) -> %s(%d)", stream_names[from.type], from.device, stream_names[to.type],
             to.device);
        return true;
    }
    CK(w, cudaSetDevice(from.device));
    CK(w, cudaEventRecord(w->event[from.device], handle(w, from)));
    CK(w, cudaSetDevice(to.device));
    CK(w, cudaStreamWaitEvent(handle(w, to), w->event[from.device], 0));
    note(w, "event %s(%d) -> %s(%d)", stream_names[from.type], from.device, stream_names[to.type], to.device);
    return true;
}

enum api { API_ASYNC, API_SYNC, API_PEER_ASYNC, API_PEER, APIS };
static const char *const api_names[] = {"cudaMemcpyAsync", "cudaMemcpy", "cudaMemcpyPeerAsync", "cudaMemcpyPeer"};

/* One random copy after the work of *cur; *cur becomes the stream it went to.
 * Adds the destination range to touched[]. */
static bool random_copy(struct worker *w, struct stream_ref *cur, struct range *touched, int *ntouched)
{
    /* direction */
    enum { H2D, D2H, D2D_SAME, D2D_CROSS, DIRS } dir = (int)pick(w, ndev > 1 ? DIRS : D2D_CROSS);
    int sdev = (int)pick(w, (unsigned)ndev), ddev = sdev;
    if (dir == D2D_CROSS)
        ddev = (sdev + 1 + (int)pick(w, (unsigned)ndev - 1)) % ndev;
    struct buf *src = pick_buf(w, dir != H2D, sdev);
    struct buf *dst = pick_buf(w, dir != D2H, ddev);
    if (src == dst)
        dst = &w->dev[ddev][src == &w->dev[ddev][0]];
    size_t n = pick_size(w);
    size_t soff = pick(w, SLACK), doff = pick(w, SLACK);

    /* API and stream */
    enum api api = (enum api)pick(w, (dir == D2D_SAME || dir == D2D_CROSS) ? APIS : API_PEER_ASYNC);
    struct stream_ref to = {(int)pick(w, (unsigned)ndev), (enum stream_type)pick(w, STREAM_TYPES)};
    int current = to.device;
    if (api == API_SYNC || api == API_PEER) {
        /* the legacy stream of the current device; for a copy between two
         * devices, the current device may be either (or a third) */
        current = dir == D2D_CROSS ? (int)pick(w, (unsigned)ndev) : (src->device >= 0 ? src->device : dst->device);
        to = (struct stream_ref){current, LEGACY};
    }
    unsigned legacy_copy_devices = 0;
    if ((api == API_SYNC || api == API_PEER) && sdev != ddev && src->device >= 0 && dst->device >= 0)
        legacy_copy_devices = 1u << sdev | 1u << ddev;
    /* a small asynchronous H2D from pinned memory on a stream with nothing of
     * its own queued reads its source when issued, not after the work the
     * implicit ordering of the legacy and blocking streams puts before it
     * (measured on an H100: tests/conformance/pinned_h2d_reads_late.c, 16 KiB
     * early, 32 KiB late): a program orders it by an event on its own stream */
    bool early_read = dir == H2D && (src->kind == PINNED || src->kind == REGISTERED) && n <= EARLY_READ_MAX &&
                      api == API_ASYNC;
    if (!link_streams(w, *cur, to, legacy_copy_devices, !early_read))
        return false;
    if (to.type != LEGACY && to.type != PER_THREAD && chance(w, 30))
        current = (int)pick(w, (unsigned)ndev); /* a created stream of a device that is not current */
    CK(w, cudaSetDevice(current));

    enum cudaMemcpyKind kind = cudaMemcpyDefault;
    if (chance(w, 50))
        kind = dir == H2D ? cudaMemcpyHostToDevice : dir == D2H ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
    note(w, "%s %zu bytes %s(%d)+%zu -> %s(%d)+%zu kind %d on %s(%d), current %d", api_names[api], n,
         kind_names[src->kind], src->device, soff, kind_names[dst->kind], dst->device, doff, (int)kind,
         stream_names[to.type], to.device, current);
    cudaStream_t s = handle(w, to);
    switch (api) {
    case API_ASYNC: CK(w, cudaMemcpyAsync(dst->p + doff, src->p + soff, n, kind, s)); break;
    case API_SYNC: CK(w, cudaMemcpy(dst->p + doff, src->p + soff, n, kind)); break;
    case API_PEER_ASYNC: CK(w, cudaMemcpyPeerAsync(dst->p + doff, ddev, src->p + soff, sdev, n, s)); break;
    default: CK(w, cudaMemcpyPeer(dst->p + doff, ddev, src->p + soff, sdev, n)); break;
    }
    memmove(dst->model + doff, src->model + soff, n);
    w->copies++;
    w->bytes += n;
    /* a 0-byte copy puts nothing on its stream, so it orders nothing (measured:
     * tests/conformance/zero_byte_copy.c): the next operation still follows
     * the stream of the one before */
    if (n > 0)
        *cur = to;
    struct range r = {dst, doff, n};
    /* host promises, checked before any synchronization */
    if (dst->kind == PAGEABLE && (api == API_ASYNC || api == API_SYNC)) {
        if (!verify_range(w, &r, "on return of a pageable D2H"))
            return true;
    } else if (dst->kind == DEVICE || dst->kind == PINNED || dst->kind == REGISTERED) {
        touched[(*ntouched)++] = r;
    }
    if (src->kind == PAGEABLE && n > 0) {
        /* consumed on return: overwrite it at once */
        uint32_t seed = (uint32_t)next(w);
        for (size_t i = 0; i < n; i++)
            src->model[soff + i] = stress_pattern(seed, i);
        memcpy(src->p + soff, src->model + soff, n);
    }
    return true;
}

/* A fill kernel on a device buffer of cur's device (after a link to it). */
static bool random_kernel(struct worker *w, struct stream_ref *cur, struct range *touched, int *ntouched)
{
    struct stream_ref to = {(int)pick(w, (unsigned)ndev), (enum stream_type)pick(w, STREAM_TYPES)};
    if (!link_streams(w, *cur, to, 0, true))
        return false;
    struct buf *b = &w->dev[to.device][pick(w, 2)];
    size_t n = pick_size(w), off = pick(w, SLACK);
    uint32_t seed = (uint32_t)next(w);
    double us = (double)pick(w, (unsigned)kernel_us + 1);
    CK(w, cudaSetDevice(to.device));
    note(w, "fill kernel %zu bytes device(%d)+%zu, %.0f us, on %s(%d)", n, to.device, off, us,
         stream_names[to.type], to.device);
    CK(w, stress_kernel_fill(handle(w, to), b->p + off, n, seed, us));
    for (size_t i = 0; i < n; i++)
        b->model[off + i] = stress_pattern(seed, i);
    *cur = to;
    touched[(*ntouched)++] = (struct range){b, off, n};
    return true;
}

/* Waits for everything issued to cur, one of the ways a program does. */
static bool synchronize(struct worker *w, struct stream_ref cur)
{
    CK(w, cudaSetDevice(cur.device));
    cudaStream_t s = handle(w, cur);
    switch (pick(w, 4)) {
    case 0:
        note(w, "cudaStreamSynchronize %s(%d)", stream_names[cur.type], cur.device);
        CK(w, cudaStreamSynchronize(s));
        break;
    case 1:
        note(w, "cudaEventSynchronize after %s(%d)", stream_names[cur.type], cur.device);
        CK(w, cudaEventRecord(w->event[cur.device], s));
        CK(w, cudaEventSynchronize(w->event[cur.device]));
        break;
    case 2:
        note(w, "cudaDeviceSynchronize %d", cur.device);
        CK(w, cudaDeviceSynchronize());
        break;
    default: {
        note(w, "cudaStreamQuery until done %s(%d)", stream_names[cur.type], cur.device);
        cudaError_t err;
        while ((err = cudaStreamQuery(s)) == cudaErrorNotReady) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
        CK(w, err);
        break;
    }
    }
    return true;
}

static bool chain(struct worker *w)
{
    struct range touched[MAX_CHAIN];
    int ntouched = 0;
    w->nops = 0;
    struct stream_ref cur = {(int)pick(w, (unsigned)ndev), (enum stream_type)pick(w, STREAM_TYPES)};
    int len = 1 + (int)pick(w, MAX_CHAIN);
    for (int i = 0; i < len; i++) {
        bool ok = chance(w, 20) ? random_kernel(w, &cur, touched, &ntouched)
                                : random_copy(w, &cur, touched, &ntouched);
        if (!ok)
            return false;
    }
    if (!synchronize(w, cur))
        return false;
    for (int i = 0; i < ntouched; i++)
        verify_range(w, &touched[i], "after synchronizing");
    return atomic_load(&cuda_failed) == 0;
}

static unsigned chains_per_thread = 200;

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    if (!worker_setup(w))
        atomic_store(&cuda_failed, 1);
    for (unsigned i = 0; i < chains_per_thread && atomic_load(&cuda_failed) == 0; i++)
        if (!chain(w))
            break;
    if (atomic_load(&cuda_failed) == 0)
        cudaDeviceSynchronize();
    worker_teardown(w);
    return NULL;
}

int main(void)
{
    const char *s = getenv("STRESS_SEED");
    uint64_t seed = s != NULL && *s != '\0' ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)clock();
    unsigned threads = (unsigned)parse_size(getenv("STRESS_THREADS"), 3);
    chains_per_thread = (unsigned)parse_size(getenv("STRESS_CHAINS"), 200);
    max_bytes = parse_size(getenv("STRESS_MAX_BYTES"), 256u << 20);
    kernel_us = (double)parse_size(getenv("STRESS_KERNEL_US"), 2000);
    cross_legacy = getenv("STRESS_CROSS_LEGACY") == NULL || strcmp(getenv("STRESS_CROSS_LEGACY"), "0") != 0;
    verbose = getenv("STRESS_VERBOSE") != NULL && strcmp(getenv("STRESS_VERBOSE"), "1") == 0;
    if (threads < 1 || threads > 64)
        threads = 3;
    buf_bytes = max_bytes + SLACK + GUARD;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        fprintf(stderr, "stress: no CUDA device\n");
        return 2;
    }
    ndev = (int)parse_size(getenv("STRESS_DEVICES"), (size_t)count);
    if (ndev > count)
        ndev = count;
    if (ndev > MAX_DEVICES)
        ndev = MAX_DEVICES;
    if (ndev < 1)
        ndev = 1;
    if (getenv("STRESS_PEER") != NULL && strcmp(getenv("STRESS_PEER"), "1") == 0)
        for (int a = 0; a < ndev; a++)
            for (int b = 0; b < ndev; b++) {
                int can = 0;
                if (a != b && cudaDeviceCanAccessPeer(&can, a, b) == cudaSuccess && can) {
                    cudaSetDevice(a);
                    cudaDeviceEnablePeerAccess(b, 0);
                }
            }
    printf("stress: seed %" PRIu64 " threads %u chains %u devices %d max_bytes %zu\n", seed, threads,
           chains_per_thread, ndev, max_bytes);
    fflush(stdout);

    struct worker *w = calloc(threads, sizeof *w);
    pthread_t *t = calloc(threads, sizeof *t);
    if (w == NULL || t == NULL)
        return 2;
    for (unsigned i = 0; i < threads; i++) {
        w[i].id = (int)i;
        w[i].rng = seed * 1000003u + i;
        pthread_create(&t[i], NULL, worker_main, &w[i]);
    }
    unsigned long long copies = 0, bytes = 0, mismatches = 0;
    for (unsigned i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        copies += w[i].copies;
        bytes += w[i].bytes;
        mismatches += w[i].mismatches;
    }
    free(w);
    free(t);
    printf("stress: copies %llu bytes %llu mismatches %llu\n", copies, bytes, mismatches);
    if (atomic_load(&cuda_failed))
        return 2;
    return mismatches != 0 ? 1 : 0;
}
