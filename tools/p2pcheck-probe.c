/* p2pcheck-probe.c - what tools/p2pcheck asks the CUDA runtime, one question per run.
 * Built against libcudart (the real one on a GPU machine, build/fakecuda in
 * CI); needs no kernels and no preload. Each subcommand prints one JSON
 * object per line on stdout; tools/p2pcheck runs them in child processes, so
 * that enabling peer access (which changes the process, and has locked
 * machines up) and the preloaded shim stay out of the other measurements.
 *
 *   probe info                                 versions, devices, every ordered pair
 *   probe enable SRC DST                       cudaDeviceEnablePeerAccess, then a checked copy
 *   probe host SIZES REPS DEV...               pinned/pageable H2D/D2H per device
 *   probe peer enabled|staged SIZES REPS SRC DST [SRC DST]...
 *                                              cudaMemcpyPeerAsync SRC -> DST per pair
 *
 * SIZES: bytes, ',' between them. A measurement's first copy is timed on its
 * own (first_ms: first use, lazy initialization included) and excluded from
 * the REPS copies that give gbps. ok: the bytes that arrived were checked. */
#include <cuda_runtime_api.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void put_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void put_error(const char *call, cudaError_t err)
{
    printf("{\"what\":\"error\",\"call\":");
    put_str(call);
    printf(",\"error\":");
    put_str(cudaGetErrorName(err));
    printf(",\"text\":");
    put_str(cudaGetErrorString(err));
    printf("}\n");
    fflush(stdout);
}

/* Evaluates a runtime call; on failure prints an error line and returns false. */
#define TRY(call) (check_call(#call, (call)))
static bool check_call(const char *text, cudaError_t err)
{
    if (err == cudaSuccess)
        return true;
    put_error(text, err);
    (void)cudaGetLastError();
    return false;
}

static void cmd_info(void)
{
    int driver = 0, runtime = 0, n = 0;
    cudaError_t derr = cudaDriverGetVersion(&driver);
    cudaError_t rerr = cudaRuntimeGetVersion(&runtime);
    printf("{\"what\":\"versions\",\"driver\":%d,\"runtime\":%d,\"driver_error\":", driver, runtime);
    put_str(cudaGetErrorName(derr));
    printf(",\"runtime_error\":");
    put_str(cudaGetErrorName(rerr));
    printf("}\n");
    if (!TRY(cudaGetDeviceCount(&n)))
        return;
    for (int d = 0; d < n; d++) {
        struct cudaDeviceProp prop;
        char bus[32] = "";
        if (!TRY(cudaGetDeviceProperties(&prop, d)) || !TRY(cudaDeviceGetPCIBusId(bus, sizeof bus, d)))
            continue;
        printf("{\"what\":\"device\",\"index\":%d,\"name\":", d);
        put_str(prop.name);
        printf(",\"bus_id\":");
        put_str(bus);
        printf(",\"compute\":\"%d.%d\",\"memory_bytes\":%zu}\n", prop.major, prop.minor, prop.totalGlobalMem);
    }
    for (int s = 0; s < n; s++)
        for (int t = 0; t < n; t++) {
            if (s == t)
                continue;
            int can = -1, rank = -1, access = -1, atomics = -1;
            if (!TRY(cudaDeviceCanAccessPeer(&can, s, t)) ||
                !TRY(cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, s, t)) ||
                !TRY(cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, s, t)) ||
                !TRY(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, s, t)))
                continue;
            printf("{\"what\":\"pair\",\"src\":%d,\"dst\":%d,\"can_access_peer\":%d,\"performance_rank\":%d,"
                   "\"access_supported\":%d,\"native_atomics\":%d}\n",
                   s, t, can, rank, access, atomics);
        }
}

/* Copies SRC's bytes to DST with peer access enabled from SRC to DST, and
 * checks what arrived: on some machines (IOMMU in the way) enabling succeeds
 * and the data that comes over is wrong. */
