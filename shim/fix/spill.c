/* spill.c - see spill.h.
 *
 * One region of spill_max bytes of address space is reserved once
 * (MAP_NORESERVE: no memory until written), on a 2 MiB boundary, before
 * the first spill where it can be (us_spill_reserve, after the program's
 * first device allocation): mapping it at a spill waited 1.0-1.4 ms on an
 * H100 host behind the grower thread's page population, which holds the
 * process's memory map (mmap_lock) for reading. Buffers are carved from it
 * in 2 MiB multiples; a buffer given back is kept and reused first (its
 * pages are in); when the region is used up and no buffer is taken, the
 * carving starts over, over the pages already in. The region's first
 * warm_pinned bytes are faulted in when it is reserved: a process's first
 * spill into new memory ran at 5.6 GB/s on an H100 host (its huge pages
 * zeroed, and compacted where none were free), against about 30 GB/s into
 * memory already in. From the program's first device allocation a
 * background thread faults in more of it, up to spill_warm
 * (us_spill_warm_start): started at the first pageable H2D instead, a
 * process's first 64 MiB H2D behind a kernel spilled into new memory and
 * held its caller 2.7-3.6 ms on an H200 host, against 1.2-1.3 ms for the
 * next ones (tools/bench/probe.sh's steps, case B's freed test). */
#include "spill.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "grower.h"
#include "lifecycle.h"
#include "log.h"
#include "prefault.h"
#include "thread.h"

#define SPILL_ROUND ((size_t)2 << 20)

struct us_spill {
    struct us_spill *next; /* in the kept list */
    char *memory;
    size_t bytes;
    bool fresh;            /* some of its pages are not in yet */
};

static struct {
    pthread_mutex_t mu;
    char *base;            /* the region, on a 2 MiB boundary; NULL: not reserved */
    size_t size, carved;   /* its bytes, and how far buffers were carved from it */
    size_t touched;        /* how far its pages are in: warmed, or carved before (written by then) */
    bool reserve_failed;
    struct us_spill *kept; /* given back, pages in: reused first */
    size_t taken;          /* bytes of the buffers taken and not given back */
} spills = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int logged_budget, logged_map;

/* Under spills.mu: the region, reserved now if it is not. */
static bool reserve_locked(void)
{
    if (spills.base != NULL)
        return true;
    if (spills.reserve_failed)
        return false;
    size_t max = us_config()->spill_max / SPILL_ROUND * SPILL_ROUND;
    if (max == 0)
        return false;
    char *base = us_map_on_boundary(max, SPILL_ROUND, MAP_NORESERVE); /* exactly [base, base + max) */
    if (base == NULL) {
        spills.reserve_failed = true;
        us_log_once(&logged_map, US_LOG_WARN,
                    "could not reserve %zu bytes of address space for spills: a pageable H2D behind queued work "
                    "that its pinned slots cannot hold waits for them",
                    max);
        return false;
    }
    (void)madvise(base, max, MADV_HUGEPAGE);
    (void)madvise(base, max, MADV_DONTFORK); /* a forked child shares none of it */
    spills.base = base;
    spills.size = max;
    return true;
}

void us_spill_reserve(size_t warm_bytes)
{
    pthread_mutex_lock(&spills.mu);
    bool reserved = reserve_locked();
    char *base = spills.base;
    size_t size = spills.size;
    pthread_mutex_unlock(&spills.mu);
    warm_bytes = (warm_bytes + SPILL_ROUND - 1) / SPILL_ROUND * SPILL_ROUND;
    if (!reserved || warm_bytes == 0)
        return;
    if (warm_bytes > size)
        warm_bytes = size;
    (void)us_prefault_range(base, warm_bytes, true);
    pthread_mutex_lock(&spills.mu);
    if (spills.touched < warm_bytes)
        spills.touched = warm_bytes;
    pthread_mutex_unlock(&spills.mu);
}

/* The background warming (us_spill_warm_start): started once; the tests'
 * reset stops it and waits for it. */
static atomic_bool warm_started, warm_stop, warm_running;

/* Faults the region in up to spill_warm, 2 MiB at a time, each step a
 * populate of its own: the process's memory map is held (for reading) one
 * huge page's zeroing at a time, so that an mmap of the program's waits for
 * one step, not for the whole warming. A step waits while a pageable H2D
 * is being issued or has just ended (us_grower_wait_quiet, as the grower's allocations
 * do), so that the copy has the memory's bandwidth and the CPUs to itself.
 * At the lowest priority (nice 19),
 * not SCHED_IDLE: a thread that may not run while it holds the memory map
 * would hold up the program's mmap for as long. Pages a spill wrote meanwhile are
 * skipped (touched); a populate of a page already in changes nothing. */
static void *warm_main(void *arg)
{
    (void)arg;
    /* the program's threads first: on a busy machine it takes what they leave */
    (void)setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
    pthread_mutex_lock(&spills.mu);
    bool reserved = reserve_locked();
    char *base = spills.base;
    size_t size = spills.size;
    pthread_mutex_unlock(&spills.mu);
    size_t target = (us_config()->spill_warm + SPILL_ROUND - 1) / SPILL_ROUND * SPILL_ROUND;
    if (target > size)
        target = size;
    for (size_t at = 0; reserved && at < target && !atomic_load(&warm_stop);) {
        pthread_mutex_lock(&spills.mu);
        if (at < spills.touched)
            at = spills.touched;
        pthread_mutex_unlock(&spills.mu);
        if (at >= target)
            break;
        us_grower_wait_quiet(); /* a copy being issued now spills, or copies, without it beside */
        (void)us_prefault_range(base + at, SPILL_ROUND, true);
        at += SPILL_ROUND;
        pthread_mutex_lock(&spills.mu);
        if (spills.touched < at)
            spills.touched = at;
        pthread_mutex_unlock(&spills.mu);
    }
    atomic_store(&warm_running, false);
    return NULL;
}

