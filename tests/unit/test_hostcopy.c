/* test_hostcopy.c - the multi-threaded host copy: byte-exact for every size
 * class and alignment, with one thread and with the pool, several callers at
 * once, fork safety. GB/s by thread count: make bench-costs
 * (tools/bench/costs.c). */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "summary.h"
#include "thp.h"

#include "config.h"
#include "hostcopy.h"

static struct us_config defaults;

static void set_threads(unsigned threads, size_t min_bytes)
{
    struct us_config cfg = defaults;
    cfg.copy_threads = threads;
    cfg.copy_thread_min = min_bytes;
    us_config_set(&cfg);
}

static int setup(void **state)
{
    (void)state;
    us_config_load(&defaults, NULL, NULL, NULL, NULL);
    set_threads(4, 4096);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    us_config_set(&defaults);
    return 0;
}

/* A pattern that differs at every byte offset and between buffers. */
static void fill(unsigned char *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (unsigned char)(x >> 16);
    }
}

/* The copy under test: us_hostcopy, or us_hostcopy_to_staging (its stores
 * bypass the cache, from the first 16-byte aligned destination byte on). */
static void (*copy_fn)(void *dst, const void *src, size_t bytes) = us_hostcopy;

/* Copies `n` bytes from src+soff to dst+doff inside guarded buffers and
 * checks the copied bytes and that nothing around them changed. */
static void check_copy(size_t n, size_t soff, size_t doff, unsigned seed)
{
    const size_t guard = 64;
    unsigned char *src = malloc(n + soff + guard);
    unsigned char *dst = malloc(n + doff + 2 * guard);
    unsigned char *ref = malloc(n + doff + 2 * guard);
    assert_non_null(src);
    assert_non_null(dst);
    assert_non_null(ref);
    fill(src, n + soff + guard, seed);
    fill(dst, n + doff + 2 * guard, seed + 7);
    memcpy(ref, dst, n + doff + 2 * guard);
    memcpy(ref + guard + doff, src + soff, n);
    copy_fn(dst + guard + doff, src + soff, n);
    assert_memory_equal(dst, ref, n + doff + 2 * guard);
    free(src);
    free(dst);
    free(ref);
}

static const size_t sizes[] = {
    0, 1, 2, 3, 7, 63, 4095, 4096, 4097, (1u << 20) - 1, 1u << 20, (1u << 20) + 1,
    (2u << 20) - 3, 2u << 20, (2u << 20) + 5, (5u << 20) + 12345, (24u << 20) + 333,
};

static void all_sizes(void)
{
    unsigned seed = 1;
    for (int streaming = 0; streaming < 2; streaming++) {
        copy_fn = streaming ? us_hostcopy_to_staging : us_hostcopy;
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            check_copy(sizes[i], 0, 0, seed++);
            check_copy(sizes[i], 1, 3, seed++); /* both unaligned, differently */
            check_copy(sizes[i], 4093, 17, seed++);
            check_copy(sizes[i], 5, 16, seed++); /* the destination 16-byte aligned, the source not */
        }
    }
    copy_fn = us_hostcopy;
}

/* Into memory never touched (a D2H into a fresh tensor), private or shared,
 * with its first page mapped by a read or not: the copied bytes land, every
 * other byte of the mapping stays zero. */
static void check_fresh(int flags, bool touch_first_page)
{
    const size_t map = 8u << 20, doff = 4096 + 123, n = (5u << 20) + 77;
    unsigned char *dst = mmap(NULL, map, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);
    assert_true(dst != MAP_FAILED);
    unsigned char *src = malloc(n), *ref = calloc(1, map);
    assert_non_null(src);
    assert_non_null(ref);
    fill(src, n, 99);
    memcpy(ref + doff, src, n);
    if (touch_first_page)
        assert_int_equal(dst[doff & ~(size_t)4095], 0); /* a read maps the zero page: still not written */
    us_hostcopy(dst + doff, src, n);
    assert_memory_equal(dst, ref, map);
    munmap(dst, map);
    free(src);
    free(ref);
}

static void fresh_destinations(void)
{
    check_fresh(MAP_PRIVATE, false);
    check_fresh(MAP_PRIVATE, true);
    check_fresh(MAP_SHARED, false);
}

static void test_hostcopy_fresh_destination(void **state)
{
    (void)state;
    set_threads(1, 4096);
    fresh_destinations();
    set_threads(4, 4096);
    fresh_destinations();
}