static int cmd_enable(int src, int dst)
{
    const size_t bytes = 1 << 20;
    if (!TRY(cudaSetDevice(src)))
        return 1;
    double t0 = now_ms();
    cudaError_t err = cudaDeviceEnablePeerAccess(dst, 0);
    double enable_ms = now_ms() - t0;
    (void)cudaGetLastError();
    printf("{\"what\":\"enable\",\"src\":%d,\"dst\":%d,\"result\":", src, dst);
    put_str(cudaGetErrorName(err));
    printf(",\"text\":");
    put_str(cudaGetErrorString(err));
    printf(",\"ms\":%.3f}\n", enable_ms);
    fflush(stdout);
    if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled)
        return 0;
    void *s = NULL, *d = NULL;
    unsigned char *host = malloc(bytes), *back = malloc(bytes);
    if (host == NULL || back == NULL)
        return 1;
    for (size_t i = 0; i < bytes; i++)
        host[i] = (unsigned char)(i * 7 + 3);
    bool ok = TRY(cudaMalloc(&s, bytes)) && TRY(cudaMemcpy(s, host, bytes, cudaMemcpyHostToDevice)) &&
              TRY(cudaSetDevice(dst)) && TRY(cudaMalloc(&d, bytes)) && TRY(cudaMemset(d, 0, bytes)) &&
              TRY(cudaDeviceSynchronize()) && TRY(cudaSetDevice(src)) &&
              TRY(cudaMemcpyPeer(d, dst, s, src, bytes)) && TRY(cudaDeviceSynchronize()) &&
              TRY(cudaMemcpy(back, d, bytes, cudaMemcpyDeviceToHost));
    printf("{\"what\":\"enable_copy\",\"src\":%d,\"dst\":%d,\"ok\":%s}\n", src, dst,
           ok && memcmp(host, back, bytes) == 0 ? "true" : "false");
    free(host);
    free(back);
    return 0;
}

static void put_bw(const char *path, int src, int dst, size_t bytes, int reps, double first_ms, double total_ms,
                   bool ok)
{
    printf("{\"what\":\"bw\",\"path\":\"%s\",\"src\":%d,\"dst\":%d,\"bytes\":%zu,\"reps\":%d,\"first_ms\":%.3f,"
           "\"ms\":%.3f,\"gbps\":%.2f,\"ok\":%s}\n",
           path, src, dst, bytes, reps, first_ms, total_ms, total_ms > 0 ? bytes * (double)reps / total_ms / 1e6 : 0.0,
           ok ? "true" : "false");
    fflush(stdout);
}

/* One copy timed alone (the first use), then `reps` timed together. */
static bool timed_copies(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, int reps,
                         cudaStream_t stream, double *first_ms, double *total_ms)
{
    double t0 = now_ms();
    if (!TRY(cudaMemcpyAsync(dst, src, bytes, kind, stream)) || !TRY(cudaStreamSynchronize(stream)))
        return false;
    double t1 = now_ms();
    for (int r = 0; r < reps; r++)
        if (!TRY(cudaMemcpyAsync(dst, src, bytes, kind, stream)))
            return false;
    if (!TRY(cudaStreamSynchronize(stream)))
        return false;
    *first_ms = t1 - t0;
    *total_ms = now_ms() - t1;
    return true;
}

static void fill(unsigned char *p, size_t bytes, unsigned seed)
{
    for (size_t i = 0; i < bytes; i++)
        p[i] = (unsigned char)(i * 131 + seed);
}

/* pageable H2D, pinned D2H (checks it), pinned H2D, pageable D2H (checks it). */
static int host_device(int dev, size_t bytes, int reps)
{
    void *d = NULL;
    unsigned char *pinned = NULL, *pageable = malloc(bytes);
    cudaStream_t st;
    if (pageable == NULL || !TRY(cudaSetDevice(dev)) || !TRY(cudaMalloc(&d, bytes)) ||
        !TRY(cudaMallocHost((void **)&pinned, bytes)) || !TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)))
        return 1;
    fill(pageable, bytes, (unsigned)dev + 1);
    memset(pinned, 0, bytes);
    double first, total;
    if (timed_copies(d, pageable, bytes, cudaMemcpyHostToDevice, reps, st, &first, &total))
        put_bw("pageable_h2d", -1, dev, bytes, reps, first, total, true);
    if (timed_copies(pinned, d, bytes, cudaMemcpyDeviceToHost, reps, st, &first, &total)) {
        bool ok = memcmp(pinned, pageable, bytes) == 0;
        put_bw("pinned_d2h", dev, -1, bytes, reps, first, total, ok);
    }
    if (timed_copies(d, pinned, bytes, cudaMemcpyHostToDevice, reps, st, &first, &total))
        put_bw("pinned_h2d", -1, dev, bytes, reps, first, total, true);
    memset(pageable, 0, bytes);
    if (timed_copies(pageable, d, bytes, cudaMemcpyDeviceToHost, reps, st, &first, &total)) {
        bool ok = memcmp(pinned, pageable, bytes) == 0;
        put_bw("pageable_d2h", dev, -1, bytes, reps, first, total, ok);
    }
    (void)cudaStreamDestroy(st);
    (void)cudaFreeHost(pinned);
    (void)cudaFree(d);
    free(pageable);
    return 0;
}

/* Peer access from SRC to DST, which the copy needs, and from DST to SRC, as
 * programs usually enable both (a refusal there is not the pair's). */
