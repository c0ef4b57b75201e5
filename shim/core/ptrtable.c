/* ptrtable.c - see ptrtable.h.
 *
 * Layout. Two levels, each a hash of granules split over 64 shards by granule
 * number (granule & 63), each shard a uthash table under its own
 * reader-writer lock. A granule's node holds copies of the ranges that
 * overlap it, sorted by base:
 *   - fine level, 2 MiB granules (addr >> 21): every range of at most
 *     4 GiB (2048 granules), i.e. nearly all of them;
 *   - coarse level, 1 GiB granules (addr >> 30): larger ranges (whole-GPU
 *     allocations, big host registrations), so that a 512 GiB registration
 *     costs 512 entries, not 262144. Ranges of more than 64 TiB are not
 *     stored: no machine pins that much memory, such a size is bogus, and an
 *     address the table does not know is classified by the runtime (slower,
 *     still correct).
 * A lookup takes one shard read lock on the fine level and, only when that
 * misses and addr lies within the bounds of the coarse ranges, one more on
 * the coarse level. No allocation, no global lock. Measured (PTRTABLE_BENCH=1
 * in tests/unit/test_ptrtable.c), 10k ranges, random addresses, one thread:
 * about 35 ns a hit and 20-30 ns a miss on a Zen 5 core; about half of it is
 * the read lock's two atomic operations.
 *
 * Ranges never overlap: an insert evicts every stored range it overlaps (the
 * header's "same base is replaced" is the common case). A new allocation over
 * an old range proves the old one was released behind our back (a free we
 * did not see), and with no overlaps the range holding addr in a granule is
 * simply the one with the greatest base <= addr: a binary search, however
 * many small allocations share the granule.
 *
 * Writers (insert, remove, clear) are serialised by one mutex and keep a
 * writer-only index by base (remove finds the size there). Under it they
 * take one shard write lock at a time, so readers of other shards never
 * wait and readers of the same shard wait only for one granule's update.
 * While a multi-granule range is being added or removed a lookup may see it
 * in some granules and not others; a lookup racing with the allocation or
 * release of the very range it looks at has no right answer anyway. Ranges
 * that do not change are found at every instant.
 *
 * Shard locks prefer writers (glibc's PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP)
 * so a stream of lookups cannot starve an insert. Lookups never nest locks.
 *
 * Fork. The table records (in a constructor) the pid that owns its locks.
 * us_ptrtable_clear in a forked child (getpid() differs) may find a lock
 * held by a thread that does not exist there: it takes no lock,
 * re-initialises them all, and frees the old nodes only if no writer was in
 * the middle of a change at fork time (the writer mutex is free); otherwise
 * it abandons them (a bounded leak in a child that is about to exec). In the
 * owning process clear takes the locks like any writer. */
#include "ptrtable.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Keys are 64-bit granule numbers and bases: a multiplicative hash beats
 * uthash's byte-wise Jenkins hash on the lookup path. */
static inline unsigned ptrtable_hash(const void *key)
{
    uint64_t v;
    memcpy(&v, key, sizeof v);
    v *= 0x9e3779b97f4a7c15ull;
    return (unsigned)(v >> 32);
}
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = ptrtable_hash(keyptr))
#define HASH_NONFATAL_OOM 1 /* an add that cannot allocate fails: hh.tbl == NULL */
#include <uthash.h>
/* uthash doubles its buckets only when one chain reaches 10 entries, so a
 * table runs at 3-5 entries per bucket and a lookup walks a chain, one cache
 * miss per node. Expanding at 2 keeps chains at about one node: 10k ranges,
 * random lookups, 62 -> 36 ns per hit, for about 26 bytes of buckets per
 * granule. The macro is read where the uthash macros expand, below. */
#undef HASH_BKT_CAPACITY_THRESH
#define HASH_BKT_CAPACITY_THRESH 2U

#define PT_SHARDS 64u /* power of two */
#define PT_FINE_SHIFT 21u
#define PT_COARSE_SHIFT 30u
#define PT_FINE_MAX_GRANULES 2048u       /* 4 GiB */
#define PT_COARSE_MAX_GRANULES 65536u    /* 64 TiB */