static void test_hostcopy_one_thread(void **state)
{
    (void)state;
    set_threads(1, 4096);
    all_sizes();
}

static void test_hostcopy_pool(void **state)
{
    (void)state;
    set_threads(4, 4096);
    all_sizes();
    assert_int_equal(us_hostcopy_workers(), 3); /* copy_threads counts the caller */
}

/* copy_threads=0, the default: the CPUs less two, 8 at least, 16 at most
 * (the pool counts the caller). The arithmetic at the edges, then a copy
 * with the default is byte-exact and shares the work: the pool has at least
 * the 7 workers of the floor. */
static void test_hostcopy_default_threads_follow_the_cpus(void **state)
{
    (void)state;
    assert_int_equal(defaults.copy_threads, 0);
    assert_int_equal(us_hostcopy_auto_threads(1), 8);
    assert_int_equal(us_hostcopy_auto_threads(2), 8);
    assert_int_equal(us_hostcopy_auto_threads(10), 8);
    assert_int_equal(us_hostcopy_auto_threads(11), 9);
    assert_int_equal(us_hostcopy_auto_threads(16), 14);
    assert_int_equal(us_hostcopy_auto_threads(18), 16);
    assert_int_equal(us_hostcopy_auto_threads(256), 16);
    set_threads(0, 4096);
    check_copy((8u << 20) + 3, 1, 2, 77);
    assert_true(us_hostcopy_workers() >= 7);
}

/* The segments' callback, recording the order it was called in and
 * checking that each segment's bytes are all in when it is. */
struct handed {
    const struct us_hostcopy_segment *seg;
    unsigned order[US_HOSTCOPY_MAX_SEGMENTS + 8];
    unsigned calls, stop_after;
    bool bytes_in;
};

static bool note_segment(void *arg, unsigned k)
{
    struct handed *h = arg;
    h->order[h->calls++] = k;
    if (memcmp(h->seg[k].dst, h->seg[k].src, h->seg[k].bytes) != 0)
        h->bytes_in = false;
    return h->calls != h->stop_after;
}

/* nsegs segments of varied sizes (one empty, one fresh) out of one source
 * into one destination, gaps between them left alone. */
static void check_segments(unsigned nsegs, unsigned stop_after)
{
    size_t total = 0, sizes[US_HOSTCOPY_MAX_SEGMENTS + 8];
    for (unsigned k = 0; k < nsegs; k++) {
        sizes[k] = k == 2 ? 0 : (size_t)((k * 7919u) % 5u + 1) * (300u << 10) + k;
        total += sizes[k] + 64;
    }
    unsigned char *src = malloc(total), *dst = malloc(total);
    assert_non_null(src);
    assert_non_null(dst);
    fill(src, total, nsegs);
    memset(dst, 0xa5, total);
    struct us_hostcopy_segment seg[US_HOSTCOPY_MAX_SEGMENTS + 8];
    size_t at = 0;
    for (unsigned k = 0; k < nsegs; k++) {
        seg[k] = (struct us_hostcopy_segment){.dst = dst + at, .src = src + at, .bytes = sizes[k], .fresh = k == 3};
        at += sizes[k] + 64;
    }
    struct handed h = {.seg = seg, .stop_after = stop_after, .bytes_in = true};
    bool all = us_hostcopy_segments_to_staging(seg, nsegs, note_segment, &h);
    unsigned want = stop_after != 0 && stop_after < nsegs ? stop_after : nsegs;
    assert_int_equal(h.calls, want);
    assert_int_equal(all, want == nsegs && stop_after != nsegs);
    for (unsigned k = 0; k < h.calls; k++)
        assert_int_equal(h.order[k], k); /* in order, once each */
    assert_true(h.bytes_in);
    at = 0;
    for (unsigned k = 0; k < nsegs; k++) { /* every segment handed over is copied; the gaps untouched */
        if (k < want)
            assert_memory_equal(dst + at, src + at, sizes[k]);
        for (size_t g = 0; g < 64; g++)
            assert_int_equal(dst[at + sizes[k] + g], 0xa5);
        at += sizes[k] + 64;
    }
    free(src);
    free(dst);
}

/* us_hostcopy_segments_to_staging: every segment's bytes, each handed over
 * in order once they are all in, with the pool, on one thread, past the
 * most segments the pool takes, and when the callback says stop. */
