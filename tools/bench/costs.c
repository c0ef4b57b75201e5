/* costs.c - what the shim's own building blocks cost on this CPU, no GPU
 * needed (make bench-costs): a finding (call-site capture, then recording),
 * a walk through a return address the unwinder has not met and a known walk
 * (libunwind as the system ships it, its signal masking on, against
 * libgcc_s's _Unwind_Backtrace), a pointer-table lookup (hit and miss), and the multi-threaded host copy
 * (GB/s by thread count). Linked against the core library, as the unit tests
 * are, but measures instead of asserting: the figures vary with the machine
 * and its load, so they are printed for a person, never judged by a test.
 *
 * Usage: BUILD/bench/costs [HOSTCOPY_MIB]   (default 256)
 * Prints one line a figure: "costs: <what> <value> <unit>". */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "callsite.h"
#include "config.h"
#include "findings.h"
#include "hostcopy.h"
#include "prefault.h"
#include "ptrtable.h"
#include "unwinder.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static struct us_config config;

static void use_config(void)
{
    us_config_set(&config);
}

/* --- a finding ------------------------------------------------------------------------ */

static void record_one(const struct us_site *site)
{
    struct us_finding f = {
        .rule = US_RULE_pageable_h2d,
        .api = "cudaMemcpyAsync",
        .bytes = 4,
        .path = US_PATH_H2D_PAGEABLE,
        .src_device = -1,
        .dst_device = 0,
        .stream_kind = US_STREAM_USER,
        .start_ns = 1000,
        .held_ns = 1000,
    };
    us_findings_record(&f, site);
}

/* A call chain a few frames deep, as a program's copy would have. */
__attribute__((noinline)) static void entry(struct us_site *site, bool record)
{
    us_site_capture(site);
    if (record)
        record_one(site);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void caller(struct us_site *site, bool record, int depth)
{
    if (depth > 0)
        caller(site, record, depth - 1);
    else
        entry(site, record);
    __asm__ volatile("" ::: "memory");
}

static void finding_costs(void)
{
    const int n = 200000;
    struct us_site site;
    /* a process's first finding, after what the shim does at its start
     * (us_prefault_self, us_findings_prepare): the first one pays what
     * no earlier call did */
    us_prefault_self();
    us_findings_prepare();
    double f0 = now_ns();
    caller(&site, true, 8);
    double f1 = now_ns();
    caller(&site, true, 8);
    double f2 = now_ns();
    printf("costs: finding.first %.0f ns, second %.0f ns (capture and record, one site)\n", f1 - f0, f2 - f1);
    double t0 = now_ns();
    for (int i = 0; i < n; i++)
        caller(&site, false, 8);
    double t1 = now_ns();
    for (int i = 0; i < n; i++)
        caller(&site, true, 8);
    double t2 = now_ns();
    for (int i = 0; i < n; i++)
        record_one(&site);
    double t3 = now_ns();
    printf("costs: finding.capture %.0f ns (callsite_depth %u)\n", (t1 - t0) / n, config.callsite_depth);
    printf("costs: finding.capture_and_record %.0f ns\n", (t2 - t1) / n);
    printf("costs: finding.record %.0f ns\n", (t3 - t2) / n);
}

/* --- the unwinder's first walk through a return address ----------------------------- */

/* Each walker's return address is met once per unwinder (libunwind's cache
 * is its own): a walk through one new address. */
#define WALKER(k)                                                  \
    __attribute__((noinline)) static int walker_##k(void **frames) \
    {                                                              \
        int n = us_unwind(frames, 16);                             \
        __asm__ volatile("" ::: "memory");                         \
        return n;                                                  \
    }
WALKER(0) WALKER(1) WALKER(2) WALKER(3) WALKER(4) WALKER(5) WALKER(6) WALKER(7)
static int (*const walkers[])(void **) = {walker_0, walker_1, walker_2, walker_3,
                                          walker_4, walker_5, walker_6, walker_7};
#define WALKERS (int)(sizeof walkers / sizeof walkers[0])

/* Mean ns of a walk through one new return address, then of a known walk. */
static void new_address_walks(double *new_ns, double *known_ns)
{
    void *frames[16];
    (void)walkers[0](frames); /* the copy's first walk: sets itself up */
    double t0 = now_ns();
    for (int k = 1; k < WALKERS; k++)
        (void)walkers[k](frames);
    double t1 = now_ns();
    for (int i = 0; i < 1000; i++)
        (void)walkers[i % WALKERS](frames);
    *new_ns = (t1 - t0) / (WALKERS - 1);
    *known_ns = (now_ns() - t1) / 1000;
}

static const char *const unwinder_names[] = {
    [US_UNWINDER_BACKTRACE] = "backtrace(3)",
    [US_UNWINDER_LIBGCC] = "libgcc_s _Unwind_Backtrace",
    [US_UNWINDER_LIBUNWIND] = "libunwind, signal masking on",
};

/* One unwinder's figures: `kind` where it loads (the next in the shim's
 * order otherwise, which the line names). */
static void unwind_costs(enum us_unwinder_kind kind)
{
    us_unwinder_prefer(kind);
    double new_ns, known_ns;
    new_address_walks(&new_ns, &known_ns);
    printf("costs: unwind.new_address %.0f ns, known %.0f ns (%s)\n", new_ns, known_ns,
           unwinder_names[us_unwinder_kind()]);
}

/* --- the pointer table ---------------------------------------------------------------- */

#define LOOKUP_ADDRS 65536u /* a power of two */
#define LOOKUPS 20000000u

static double lookups(const uintptr_t *addrs, unsigned *hits)
{
    unsigned h = 0;
    double t0 = now_ns();
    for (unsigned k = 0; k < LOOKUPS; k++)
        h += us_ptrtable_lookup(addrs[k & (LOOKUP_ADDRS - 1)], NULL);
    *hits = h;
    return (now_ns() - t0) / LOOKUPS;
}

static void ptrtable_costs(void)
{
    /* 10000 ranges of 64 KiB .. 8 MiB with gaps, as a caching allocator leaves them */
    const unsigned ranges = 10000;
    const uintptr_t region = (uintptr_t)0x7f0000000000;
    uintptr_t *base = malloc(ranges * sizeof *base), *hit = malloc(LOOKUP_ADDRS * sizeof *hit),
              *far = malloc(LOOKUP_ADDRS * sizeof *far);
    size_t *size = malloc(ranges * sizeof *size);
    if (base == NULL || size == NULL || hit == NULL || far == NULL) {
        printf("costs: ptrtable skipped (out of memory)\n");
        exit(1);
    }
    uint64_t x = 42;
    uintptr_t at = region;
    for (unsigned i = 0; i < ranges; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        size[i] = ((size_t)64 << 10) << (x >> 61);
        base[i] = at;
        at += size[i] + ((size_t)64 << 10);
        us_ptrtable_insert(base[i], size[i], US_MEM_DEVICE, 0);
    }
    for (unsigned k = 0; k < LOOKUP_ADDRS; k++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        unsigned i = (unsigned)((x >> 33) % ranges);
        hit[k] = base[i] + (x >> 7) % size[i];
        far[k] = (uintptr_t)0x5555000000000 + (x >> 11) % ((uint64_t)64 << 30); /* heap-like: unknown */
    }
    unsigned hits;
    double ns_hit = lookups(hit, &hits);
    unsigned hit_count = hits;
    double ns_far = lookups(far, &hits);
    printf("costs: ptrtable.lookup_hit %.1f ns (%u ranges, %u of %u found)\n", ns_hit, ranges, hit_count, LOOKUPS);
    printf("costs: ptrtable.lookup_miss %.1f ns (%u found)\n", ns_far, hits);
    free(base);
    free(size);
    free(hit);
    free(far);
}

/* --- the host copy ---------------------------------------------------------------------- */

static double copy_gbps(unsigned threads, unsigned char *dst, const unsigned char *src, size_t n)
{
    config.copy_threads = threads;
    config.copy_thread_min = (size_t)2 << 20;
    use_config();
    us_hostcopy(dst, src, n); /* warm: pages touched, threads started */
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_ns();
        us_hostcopy(dst, src, n);
        double dt = now_ns() - t0;
        if (dt < best)
            best = dt;
    }
    return (double)n / best;
}