enum pt_level { PT_FINE, PT_COARSE, PT_LEVELS, PT_NONE = PT_LEVELS };

/* One granule: the ranges overlapping it, sorted by base. The first range
 * lives in the node itself (most granules hold one). A node is allocated as
 * two aligned cache lines: the hash handle and key, then the ranges. */
struct pt_granule {
    UT_hash_handle hh;
    uint64_t key;
    uint32_t count;
    uint32_t cap;
    struct us_range *ranges; /* == &one while cap == 1 */
    struct us_range one;
};
#define PT_GRANULE_ALLOC 128u
_Static_assert(sizeof(struct pt_granule) <= PT_GRANULE_ALLOC, "a granule node fits two cache lines");

struct pt_shard {
    _Alignas(64) pthread_rwlock_t lock;
    struct pt_granule *granules;
};

struct pt_level_table {
    unsigned shift;
    struct pt_shard shards[PT_SHARDS];
};

/* Writer-only index of every stored range by base. */
struct pt_entry {
    struct us_range range;
    UT_hash_handle hh;
};

#define PT_SHARD_INIT { .lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP, .granules = NULL }

static struct pt_level_table pt_levels[PT_LEVELS] = {
    [PT_FINE] = { .shift = PT_FINE_SHIFT, .shards = { [0 ... PT_SHARDS - 1] = PT_SHARD_INIT } },
    [PT_COARSE] = { .shift = PT_COARSE_SHIFT, .shards = { [0 ... PT_SHARDS - 1] = PT_SHARD_INIT } },
};
static pthread_mutex_t pt_writer = PTHREAD_MUTEX_INITIALIZER;
static struct pt_entry *pt_by_base; /* under pt_writer */
/* The coarse level: how many ranges (under pt_writer), and bounds that
 * contain them all, read without lock by lookups to skip the coarse probe.
 * Bounds only widen while the level holds a range (they are widened before
 * the range is entered), and reset when it empties. */
static size_t pt_coarse_count;
static _Atomic uintptr_t pt_coarse_lo = UINTPTR_MAX;
static _Atomic uintptr_t pt_coarse_hi = 0;
static pid_t pt_owner_pid;

__attribute__((constructor)) static void ptrtable_record_owner(void)
{
    pt_owner_pid = getpid();
}

/* --- ranges -------------------------------------------------------------------- */

static inline uintptr_t range_last(const struct us_range *r)
{
    return r->base + (r->size - 1);
}

/* Which level stores [base, base+size): PT_NONE for an empty range, one that
 * wraps past the end of the address space, or one over the size cap. */
static enum pt_level level_for(uintptr_t base, size_t size)
{
    if (size == 0 || size - 1 > UINTPTR_MAX - base)
        return PT_NONE;
    uintptr_t last = base + (size - 1);
    if ((last >> PT_FINE_SHIFT) - (base >> PT_FINE_SHIFT) < PT_FINE_MAX_GRANULES)
        return PT_FINE;
    if ((last >> PT_COARSE_SHIFT) - (base >> PT_COARSE_SHIFT) < PT_COARSE_MAX_GRANULES)
        return PT_COARSE;
    return PT_NONE;
}

/* --- one granule's sorted array ------------------------------------------------ */

/* Number of ranges in g with base <= addr (so the candidate is that minus
 * one). Branch-free halving: the comparisons are unpredictable. */
static inline uint32_t granule_upper(const struct pt_granule *g, uintptr_t addr)
{
    const struct us_range *v = g->ranges;
    uint32_t n = g->count, lo = 0;
    if (n == 0)
        return 0;
    while (n > 1) {
        uint32_t half = n / 2;
        lo = v[lo + half].base <= addr ? lo + half : lo;
        n -= half;
    }
    return lo + (v[lo].base <= addr);
}

static void granule_free(struct pt_granule *g)
{
    if (g->ranges != &g->one)
        free(g->ranges);
    free(g);
}