static void test_hostcopy_segments_handed_over_in_order(void **state)
{
    (void)state;
    set_threads(4, 4096);
    check_segments(9, 0);
    check_segments(65, 0);
    check_segments(US_HOSTCOPY_MAX_SEGMENTS + 3, 0); /* the caller alone */
    check_segments(9, 4);                            /* stopped after the fourth */
    check_segments(9, 9);                            /* the last said stop */
    set_threads(1, 4096);
    check_segments(9, 0);
    check_segments(9, 4);
}

static void test_hostcopy_below_min_stays_on_caller(void **state)
{
    (void)state;
    set_threads(8, 1u << 30); /* every size below: plain memcpy */
    unsigned before = us_hostcopy_workers();
    check_copy(64u << 20, 5, 9, 99);
    assert_int_equal(us_hostcopy_workers(), before);
}

static void test_hostcopy_many_threads(void **state)
{
    (void)state;
    set_threads(64, 4096); /* the most the option allows */
    check_copy((96u << 20) + 1, 3, 0, 5);
    check_copy((1u << 20) - 1, 0, 0, 6);
    assert_true(us_hostcopy_workers() <= 63);
}

/* --- several callers at once ------------------------------------------------------- */

struct caller {
    unsigned id;
    int failures;
};

static void *caller_main(void *arg)
{
    struct caller *c = arg;
    for (unsigned round = 0; round < 12; round++) {
        size_t n = (size_t)((c->id * 7919u + round * 104729u) % (9u << 20)) + 1;
        size_t off = (c->id + round) % 13;
        unsigned char *src = malloc(n + off), *dst = malloc(n + off + 8);
        if (src == NULL || dst == NULL) {
            c->failures++;
            free(src);
            free(dst);
            continue;
        }
        fill(src, n + off, c->id * 100 + round);
        memset(dst, 0xEE, n + off + 8);
        us_hostcopy(dst + off, src + off, n);
        if (memcmp(dst + off, src + off, n) != 0 || dst[off + n] != 0xEE || (off > 0 && dst[off - 1] != 0xEE))
            c->failures++;
        free(src);
        free(dst);
    }
    return NULL;
}

static void test_hostcopy_concurrent_callers(void **state)
{
    (void)state;
    set_threads(4, 64u << 10);
    enum { N = 8 };
    pthread_t t[N];
    struct caller c[N];
    for (unsigned i = 0; i < N; i++) {
        c[i] = (struct caller){.id = i + 1};
        assert_int_equal(pthread_create(&t[i], NULL, caller_main, &c[i]), 0);
    }
    for (unsigned i = 0; i < N; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(c[i].failures, 0);
    }
}

/* --- workers between jobs --------------------------------------------------------------- */

static void pause_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A source of src_bytes filled from `seed` and a zeroed destination of
 * dst_bytes, for the tests of the workers. */
static void copy_buffers(size_t src_bytes, size_t dst_bytes, unsigned seed, unsigned char **src, unsigned char **dst)
{
    *src = malloc(src_bytes);
    *dst = malloc(dst_bytes);
    assert_non_null(*src);
    assert_non_null(*dst);
    fill(*src, src_bytes, seed);
    memset(*dst, 0, dst_bytes);
}

/* Copies that follow each other keep the workers spinning between them
 * (hostcopy.c's HC_WORKER_SPIN_NS), and every byte still lands: forty 1 MiB
 * copies back to back, checked after the last. */
static void test_hostcopy_workers_spin_between_back_to_back_copies(void **state)
{
    (void)state;
    set_threads(4, 64u << 10);
    enum { N = 40 };
    const size_t n = 1u << 20;
    unsigned char *src, *dst;
    copy_buffers(n, N * n, 1000, &src, &dst);
    unsigned before = us_hostcopy_worker_spins();
    for (unsigned i = 0; i < N; i++) /* nothing between them: back to back */
        us_hostcopy(dst + i * n, src, n);
    assert_true(us_hostcopy_worker_spins() > before);
    for (unsigned i = 0; i < N; i++)
        assert_memory_equal(dst + i * n, src, n);
    free(src);
    free(dst);
}

/* A copy that comes long after the last one ended leaves the workers asleep
 * after it: no spin for copies milliseconds apart. */