void us_spill_warm_start(void)
{
    if (atomic_load_explicit(&warm_started, memory_order_relaxed) || atomic_exchange(&warm_started, true))
        return;
    const struct us_config *cfg = us_config();
    if (cfg->spill_warm == 0 || cfg->spill_max == 0 || atomic_load(&us_lifecycle_in_forked_child))
        return;
    us_lifecycle_watch_forks(); /* a child does not have the thread */
    atomic_store(&warm_running, true);
    if (us_thread_start(warm_main, NULL, 64u << 10, "unstall-spill") != 0)
        atomic_store(&warm_running, false); /* the first spills pay their page faults, as without it */
}

bool us_spill_warming(void)
{
    return atomic_load(&warm_running);
}

/* Under spills.mu: the smallest kept buffer of at least `bytes`, out of the list. */
static struct us_spill *reuse_locked(size_t bytes)
{
    struct us_spill **best = NULL;
    for (struct us_spill **at = &spills.kept; *at != NULL; at = &(*at)->next)
        if ((*at)->bytes >= bytes && (best == NULL || (*at)->bytes < (*best)->bytes))
            best = at;
    if (best == NULL)
        return NULL;
    struct us_spill *s = *best;
    *best = s->next;
    return s;
}

/* Under spills.mu: a new buffer carved from the region; with no room left
 * and nothing taken, the kept buffers are forgotten and carving starts over. */
static struct us_spill *carve_locked(size_t bytes)
{
    if (bytes > spills.size - spills.carved) {
        if (spills.taken > 0 || bytes > spills.size)
            return NULL;
        while (spills.kept != NULL) {
            struct us_spill *s = spills.kept;
            spills.kept = s->next;
            free(s);
        }
        spills.carved = 0;
    }
    struct us_spill *s = malloc(sizeof *s);
    if (s == NULL)
        return NULL;
    *s = (struct us_spill){.memory = spills.base + spills.carved, .bytes = bytes,
                           .fresh = spills.carved + bytes > spills.touched};
    spills.carved += bytes;
    if (spills.touched < spills.carved)
        spills.touched = spills.carved;
    return s;
}

bool us_spill_take(size_t bytes, struct us_spill **out)
{
    if (bytes == 0 || bytes > SIZE_MAX - SPILL_ROUND)
        return false;
    bytes = (bytes + SPILL_ROUND - 1) / SPILL_ROUND * SPILL_ROUND;
    pthread_mutex_lock(&spills.mu);
    struct us_spill *s = NULL;
    if (reserve_locked() && (s = reuse_locked(bytes)) == NULL)
        s = carve_locked(bytes);
    if (s != NULL) {
        spills.taken += s->bytes;
    }
    pthread_mutex_unlock(&spills.mu);
    if (s == NULL) {
        us_log_once(&logged_budget, US_LOG_INFO,
                    "spill_max (%zu bytes) reached: a pageable H2D behind queued work that its pinned slots cannot "
                    "hold waits for them (reported held)",
                    us_config()->spill_max);
        return false;
    }
    *out = s;
    return true;
}

char *us_spill_memory(const struct us_spill *spill)
{
    return spill->memory;
}

bool us_spill_fresh(const struct us_spill *spill)
{
    return spill->fresh;
}

void us_spill_give(struct us_spill *spill)
{
    pthread_mutex_lock(&spills.mu);
    spills.taken -= spill->bytes;
    spill->fresh = false; /* written by its copy */
    spill->next = spills.kept;
    spills.kept = spill;
    pthread_mutex_unlock(&spills.mu);
}

static size_t read_locked(const size_t *counter)
{
    pthread_mutex_lock(&spills.mu);
    size_t bytes = *counter;
    pthread_mutex_unlock(&spills.mu);
    return bytes;
}

size_t us_spill_carved_bytes(void)
{
    return read_locked(&spills.carved);
}

size_t us_spill_taken_bytes(void)
{
    return read_locked(&spills.taken);
}

size_t us_spill_touched_bytes(void)
{
    return read_locked(&spills.touched);
}

void us_spill_reset(void)
{
    atomic_store(&warm_stop, true);
    while (atomic_load(&warm_running)) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    atomic_store(&warm_stop, false);
    atomic_store(&warm_started, false);
    pthread_mutex_lock(&spills.mu);
    while (spills.kept != NULL) {
        struct us_spill *s = spills.kept;
        spills.kept = s->next;
        free(s);
    }
    if (spills.base != NULL)
        munmap(spills.base, spills.size);
    spills.base = NULL;
    spills.size = spills.carved = spills.taken = spills.touched = 0;
    spills.reserve_failed = false;
    logged_budget = logged_map = 0;
    pthread_mutex_unlock(&spills.mu);
}
