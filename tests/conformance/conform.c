/* conform.c - see conform.h. */
#include "conform.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char rule[256];
static int nargs;
static char **args;

void cf_ck(cudaError_t err, const char *what, const char *file, int line)
{
    if (err == cudaSuccess)
        return;
    char call[64];
    snprintf(call, sizeof call, "%.*s", (int)strcspn(what, "("), what);
    printf("CONFORM %s ERROR %s=%s\n", rule, call, cudaGetErrorName(err));
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorName(err));
    exit(1);
}

static void watchdog(int sig)
{
    (void)sig;
    char line[300];
    int n = snprintf(line, sizeof line, "CONFORM %s HANG\n", rule);
    if (write(STDOUT_FILENO, line, (size_t)n) < 0)
        _exit(2);
    _exit(2);
}

void cf_name(int argc, char **argv)
{
    const char *name = strrchr(argv[0], '/');
    name = name != NULL ? name + 1 : argv[0];
    size_t len = (size_t)snprintf(rule, sizeof rule, "%s", name);
    for (int i = 1; i < argc && len < sizeof rule; i++)
        len += (size_t)snprintf(rule + len, sizeof rule - len, ".%s", argv[i]);
    nargs = argc - 1;
    args = argv + 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
}

void cf_begin(int argc, char **argv)
{
    cf_name(argc, argv);
    signal(SIGALRM, watchdog);
    alarm(60);
    CF_CK(cudaSetDevice(0));
    cf_warm_kernels();
}

bool cf_arg(const char *name)
{
    for (int i = 0; i < nargs; i++)
        if (strcmp(args[i], name) == 0)
            return true;
    return false;
}

void cf_need_devices(int n)
{
    int have = 0;
    CF_CK(cudaGetDeviceCount(&have));
    if (have < n) {
        printf("CONFORM %s SKIP\n", rule);
        fprintf(stderr, "%s: needs %d devices, %d present\n", rule, n, have);
        exit(0);
    }
}

void cf_result(const char *fmt, ...)
{
    char outcome[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(outcome, sizeof outcome, fmt, ap);
    va_end(ap);
    printf("CONFORM %s %s\n", rule, outcome);
}

int *cf_flags(int n)
{
    int *p = NULL;
    CF_CK(cudaHostAlloc((void **)&p, (size_t)n * sizeof *p, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(p, 0, (size_t)n * sizeof *p);
    return p;
}

cudaStream_t cf_stream(int device, bool blocking)
{
    cudaStream_t s;
    CF_CK(cudaSetDevice(device));
    CF_CK(cudaStreamCreateWithFlags(&s, blocking ? cudaStreamDefault : cudaStreamNonBlocking));
    return s;
}

uint32_t *cf_words(int device, size_t n)
{
    uint32_t *p;
    CF_CK(cudaSetDevice(device));
    CF_CK(cudaMalloc((void **)&p, n * sizeof *p));
    return p;
}

void cf_sync_all(void)
{
    int have = 0;
    CF_CK(cudaGetDeviceCount(&have));
    for (int d = 0; d < have; d++) {
        CF_CK(cudaSetDevice(d));
        CF_CK(cudaDeviceSynchronize());
    }
    CF_CK(cudaSetDevice(0));
}

size_t cf_words_right(const uint32_t *p, size_t n, uint32_t seed)
{
    cf_sync_all();
    uint32_t *h = malloc(n * sizeof *h);
    if (h == NULL)
        cf_ck(cudaErrorMemoryAllocation, "malloc", __FILE__, __LINE__);
    CF_CK(cudaMemcpy(h, p, n * sizeof *h, cudaMemcpyDeviceToHost));
    size_t right = 0;
    for (size_t i = 0; i < n; i++)
        right += h[i] == cf_word(i, seed);
    free(h);
    return right;
}

int cf_reader_saw(int wdev, cudaStream_t writer, int rdev, cudaStream_t reader)
{
    int *f = cf_flags(2);
    f[1] = -1;
    CF_CK(cudaSetDevice(wdev));
    cf_set_flag_after(writer, &f[0], 1, 200);
    CF_CK(cudaSetDevice(rdev));
    cf_copy_flag(reader, &f[0], &f[1]);
    cf_sync_all();
    int saw = f[1];
    CF_CK(cudaFreeHost(f));
    return saw;
}
