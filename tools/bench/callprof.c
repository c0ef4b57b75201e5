/* callprof.c - a developer's tool: which runtime functions a program (and the
 * shim in front of it) calls, how often, and what they cost on this machine.
 *
 * Preloaded after the shim (LD_PRELOAD="libunstall.so libcallprof.so"), it
 * defines every function of shim/base/real_api.def: the shim's own calls,
 * which it resolves with dlsym(RTLD_NEXT), and the program's calls that the
 * shim does not export land here, are timed around the real function and
 * counted. Preloaded alone, it profiles the native program the same way, so
 * the difference of two runs is what the shim adds. At exit it prints one line
 * per function called: calls, mean and total time on the calling thread, the
 * first call's time and the longest.
 *
 * CALLPROF_SLOW_US=N also lists, at exit, each call that took N microseconds
 * or more (the first 4096): function, thread, start (ms since this library
 * loaded) and length, so that a stall of one thread can be put beside what
 * another thread was doing then (case C's worst launch beside the staging
 * pool's registrations).
 *
 * Build: tools/bench/callprof.sh (or cc -shared -fPIC ... -ldl).
 * Output: stderr, or the file named by CALLPROF_OUT. */
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

enum callprof_fn {
#define US_REAL(ret, name, params, args, rewrite) CALLPROF_##name,
#include "real_api.def"
#undef US_REAL
    CALLPROF_COUNT
};

static const char *const fn_names[CALLPROF_COUNT] = {
#define US_REAL(ret, name, params, args, rewrite) #name,
#include "real_api.def"
#undef US_REAL
};

static _Atomic uint64_t calls[CALLPROF_COUNT], total_ns[CALLPROF_COUNT], first_ns[CALLPROF_COUNT], max_ns[CALLPROF_COUNT];

static void *next_fn(enum callprof_fn fn)
{
    static void *_Atomic resolved[CALLPROF_COUNT];
    void *p = atomic_load_explicit(&resolved[fn], memory_order_acquire);
    if (p == NULL) {
        p = dlsym(RTLD_NEXT, fn_names[fn]);
        if (p == NULL) {
            fprintf(stderr, "callprof: %s not found after this library\n", fn_names[fn]);
            abort();
        }
        atomic_store_explicit(&resolved[fn], p, memory_order_release);
    }
    return p;
}

#define SLOW_MAX 4096
static struct slow_call {
    enum callprof_fn fn;
    long tid;
    uint64_t start_ns, ns;
} slow[SLOW_MAX];
static _Atomic unsigned slow_count;
static uint64_t slow_min_ns = UINT64_MAX, loaded_ns;

__attribute__((constructor)) static void read_slow_option(void)
{
    loaded_ns = now_ns();
    const char *env = getenv("CALLPROF_SLOW_US");
    if (env != NULL && atoi(env) > 0)
        slow_min_ns = (uint64_t)atoi(env) * 1000u;
}

static void account(enum callprof_fn fn, uint64_t t0)
{
    uint64_t dt = now_ns() - t0;
    if (dt >= slow_min_ns) {
        unsigned i = atomic_fetch_add_explicit(&slow_count, 1, memory_order_relaxed);
        if (i < SLOW_MAX)
            slow[i] = (struct slow_call){fn, (long)syscall(SYS_gettid), t0 - loaded_ns, dt};
    }
    if (atomic_fetch_add_explicit(&calls[fn], 1, memory_order_relaxed) == 0)
        atomic_store_explicit(&first_ns[fn], dt, memory_order_relaxed);
    atomic_fetch_add_explicit(&total_ns[fn], dt, memory_order_relaxed);
    uint64_t seen = atomic_load_explicit(&max_ns[fn], memory_order_relaxed);
    while (dt > seen && !atomic_compare_exchange_weak_explicit(&max_ns[fn], &seen, dt, memory_order_relaxed,
                                                               memory_order_relaxed))
        ;
}

#define US_REAL(ret, name, params, args, rewrite)                      \
    __attribute__((visibility("default"))) ret name params            \
    {                                                                  \
        ret(*real_fn) params = (ret(*) params)next_fn(CALLPROF_##name); \
        uint64_t t0 = now_ns();                                        \
        ret r = real_fn args;                                          \
        account(CALLPROF_##name, t0);                                  \
        return r;                                                      \
    }
#include "real_api.def"
#undef US_REAL

__attribute__((destructor)) static void print_profile(void)
{
    const char *path = getenv("CALLPROF_OUT");
    FILE *out = path != NULL ? fopen(path, "a") : NULL;
    if (out == NULL)
        out = stderr;
    fprintf(out, "callprof: function calls mean_ns total_us first_ns max_ns\n");
    for (int i = 0; i < CALLPROF_COUNT; i++) {
        uint64_t n = atomic_load(&calls[i]);
        if (n > 0)
            fprintf(out, "callprof: %s %llu %.0f %.1f %llu %llu\n", fn_names[i], (unsigned long long)n,
                    (double)atomic_load(&total_ns[i]) / (double)n, (double)atomic_load(&total_ns[i]) / 1e3,
                    (unsigned long long)atomic_load(&first_ns[i]), (unsigned long long)atomic_load(&max_ns[i]));
    }
    unsigned n_slow = atomic_load(&slow_count);
    for (unsigned i = 0; i < n_slow && i < SLOW_MAX; i++)
        fprintf(out, "callprof: slow %s tid=%ld start_ms=%.3f us=%.1f\n", fn_names[slow[i].fn], slow[i].tid,
                (double)slow[i].start_ns / 1e6, (double)slow[i].ns / 1e3);
    if (out != stderr)
        fclose(out);
}