/* Caller holds the shard's write lock. */
static bool granule_insert(struct pt_shard *shard, uint64_t key, const struct us_range *range)
{
    struct pt_granule *g;
    HASH_FIND(hh, shard->granules, &key, sizeof key, g);
    if (g == NULL) {
        g = aligned_alloc(64, PT_GRANULE_ALLOC);
        if (g == NULL)
            return false;
        g->key = key;
        g->count = 1;
        g->cap = 1;
        g->one = *range;
        g->ranges = &g->one;
        HASH_ADD(hh, shard->granules, key, sizeof g->key, g);
        if (g->hh.tbl == NULL) {
            free(g);
            return false;
        }
        return true;
    }
    if (g->count == g->cap) {
        uint32_t cap = g->cap * 2;
        struct us_range *grown;
        if (g->ranges == &g->one) {
            grown = malloc(cap * sizeof *grown);
            if (grown != NULL)
                grown[0] = g->one;
        } else {
            grown = realloc(g->ranges, cap * sizeof *grown);
        }
        if (grown == NULL)
            return false;
        g->ranges = grown;
        g->cap = cap;
    }
    uint32_t at = granule_upper(g, range->base);
    memmove(&g->ranges[at + 1], &g->ranges[at], (g->count - at) * sizeof g->ranges[0]);
    g->ranges[at] = *range;
    g->count++;
    return true;
}

/* Caller holds the shard's write lock. */
static void granule_erase(struct pt_shard *shard, uint64_t key, uintptr_t base)
{
    struct pt_granule *g;
    HASH_FIND(hh, shard->granules, &key, sizeof key, g);
    if (g == NULL)
        return;
    uint32_t at = granule_upper(g, base);
    if (at == 0 || g->ranges[at - 1].base != base)
        return;
    at--;
    g->count--;
    memmove(&g->ranges[at], &g->ranges[at + 1], (g->count - at) * sizeof g->ranges[0]);
    if (g->count == 0) {
        HASH_DEL(shard->granules, g);
        granule_free(g);
    }
}

/* --- one level ------------------------------------------------------------------ */

static inline struct pt_shard *shard_of(struct pt_level_table *lt, uint64_t key)
{
    return &lt->shards[key & (PT_SHARDS - 1)];
}

static inline bool level_lookup(struct pt_level_table *lt, uintptr_t addr, struct us_range *out)
{
    uint64_t key = addr >> lt->shift;
    struct pt_shard *shard = shard_of(lt, key);
    struct pt_granule *g;
    bool hit = false;
    pthread_rwlock_rdlock(&shard->lock);
    HASH_FIND(hh, shard->granules, &key, sizeof key, g);
    if (g != NULL) {
        uint32_t at = granule_upper(g, addr);
        if (at > 0 && addr - g->ranges[at - 1].base < g->ranges[at - 1].size) {
            *out = g->ranges[at - 1];
            hit = true;
        }
    }
    pthread_rwlock_unlock(&shard->lock);
    return hit;
}

/* Erase base from granules [first, end) of lt. */
static void level_erase(struct pt_level_table *lt, uint64_t first, uint64_t end, uintptr_t base)
{
    for (uint64_t key = first; key != end; key++) {
        struct pt_shard *shard = shard_of(lt, key);
        pthread_rwlock_wrlock(&shard->lock);
        granule_erase(shard, key, base);
        pthread_rwlock_unlock(&shard->lock);
    }
}

/* Enter range under every granule of lt it overlaps; all or nothing. */
static bool level_insert(struct pt_level_table *lt, const struct us_range *range)
{
    uint64_t first = range->base >> lt->shift;
    uint64_t end = (range_last(range) >> lt->shift) + 1;
    for (uint64_t key = first; key != end; key++) {
        struct pt_shard *shard = shard_of(lt, key);
        pthread_rwlock_wrlock(&shard->lock);
        bool added = granule_insert(shard, key, range);
        pthread_rwlock_unlock(&shard->lock);
        if (!added) {
            level_erase(lt, first, key, range->base);
            return false;
        }
    }
    return true;
}