static bool enable_pair(int src, int dst)
{
    cudaError_t err = cudaSetDevice(src);
    if (err == cudaSuccess)
        err = cudaDeviceEnablePeerAccess(dst, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled)
        err = cudaSuccess;
    if (err != cudaSuccess) {
        put_error("cudaDeviceEnablePeerAccess", err);
        (void)cudaGetLastError();
        return false;
    }
    if (cudaSetDevice(dst) == cudaSuccess)
        (void)cudaDeviceEnablePeerAccess(src, 0);
    (void)cudaGetLastError();
    return true;
}

/* The bytes that arrived at the start and the end of DST, against the byte
 * SRC was set to. */
static bool peer_check(const void *d, size_t bytes, unsigned char value)
{
    unsigned char probe[4096];
    size_t n = bytes < sizeof probe ? bytes : sizeof probe;
    for (int end = 0; end < 2; end++) {
        const unsigned char *at = (const unsigned char *)d + (end ? bytes - n : 0);
        if (!TRY(cudaMemcpy(probe, at, n, cudaMemcpyDeviceToHost)))
            return false;
        for (size_t i = 0; i < n; i++)
            if (probe[i] != value)
                return false;
    }
    return true;
}

static int peer_pair(bool enabled, int src, int dst, size_t bytes, int reps)
{
    void *s = NULL, *d = NULL;
    cudaStream_t st;
    unsigned char value = (unsigned char)(0x40 + src * 16 + dst);
    bool peer_on = enabled && enable_pair(src, dst);
    if (!TRY(cudaSetDevice(dst)) || !TRY(cudaMalloc(&d, bytes)) || !TRY(cudaMemset(d, 0, bytes)) ||
        !TRY(cudaDeviceSynchronize()) || !TRY(cudaSetDevice(src)) || !TRY(cudaMalloc(&s, bytes)) ||
        !TRY(cudaMemset(s, value, bytes)) || !TRY(cudaDeviceSynchronize()) ||
        !TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)))
        return 1;
    double first_ms = 0, total_ms = 0;
    double t0 = now_ms();
    bool ok = TRY(cudaMemcpyPeerAsync(d, dst, s, src, bytes, st)) && TRY(cudaStreamSynchronize(st));
    double t1 = now_ms();
    for (int r = 0; ok && r < reps; r++)
        ok = TRY(cudaMemcpyPeerAsync(d, dst, s, src, bytes, st));
    ok = ok && TRY(cudaStreamSynchronize(st));
    if (ok) {
        first_ms = t1 - t0;
        total_ms = now_ms() - t1;
        put_bw(enabled ? (peer_on ? "peer_enabled" : "peer_enable_failed") : "staged", src, dst, bytes, reps,
               first_ms, total_ms, peer_check(d, bytes, value));
    }
    (void)cudaStreamDestroy(st);
    (void)cudaFree(s);
    (void)cudaSetDevice(dst);
    (void)cudaFree(d);
    return ok ? 0 : 1;
}

/* "1048576,268435456" -> sizes; returns how many, 0 on a bad list. */
static int parse_sizes(const char *text, size_t *out, int max)
{
    int n = 0;
    const char *p = text;
    while (*p && n < max) {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || v == 0 || (*end != ',' && *end != '\0'))
            return 0;
        out[n++] = (size_t)v;
        p = *end ? end + 1 : end;
    }
    return *p ? 0 : n;
}

static int usage(void)
{
    fputs("usage: probe info | enable SRC DST | host SIZES REPS DEV... | peer enabled|staged SIZES REPS SRC DST...\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2)
        return usage();
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0 && argc == 2) {
        cmd_info();
        return 0;
    }
    if (strcmp(cmd, "enable") == 0 && argc == 4)
        return cmd_enable(atoi(argv[2]), atoi(argv[3]));
    size_t sizes[16];
    int rc = 0;
    if (strcmp(cmd, "host") == 0 && argc >= 5) {
        int nsizes = parse_sizes(argv[2], sizes, 16), reps = atoi(argv[3]);
        if (nsizes == 0 || reps < 1)
            return usage();
        for (int i = 4; i < argc; i++)
            for (int k = 0; k < nsizes; k++)
                rc |= host_device(atoi(argv[i]), sizes[k], reps);
        return rc;
    }
    if (strcmp(cmd, "peer") == 0 && argc >= 7 && (argc - 5) % 2 == 0) {
        bool enabled = strcmp(argv[2], "enabled") == 0;
        int nsizes = parse_sizes(argv[3], sizes, 16), reps = atoi(argv[4]);
        if ((!enabled && strcmp(argv[2], "staged") != 0) || nsizes == 0 || reps < 1)
            return usage();
        for (int i = 5; i + 1 < argc; i += 2)
            for (int k = 0; k < nsizes; k++)
                rc |= peer_pair(enabled, atoi(argv[i]), atoi(argv[i + 1]), sizes[k], reps);
        return rc;
    }
    return usage();
}
