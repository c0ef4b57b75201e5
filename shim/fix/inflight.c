/* inflight.c - see inflight.h.
 *
 * A fixed table of entries, each free (state 0), being written (1) or
 * active (2), with a generation bumped at every end. A release makes its
 * range unknown to the pointer table first, then (after a full fence) scans
 * the entries; a pipeline registers, then (after a full fence) goes on. So
 * either the release sees the registration and waits, or the registration
 * came after the release's scan, when classification had already been made
 * with the range known: that window (a release racing a copy's start, a
 * program error natively too) is not covered. */
#include "inflight.h"
#include "hot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

struct entry {
    atomic_uint state;
    atomic_uint_least64_t gen;
    /* atomics only so that a scan racing a reuse reads no torn value; the
     * generation tells whether what it read belongs to the same copy */
    atomic_uintptr_t lo[2], hi[2];
    atomic_uint n;
};

static struct entry table[US_INFLIGHT_MAX];
static atomic_uint used_max; /* entries ever used: the scan's bound */

US_HOT bool us_inflight_begin(const uintptr_t *base, const size_t *bytes, unsigned n, unsigned *token)
{
    /* start where this thread's id points: threads rarely collide */
    unsigned start = (unsigned)((uintptr_t)pthread_self() >> 6) % US_INFLIGHT_MAX;
    for (unsigned k = 0; k < US_INFLIGHT_MAX; k++) {
        unsigned i = (start + k) % US_INFLIGHT_MAX;
        unsigned expected = 0;
        if (!atomic_compare_exchange_strong(&table[i].state, &expected, 1))
            continue;
        struct entry *e = &table[i];
        unsigned m = 0;
        for (unsigned r = 0; r < n && r < 2; r++)
            if (bytes[r] > 0) {
                atomic_store_explicit(&e->lo[m], base[r], memory_order_relaxed);
                atomic_store_explicit(&e->hi[m], base[r] + bytes[r], memory_order_relaxed);
                m++;
            }
        atomic_store_explicit(&e->n, m, memory_order_relaxed);
        unsigned seen = atomic_load(&used_max);
        while (seen < i + 1 && !atomic_compare_exchange_weak(&used_max, &seen, i + 1))
            ;
        atomic_store(&e->state, 2); /* seq_cst: ordered before the copy's first chunk */
        atomic_thread_fence(memory_order_seq_cst);
        *token = i;
        return true;
    }
    return false;
}

US_HOT void us_inflight_end(unsigned token)
{
    struct entry *e = &table[token];
    atomic_fetch_add(&e->gen, 1);
    atomic_store(&e->state, 0);
}

static bool overlaps(struct entry *e, uintptr_t lo, uintptr_t hi)
{
    unsigned n = atomic_load_explicit(&e->n, memory_order_relaxed);
    for (unsigned r = 0; r < n && r < 2; r++)
        if (atomic_load_explicit(&e->lo[r], memory_order_relaxed) < hi &&
            lo < atomic_load_explicit(&e->hi[r], memory_order_relaxed))
            return true;
    return false;
}

static void pause_briefly(void)
{
    struct timespec ts = {0, 50000}; /* 50 us: a chunk takes longer */
    nanosleep(&ts, NULL);
}

void us_inflight_wait(uintptr_t base, size_t bytes)
{
    uintptr_t lo = base, hi = base + (bytes > 0 ? bytes : 1);
    atomic_thread_fence(memory_order_seq_cst); /* after the range left the pointer table */
    unsigned n = atomic_load(&used_max);
    for (unsigned i = 0; i < n; i++) {
        struct entry *e = &table[i];
        uint_least64_t gen = atomic_load(&e->gen);
        unsigned state;
        while ((state = atomic_load(&e->state)) == 1 && atomic_load(&e->gen) == gen)
            pause_briefly(); /* being written: its ranges are not readable yet */
        if (state != 2 || !overlaps(e, lo, hi) || atomic_load(&e->gen) != gen)
            continue; /* free, another range, or that copy ended while we read */
        while (atomic_load(&e->state) != 0 && atomic_load(&e->gen) == gen)
            pause_briefly();
    }
}