/* Caller holds the shard's write lock, or is alone in a forked child. */
static void shard_drop_all(struct pt_shard *shard)
{
    struct pt_granule *g, *tmp;
    HASH_ITER(hh, shard->granules, g, tmp) {
        HASH_DEL(shard->granules, g);
        granule_free(g);
    }
}

/* --- writers (hold pt_writer) ----------------------------------------------------- */

static void coarse_bounds_widen(const struct us_range *r)
{
    if (r->base < atomic_load_explicit(&pt_coarse_lo, memory_order_relaxed))
        atomic_store_explicit(&pt_coarse_lo, r->base, memory_order_relaxed);
    if (range_last(r) > atomic_load_explicit(&pt_coarse_hi, memory_order_relaxed))
        atomic_store_explicit(&pt_coarse_hi, range_last(r), memory_order_relaxed);
}

static void coarse_bounds_reset(void)
{
    atomic_store_explicit(&pt_coarse_lo, UINTPTR_MAX, memory_order_relaxed);
    atomic_store_explicit(&pt_coarse_hi, 0, memory_order_relaxed);
}

static void entry_drop(struct pt_entry *e)
{
    enum pt_level level = level_for(e->range.base, e->range.size);
    struct pt_level_table *lt = &pt_levels[level];
    level_erase(lt, e->range.base >> lt->shift, (range_last(&e->range) >> lt->shift) + 1, e->range.base);
    if (level == PT_COARSE && --pt_coarse_count == 0)
        coarse_bounds_reset();
    HASH_DEL(pt_by_base, e);
}

/* The entry of a stored range on level lt that overlaps [base, last], or NULL. */
static struct pt_entry *find_overlap_in(struct pt_level_table *lt, uintptr_t base, uintptr_t last)
{
    uint64_t end = (last >> lt->shift) + 1;
    for (uint64_t key = base >> lt->shift; key != end; key++) {
        struct pt_shard *shard = shard_of(lt, key);
        struct pt_granule *g;
        /* Only writers change granules, and we are the writer: no lock. */
        HASH_FIND(hh, shard->granules, &key, sizeof key, g);
        if (g == NULL)
            continue;
        for (uint32_t i = 0; i < g->count; i++) {
            const struct us_range *r = &g->ranges[i];
            if (r->base <= last && base <= range_last(r)) {
                struct pt_entry *e;
                HASH_FIND(hh, pt_by_base, &r->base, sizeof r->base, e);
                return e;
            }
        }
    }
    return NULL;
}

/* Drop every stored range that overlaps [base, base+size) of level `level`. */
static void evict_overlaps(uintptr_t base, size_t size, enum pt_level level)
{
    uintptr_t last = base + (size - 1);
    if (level == PT_COARSE) {
        /* Spans up to 64 TiB: walk the ranges rather than the granules. */
        struct pt_entry *e, *tmp;
        HASH_ITER(hh, pt_by_base, e, tmp) {
            if (e->range.base <= last && base <= range_last(&e->range)) {
                entry_drop(e);
                free(e);
            }
        }
        return;
    }
    struct pt_entry *e;
    while ((e = find_overlap_in(&pt_levels[PT_FINE], base, last)) != NULL) {
        entry_drop(e);
        free(e);
    }
    if (pt_coarse_count == 0)
        return;
    while ((e = find_overlap_in(&pt_levels[PT_COARSE], base, last)) != NULL) {
        entry_drop(e);
        free(e);
    }
}

/* --- interface ------------------------------------------------------------------ */