static void test_hostcopy_workers_sleep_after_lone_copies(void **state)
{
    (void)state;
    set_threads(4, 64u << 10);
    const size_t n = 1u << 20;
    unsigned char *src, *dst;
    copy_buffers(n, n, 77, &src, &dst);
    pause_ms(20); /* any earlier test's spin is over */
    unsigned before = us_hostcopy_worker_spins();
    for (int i = 0; i < 3; i++) {
        us_hostcopy(dst, src, n);
        pause_ms(20);
    }
    assert_int_equal(us_hostcopy_worker_spins(), before);
    assert_memory_equal(dst, src, n);
    free(src);
    free(dst);
}

/* A copy announced ahead (us_hostcopy_expect, a D2H before its first
 * chunk's DMA) wakes the sleeping workers to spin for it; one the pool would
 * not share wakes nobody. Every byte of the copy that follows lands. */
static void test_hostcopy_announced_copy_wakes_the_workers(void **state)
{
    (void)state;
    set_threads(4, 1u << 20);
    const size_t n = 1u << 20;
    unsigned char *src, *dst;
    copy_buffers(n, n, 55, &src, &dst);
    us_hostcopy_start();
    pause_ms(20); /* any earlier spin is over: every worker sleeps */
    unsigned before = us_hostcopy_worker_spins();
    us_hostcopy_expect(n / 2); /* below copy_thread_min: a copy on the caller alone */
    pause_ms(20);
    assert_int_equal(us_hostcopy_worker_spins(), before);
    us_hostcopy_expect(n);
    unsigned workers = us_hostcopy_workers(); /* three, or more that earlier tests started */
    for (int i = 0; i < 1000 && us_hostcopy_worker_spins() < before + workers; i++)
        pause_ms(1);
    pause_ms(5);
    assert_int_equal(us_hostcopy_worker_spins(), before + workers); /* each worker, once */
    us_hostcopy(dst, src, n);
    assert_memory_equal(dst, src, n);
    free(src);
    free(dst);
}

/* --- fork ---------------------------------------------------------------------------- */

/* In a forked child: 16 MiB + 3 copied under an alarm of `alarm_s` (a hang
 * ends by the signal); exits 0 when the bytes are right. */
static _Noreturn void child_copy(unsigned alarm_s, unsigned seed)
{
    alarm(alarm_s);
    size_t n = (16u << 20) + 3;
    unsigned char *src = malloc(n), *dst = malloc(n);
    if (src == NULL || dst == NULL)
        _exit(2);
    fill(src, n, seed);
    us_hostcopy(dst, src, n);
    _exit(memcmp(src, dst, n) == 0 ? 0 : 1);
}

static void test_hostcopy_after_fork(void **state)
{
    (void)state;
    set_threads(4, 4096);
    check_copy(8u << 20, 0, 0, 11); /* the pool runs in the parent */
    assert_true(us_hostcopy_workers() > 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) /* no worker exists here: a pool copy would hang; it must finish alone */
        child_copy(20, 3);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    check_copy(8u << 20, 1, 2, 12); /* and the parent's pool still works */
}

/* Copies on the pool, back to back, until told to stop: its workers take
 * and drop the pool's lock all the while. */
static atomic_bool busy_stop;

static void *busy_copies(void *arg)
{
    (void)arg;
    size_t n = 4u << 20;
    unsigned char *src = malloc(n), *dst = malloc(n);
    if (src == NULL || dst == NULL)
        abort();
    memset(src, 7, n);
    while (!atomic_load(&busy_stop))
        us_hostcopy(dst, src, n);
    free(src);
    free(dst);
    return NULL;
}

/* Forks while other threads copy on the pool: a child inherits the pool's
 * lock in whatever state it was (held by a worker that does not exist in
 * the child), so a child's copy must not touch the pool at all. Forty
 * forks, each child copying 16 MiB under a 5 s alarm: with the pool's lock
 * taken in the child, some of them hang. */
static void test_hostcopy_fork_while_the_pool_copies(void **state)
{
    (void)state;
    set_threads(4, 4096);
    atomic_store(&busy_stop, false);
    pthread_t busy;
    assert_int_equal(pthread_create(&busy, NULL, busy_copies, NULL), 0);
    int hung = 0, wrong = 0;
    for (int i = 0; i < 40; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            child_copy(5, 5);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status))
            hung++;
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            wrong++;
    }
    atomic_store(&busy_stop, true);
    assert_int_equal(pthread_join(busy, NULL), 0);
    assert_int_equal(hung, 0);
    assert_int_equal(wrong, 0);
}

/* The huge-page advice before a D2H's host copy: a new mapping of 16 MiB,
 * the destination 12 MiB at an unaligned offset. */