static void hostcopy_costs(size_t mib)
{
    size_t n = mib << 20;
    unsigned char *src = malloc(n), *dst = malloc(n);
    if (src == NULL || dst == NULL) {
        printf("costs: hostcopy skipped (out of memory for %zu MiB)\n", mib);
        return;
    }
    memset(src, 0x5a, n);
    memset(dst, 0, n);
    static const unsigned counts[] = {1, 2, 4, 8, 16};
    double one = 0;
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        double g = copy_gbps(counts[i], dst, src, n);
        if (counts[i] == 1)
            one = g;
        printf("costs: hostcopy.threads_%u %.1f GB/s (x%.2f; %zu MiB, %ld CPUs)\n", counts[i], g, g / one, mib,
               sysconf(_SC_NPROCESSORS_ONLN));
    }
    if (memcmp(dst, src, n) != 0)
        printf("costs: hostcopy copied wrong bytes\n");
    /* into memory never touched, as a D2H into a fresh tensor: one copy per
     * mapping (the first is the only one that finds the pages missing), as
     * it is and after the D2H's huge-page advice (us_hostcopy_advise_fresh,
     * option d2h_hugepages); then the munmap, which a program's free() is */
    for (int advised = 0; advised <= 1; advised++)
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i += 3) {
            config.copy_threads = counts[i];
            use_config();
            unsigned char *fresh = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (fresh == MAP_FAILED)
                break;
            double t0 = now_ns();
            bool took = advised && us_hostcopy_advise_fresh(fresh, n);
            us_hostcopy(fresh, src, n);
            double t1 = now_ns();
            munmap(fresh, n);
            double t2 = now_ns();
            printf("costs: hostcopy.fresh%s_threads_%u %.1f GB/s, munmap %.2f ms (%zu MiB into memory never touched%s)\n",
                   advised ? "_advised" : "", counts[i], (double)n / (t1 - t0), (t2 - t1) / 1e6, mib,
                   advised && !took ? "; advice not taken: THP off here" : "");
        }
    free(src);
    free(dst);
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    us_config_load(&config, NULL, NULL, NULL, NULL);
    use_config();
    finding_costs(); /* with the unwinder the shim chooses */
    unwind_costs(US_UNWINDER_LIBUNWIND);
    unwind_costs(US_UNWINDER_LIBGCC);
    ptrtable_costs();
    hostcopy_costs(mib ? mib : 256);
    return 0;
}