void us_ptrtable_insert(uintptr_t base, size_t size, enum us_mem_kind kind, int device)
{
    enum pt_level level = level_for(base, size);
    struct pt_entry *e;

    pthread_mutex_lock(&pt_writer);
    HASH_FIND(hh, pt_by_base, &base, sizeof base, e);
    if (e != NULL) {
        entry_drop(e);
        free(e);
    }
    if (level == PT_NONE)
        goto unlock;
    evict_overlaps(base, size, level);

    e = malloc(sizeof *e);
    if (e == NULL)
        goto unlock;
    e->range = (struct us_range){ .base = base, .size = size, .kind = kind, .device = device };
    HASH_ADD(hh, pt_by_base, range.base, sizeof e->range.base, e);
    if (e->hh.tbl == NULL)
        goto free_entry;
    if (level == PT_COARSE)
        coarse_bounds_widen(&e->range); /* before the range can be found */
    if (!level_insert(&pt_levels[level], &e->range))
        goto unindex;
    if (level == PT_COARSE)
        pt_coarse_count++;
    pthread_mutex_unlock(&pt_writer);
    return;

    /* Out of memory: the range stays unknown and the runtime classifies it. */
unindex:
    if (pt_coarse_count == 0)
        coarse_bounds_reset();
    HASH_DEL(pt_by_base, e);
free_entry:
    free(e);
unlock:
    pthread_mutex_unlock(&pt_writer);
}

bool us_ptrtable_remove(uintptr_t base, struct us_range *removed)
{
    struct pt_entry *e;
    pthread_mutex_lock(&pt_writer);
    HASH_FIND(hh, pt_by_base, &base, sizeof base, e);
    if (e != NULL)
        entry_drop(e);
    pthread_mutex_unlock(&pt_writer);
    if (e == NULL)
        return false;
    if (removed != NULL)
        *removed = e->range;
    free(e);
    return true;
}

bool us_ptrtable_lookup(uintptr_t addr, struct us_range *out)
{
    struct us_range found;
    if (!level_lookup(&pt_levels[PT_FINE], addr, &found)
        && (addr < atomic_load_explicit(&pt_coarse_lo, memory_order_relaxed)
            || addr > atomic_load_explicit(&pt_coarse_hi, memory_order_relaxed)
            || !level_lookup(&pt_levels[PT_COARSE], addr, &found)))
        return false;
    if (out != NULL)
        *out = found;
    return true;
}

/* Caller holds pt_writer. */
static void index_drop_all(void)
{
    struct pt_entry *e, *tmp;
    HASH_ITER(hh, pt_by_base, e, tmp) {
        HASH_DEL(pt_by_base, e);
        free(e);
    }
    pt_coarse_count = 0;
    coarse_bounds_reset();
}

/* In a forked child: only this thread exists, and any lock may be held by a
 * thread that did not survive the fork. */
static void clear_in_child(void)
{
    /* The writer mutex free means no change was under way: the structures
     * are consistent and can be freed. Otherwise abandon them. */
    if (pthread_mutex_trylock(&pt_writer) == 0) {
        for (unsigned l = 0; l < PT_LEVELS; l++)
            for (unsigned i = 0; i < PT_SHARDS; i++)
                shard_drop_all(&pt_levels[l].shards[i]);
        index_drop_all();
    }
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    for (unsigned l = 0; l < PT_LEVELS; l++) {
        for (unsigned i = 0; i < PT_SHARDS; i++) {
            pthread_rwlock_init(&pt_levels[l].shards[i].lock, &attr);
            pt_levels[l].shards[i].granules = NULL;
        }
    }
    pthread_rwlockattr_destroy(&attr);
    pthread_mutex_init(&pt_writer, NULL);
    pt_by_base = NULL;
    pt_coarse_count = 0;
    coarse_bounds_reset();
    pt_owner_pid = getpid();
}

void us_ptrtable_clear(void)
{
    if (getpid() != pt_owner_pid) {
        clear_in_child();
        return;
    }
    pthread_mutex_lock(&pt_writer);
    for (unsigned l = 0; l < PT_LEVELS; l++) {
        for (unsigned i = 0; i < PT_SHARDS; i++) {
            struct pt_shard *shard = &pt_levels[l].shards[i];
            pthread_rwlock_wrlock(&shard->lock);
            shard_drop_all(shard);
            pthread_rwlock_unlock(&shard->lock);
        }
    }
    index_drop_all();
    pthread_mutex_unlock(&pt_writer);
}