#define ADV_MAP (16u << 20)
#define ADV_OFF (4096u + 123u)
#define ADV_BYTES (12u << 20)

static unsigned char *new_mapping(void)
{
    unsigned char *p = mmap(NULL, ADV_MAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    return p;
}

/* the first 2 MiB boundary inside the destination: where the advice starts */
static unsigned char *interior(unsigned char *map)
{
    return (unsigned char *)(((uintptr_t)(map + ADV_OFF) + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
}

static void set_hugepages(size_t min_bytes)
{
    struct us_config cfg = defaults;
    cfg.d2h_hugepages = min_bytes;
    us_config_set(&cfg);
}

/* A new destination is advised (where the kernel would act on it), and the
 * host copy then lands every byte, the rest of the mapping still zero. */
static void test_hostcopy_advises_a_new_destination(void **state)
{
    (void)state;
    set_hugepages(4u << 20);
    unsigned char *map = new_mapping();
    bool works = thp_advice_works();
    assert_int_equal(us_hostcopy_advise_fresh(map + ADV_OFF, ADV_BYTES), works);
    assert_int_equal(thp_advised_at(interior(map)), works ? 1 : 0);
    assert_int_equal(thp_advised_at(map), 0); /* the unaligned head stays as it was */
    unsigned char *src = malloc(ADV_BYTES), *ref = calloc(1, ADV_MAP);
    assert_non_null(src);
    assert_non_null(ref);
    fill(src, ADV_BYTES, 5);
    memcpy(ref + ADV_OFF, src, ADV_BYTES);
    us_hostcopy(map + ADV_OFF, src, ADV_BYTES);
    assert_memory_equal(map, ref, ADV_MAP);
    munmap(map, ADV_MAP);
    free(src);
    free(ref);
}

/* Memory the program already wrote, a copy below the option, the option 0,
 * and a destination with no whole 2 MiB page inside: nothing is advised. */
static void test_hostcopy_leaves_used_or_small_destinations(void **state)
{
    (void)state;
    set_hugepages(4u << 20);
    unsigned char *map = new_mapping();
    interior(map)[0] = 1; /* its first whole huge page is mapped: the buffer is in use */
    assert_false(us_hostcopy_advise_fresh(map + ADV_OFF, ADV_BYTES));
    assert_int_equal(thp_advised_at(interior(map)), 0);
    munmap(map, ADV_MAP);

    map = new_mapping();
    assert_false(us_hostcopy_advise_fresh(map + ADV_OFF, (4u << 20) - 1)); /* below d2h_hugepages */
    set_hugepages(0);
    assert_false(us_hostcopy_advise_fresh(map + ADV_OFF, ADV_BYTES)); /* 0: never */
    set_hugepages(4u << 20);
    assert_int_equal(prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0), 0); /* the program turned THP off for itself */
    assert_false(us_hostcopy_advise_fresh(map + ADV_OFF, ADV_BYTES));
    assert_int_equal(prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0), 0);
    set_hugepages(64u << 10);
    unsigned char *unaligned = interior(map) + 1; /* 3 MiB from just past a boundary holds no whole 2 MiB page */
    assert_false(us_hostcopy_advise_fresh(unaligned, 3u << 20));
    assert_int_equal(thp_advised_at(interior(map)), 0);
    munmap(map, ADV_MAP);
}

int main(void)
{
    unsetenv("UNSTALL_COPY_THREADS");
    unsetenv("UNSTALL_COPY_THREAD_MIN");
    unsetenv("UNSTALL_D2H_HUGEPAGES");
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_hostcopy_one_thread),
        T(test_hostcopy_pool),
        T(test_hostcopy_fresh_destination),
        T(test_hostcopy_below_min_stays_on_caller),
        T(test_hostcopy_many_threads),
        T(test_hostcopy_default_threads_follow_the_cpus),
        T(test_hostcopy_segments_handed_over_in_order),
        T(test_hostcopy_concurrent_callers),
        T(test_hostcopy_workers_spin_between_back_to_back_copies),
        T(test_hostcopy_workers_sleep_after_lone_copies),
        T(test_hostcopy_announced_copy_wakes_the_workers),
        T(test_hostcopy_after_fork),
        T(test_hostcopy_fork_while_the_pool_copies),
        T(test_hostcopy_advises_a_new_destination),
        T(test_hostcopy_leaves_used_or_small_destinations),
    };
#undef T
    return US_RUN_TESTS("test_hostcopy", tests, NULL, NULL);
}
