/* ptrtable.c - see ptrtable.h.
 *
 * Layout. Two levels, each split over 64 shards by granule number
 * (granule & 63). A shard maps granule -> the ranges that overlap it with a
 * small open-addressing hash (linear probing, load <= 1/2). A slot holds a
 * copy of the range when the granule has one (most do); several live in an
 * array sorted by base that the slot points to:
 *   - fine level, 2 MiB granules (addr >> 21): every range of at most
 *     4 GiB (2048 granules), i.e. nearly all of them;
 *   - coarse level, 1 GiB granules (addr >> 30): larger ranges (whole-GPU
 *     allocations, big host registrations), so that a 512 GiB registration
 *     costs 512 entries, not 262144. Ranges of more than 64 TiB are not
 *     stored: no machine pins that much memory, such a size is bogus, and an
 *     address the table does not know is classified by the runtime (slower,
 *     still correct).
 * A lookup reads one shard of the fine level and, only when that misses and
 * addr lies within the bounds of the coarse ranges, one of the coarse level:
 * usually one cache line of the index; no allocation, no global lock.
 *
 * Why not uthash for the granule index: uthash doubles its buckets only
 * when a chain reaches 10 entries, so it runs at 3-5 entries per bucket and
 * a lookup walks a chain, a cache miss per node (10k ranges, random
 * addresses: 62 ns a hit, against 35 with short chains). Lowering its
 * expansion threshold does not work: at 2 a table of 10k keys grew to 64M
 * buckets. uthash keeps the writer-only index by base, where chains cost
 * nothing that matters.
 *
 * Ranges never overlap: an insert evicts every stored range it overlaps (the
 * header's "same base is replaced" is the common case). A new allocation over
 * an old range proves the old one was released behind our back (a free we
 * did not see), and with no overlaps the range holding addr in a granule is
 * simply the one with the greatest base <= addr: a binary search, however
 * many small allocations share the granule.
 *
 * Readers write only their own cache line. A pthread_rwlock per shard was
 * measured first: its reader count is one cache line that every reader of
 * the shard writes twice, and on a 32-core Xeon 16 threads looking up the
 * same 8 ranges paid 580 ns a lookup (190 ns in 16 disjoint sets of 8),
 * more than the runtime query the table saves. So each thread claims a
 * reader slot (its own cache line) on its first lookup and, for the length
 * of a lookup, publishes there which shard it reads (one seq_cst store),
 * then checks the one word that names the shard being written. A writer
 * names its shard in that word, then waits until no slot shows that shard
 * (Dekker: either the writer sees the reader or the reader sees the
 * writer). A reader that meets a writer withdraws and waits on the shard's
 * rwlock, which the writer holds for its whole update. Threads beyond
 * PT_SLOTS at a time, and threads past their slot's release at exit, read
 * under that rwlock instead (correct, not contention-free). A writer waits
 * for a reader preempted inside its shard (a scheduler quantum on an
 * oversubscribed machine): allocations are rare, lookups are not. Lookup
 * cost: make bench-costs (tools/bench/costs.c).
 *
 * Writers (insert, remove, clear) are serialised by one mutex and keep the
 * index by base (remove finds the size there). Under it they update one
 * shard at a time (all the granules of a range in that shard), so readers
 * of other shards never wait. While a multi-granule range is being added or
 * removed a lookup may see it in some granules and not others; a lookup
 * racing with the allocation or release of the very range it looks at has
 * no right answer anyway. Ranges that do not change are found at every
 * instant.
 *
 * Fork. The table records (in a constructor) the pid that owns its locks.
 * us_ptrtable_clear in a forked child (getpid() differs) may find a lock or
 * a reader slot held by a thread that does not exist there: it takes no
 * lock, re-initialises the locks, frees every slot but the calling
 * thread's, and frees the old nodes only if no writer was in the middle of
 * a change at fork time (the writer mutex is free); otherwise it abandons
 * them (a bounded leak in a child that is about to exec). In the owning
 * process clear takes the locks like any writer. A child must clear the
 * table before using it (state.c does, in its fork hook: lifecycle.h). */
#include "ptrtable.h"
#include "hot.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HASH_NONFATAL_OOM 1 /* an add that cannot allocate fails: hh.tbl == NULL */
#include <uthash.h>

#define PT_SHARDS 64u /* power of two */
#define PT_FINE_SHIFT 21u
#define PT_COARSE_SHIFT 30u
#define PT_FINE_MAX_GRANULES 2048u    /* 4 GiB */
#define PT_COARSE_MAX_GRANULES 65536u /* 64 TiB */
#define PT_SLOTS 128u                 /* threads reading without the rwlock at a time */
#define PT_INDEX_MIN_BITS 4u          /* 16 probe slots */

enum pt_level { PT_FINE, PT_COARSE, PT_LEVELS, PT_NONE = PT_LEVELS };

/* A probe slot of a shard's granule index, 32 bytes (two a cache line).
 * Most granules hold one range, stored in the slot itself: a hit costs one
 * cache line. A granule that holds several keeps them, sorted by base, in a
 * pt_multi the slot points to. */
#define PT_KEY_EMPTY UINT64_MAX             /* a free slot (granule numbers are < 2^44) */
#define PT_KEY_MULTI (UINT64_C(1) << 63)   /* the slot points to a pt_multi */

struct pt_multi {
    uint32_t count; /* >= 2 */
    uint32_t cap;
    struct us_range ranges[];
};

struct pt_probe {
    uint64_t key; /* granule number, | PT_KEY_MULTI; PT_KEY_EMPTY when free */
    union {
        struct us_range one;
        struct pt_multi *multi;
    };
};
_Static_assert(sizeof(struct pt_probe) == 32, "two probe slots a cache line");

struct pt_shard {
    _Alignas(64) pthread_rwlock_t lock;
    struct pt_probe *index; /* 1 << bits slots (load <= 1/2), or NULL while empty */
    uint32_t bits;
    uint32_t used;
};

struct pt_level_table {
    unsigned index; /* enum pt_level */
    unsigned shift;
    struct pt_shard shards[PT_SHARDS];
};

/* Which shard a reader (or the writer) is in: level * PT_SHARDS + shard. */
#define PT_NO_SHARD 0xffffffffu

/* A thread's reader slot. */
struct pt_slot {
    _Alignas(64) _Atomic unsigned reading; /* the shard being read, or PT_NO_SHARD */
    _Atomic unsigned owned;
};

enum { PT_SLOT_UNCLAIMED = -1, PT_SLOT_NONE = -2 };

/* Writer-only index of every stored range by base. */
struct pt_entry {
    struct us_range range;
    UT_hash_handle hh;
};

#define PT_SHARD_INIT { .lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP }

static struct pt_level_table pt_levels[PT_LEVELS] = {
    [PT_FINE] = { .index = PT_FINE, .shift = PT_FINE_SHIFT, .shards = { [0 ... PT_SHARDS - 1] = PT_SHARD_INIT } },
    [PT_COARSE] = { .index = PT_COARSE, .shift = PT_COARSE_SHIFT, .shards = { [0 ... PT_SHARDS - 1] = PT_SHARD_INIT } },
};
static struct pt_slot pt_slots[PT_SLOTS] = { [0 ... PT_SLOTS - 1] = { .reading = PT_NO_SHARD, .owned = 0 } };
static _Atomic unsigned pt_writing = PT_NO_SHARD; /* the shard the writer is changing */
/* initial-exec: one fs-relative load on the lookup path, no __tls_get_addr
 * (the library is preloaded; a dlopen would use glibc's static TLS surplus) */
static _Thread_local int pt_my_slot __attribute__((tls_model("initial-exec"))) = PT_SLOT_UNCLAIMED;
static pthread_once_t pt_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t pt_key; /* releases a thread's slot at its exit */
static bool pt_key_ok;

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

/* Each thread's last PT_RECENT ranges found, tagged with the table's
 * generation, which every change of a shard moves on (after the change,
 * before its lock is let go): a copy's two pointers are mostly the same two
 * ranges call after call, and a hit then costs a load of the generation,
 * not a reader slot's seq_cst store (tools/bench/passthrough.sh on the
 * 2-vCPU development VM: a no-op copy, two lookups, added 64-123 ns with
 * level_lookup a quarter of it in perf, 48-76 ns with the recent ranges;
 * medians of 12 alternating runs 128 against 87 ns, native 20). A hit
 * tagged with the generation the lookup read first is what a lookup at
 * that instant found; only a change under way at that instant, of that
 * very range, is seen a moment late, as a lookup racing it may see it in
 * some granules and not others. Misses are not kept. The generation starts
 * at 1: a thread's zeroed entries never match. */
#define PT_RECENT 2
static _Atomic uint64_t pt_generation = 1;
struct pt_recent {
    uint64_t generation;
    struct us_range range;
};
static _Thread_local struct pt_recent pt_recent[PT_RECENT] __attribute__((tls_model("initial-exec")));
static _Thread_local unsigned pt_recent_next __attribute__((tls_model("initial-exec")));

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

/* --- a granule's ranges ----------------------------------------------------------- */

/* Number of ranges in v[0, n) with base <= addr (so the candidate is that
 * minus one). Branch-free halving: the comparisons are unpredictable. */
static inline uint32_t ranges_upper(const struct us_range *v, uint32_t n, uintptr_t addr)
{
    uint32_t lo = 0;
    if (n == 0)
        return 0;
    while (n > 1) {
        uint32_t half = n / 2;
        lo = v[lo + half].base <= addr ? lo + half : lo;
        n -= half;
    }
    return lo + (v[lo].base <= addr);
}

/* The range of slot p that contains addr, or NULL. */
static inline const struct us_range *probe_range_at(const struct pt_probe *p, uintptr_t addr)
{
    if (!(p->key & PT_KEY_MULTI))
        return addr - p->one.base < p->one.size ? &p->one : NULL;
    const struct pt_multi *m = p->multi;
    uint32_t at = ranges_upper(m->ranges, m->count, addr);
    return at > 0 && addr - m->ranges[at - 1].base < m->ranges[at - 1].size ? &m->ranges[at - 1] : NULL;
}

/* The ranges of slot p. */
static inline const struct us_range *probe_ranges(const struct pt_probe *p, uint32_t *count)
{
    if (!(p->key & PT_KEY_MULTI)) {
        *count = 1;
        return &p->one;
    }
    *count = p->multi->count;
    return p->multi->ranges;
}

/* Add range to an occupied slot. */
static bool probe_add(struct pt_probe *p, const struct us_range *range)
{
    struct pt_multi *m;
    if (!(p->key & PT_KEY_MULTI)) {
        m = malloc(sizeof *m + 4 * sizeof m->ranges[0]);
        if (m == NULL)
            return false;
        m->count = 1;
        m->cap = 4;
        m->ranges[0] = p->one;
        p->multi = m;
        p->key |= PT_KEY_MULTI;
    } else if (p->multi->count == p->multi->cap) {
        m = realloc(p->multi, sizeof *m + 2 * p->multi->cap * sizeof m->ranges[0]);
        if (m == NULL)
            return false;
        m->cap *= 2;
        p->multi = m;
    }
    m = p->multi;
    uint32_t at = ranges_upper(m->ranges, m->count, range->base);
    memmove(&m->ranges[at + 1], &m->ranges[at], (m->count - at) * sizeof m->ranges[0]);
    m->ranges[at] = *range;
    m->count++;
    return true;
}

/* --- a shard's granule index (writers exclude readers around changes) ------------ */

static inline uint32_t index_home(uint64_t key, uint32_t bits)
{
    return (uint32_t)(((key & ~PT_KEY_MULTI) * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

static inline struct pt_probe *index_find(const struct pt_shard *shard, uint64_t key)
{
    if (shard->index == NULL)
        return NULL;
    uint32_t mask = (1u << shard->bits) - 1;
    for (uint32_t i = index_home(key, shard->bits);; i = (i + 1) & mask) {
        struct pt_probe *p = &shard->index[i];
        if (p->key == PT_KEY_EMPTY)
            return NULL;
        if ((p->key & ~PT_KEY_MULTI) == key)
            return p;
    }
}

static void index_place(struct pt_probe *slots, uint32_t bits, const struct pt_probe *p)
{
    uint32_t mask = (1u << bits) - 1;
    uint32_t i = index_home(p->key, bits);
    while (slots[i].key != PT_KEY_EMPTY)
        i = (i + 1) & mask;
    slots[i] = *p;
}

/* Rebuild the index with 1 << bits slots; false (index unchanged) if out of memory. */
static bool index_resize(struct pt_shard *shard, uint32_t bits)
{
    size_t bytes = sizeof(struct pt_probe) << bits;
    struct pt_probe *slots = aligned_alloc(64, bytes);
    if (slots == NULL)
        return false;
    memset(slots, 0xff, bytes); /* every key PT_KEY_EMPTY */
    if (shard->index != NULL) {
        for (uint32_t i = 0; i < (1u << shard->bits); i++)
            if (shard->index[i].key != PT_KEY_EMPTY)
                index_place(slots, bits, &shard->index[i]);
        free(shard->index);
    }
    shard->index = slots;
    shard->bits = bits;
    return true;
}

/* Free slot p (occupied, pt_multi already released) by backward shift, so
 * that probes need no tombstones; shrink a sparse index. */
static void index_del(struct pt_shard *shard, struct pt_probe *p)
{
    uint32_t mask = (1u << shard->bits) - 1;
    uint32_t hole = (uint32_t)(p - shard->index);
    for (uint32_t j = (hole + 1) & mask; shard->index[j].key != PT_KEY_EMPTY; j = (j + 1) & mask) {
        uint32_t home = index_home(shard->index[j].key, shard->bits);
        /* j's entry may move into the hole if its home is not in (hole, j] */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            shard->index[hole] = shard->index[j];
            hole = j;
        }
    }
    shard->index[hole].key = PT_KEY_EMPTY;
    shard->used--;
    if (shard->used == 0) {
        free(shard->index);
        shard->index = NULL;
        shard->bits = 0;
    } else if (shard->bits > PT_INDEX_MIN_BITS && 8 * shard->used < (1u << shard->bits)) {
        index_resize(shard, shard->bits - 1); /* out of memory: stay larger */
    }
}

/* Caller excludes readers from the shard. */
static bool shard_add_range(struct pt_shard *shard, uint64_t key, const struct us_range *range)
{
    struct pt_probe *p = index_find(shard, key);
    if (p != NULL)
        return probe_add(p, range);
    if (shard->index == NULL || 2 * (shard->used + 1) > (1u << shard->bits)) {
        if (!index_resize(shard, shard->index == NULL ? PT_INDEX_MIN_BITS : shard->bits + 1))
            return false;
    }
    index_place(shard->index, shard->bits, &(struct pt_probe){ .key = key, .one = *range });
    shard->used++;
    return true;
}

/* Caller excludes readers from the shard. */
static void shard_del_range(struct pt_shard *shard, uint64_t key, uintptr_t base)
{
    struct pt_probe *p = index_find(shard, key);
    if (p == NULL)
        return;
    if (!(p->key & PT_KEY_MULTI)) {
        if (p->one.base == base)
            index_del(shard, p);
        return;
    }
    struct pt_multi *m = p->multi;
    uint32_t at = ranges_upper(m->ranges, m->count, base);
    if (at == 0 || m->ranges[at - 1].base != base)
        return;
    at--;
    m->count--;
    memmove(&m->ranges[at], &m->ranges[at + 1], (m->count - at) * sizeof m->ranges[0]);
    if (m->count == 1) { /* back into the slot */
        struct us_range last = m->ranges[0];
        free(m);
        p->key &= ~PT_KEY_MULTI;
        p->one = last;
    }
}

/* Caller excludes readers from the shard, or is alone in a forked child. */
static void shard_drop_all(struct pt_shard *shard)
{
    if (shard->index == NULL)
        return;
    for (uint32_t i = 0; i < (1u << shard->bits); i++)
        if (shard->index[i].key != PT_KEY_EMPTY && (shard->index[i].key & PT_KEY_MULTI))
            free(shard->index[i].multi);
    free(shard->index);
    shard->index = NULL;
    shard->bits = 0;
    shard->used = 0;
}

static inline struct pt_shard *shard_of(struct pt_level_table *lt, uint64_t key)
{
    return &lt->shards[key & (PT_SHARDS - 1)];
}

/* --- reader slots and shard exclusion ------------------------------------------ */

static void slot_release(void *arg)
{
    pt_my_slot = PT_SLOT_NONE; /* lookups from later destructors take the rwlock */
    atomic_store_explicit(&pt_slots[(uintptr_t)arg - 1].owned, 0, memory_order_release);
}

static void slot_key_create(void)
{
    pt_key_ok = pthread_key_create(&pt_key, slot_release) == 0;
}

/* A free slot for this thread, or -1 (then it reads under the rwlock). */
static int slot_claim(void)
{
    pthread_once(&pt_key_once, slot_key_create);
    for (unsigned k = 0; pt_key_ok && k < PT_SLOTS; k++) {
        unsigned free_slot = 0;
        if (atomic_load_explicit(&pt_slots[k].owned, memory_order_relaxed) != 0
            || !atomic_compare_exchange_strong(&pt_slots[k].owned, &free_slot, 1))
            continue;
        if (pthread_setspecific(pt_key, (void *)(uintptr_t)(k + 1)) != 0) {
            atomic_store(&pt_slots[k].owned, 0);
            break;
        }
        pt_my_slot = (int)k;
        return (int)k;
    }
    pt_my_slot = PT_SLOT_NONE;
    return -1;
}

void us_ptrtable_prepare_thread(void)
{
    if (pt_my_slot == PT_SLOT_UNCLAIMED)
        (void)slot_claim();
}

/* Enter shard `tag` (level * PT_SHARDS + shard) as a reader. Returns the
 * slot to leave, or NULL when the rwlock is held instead. */
static inline struct pt_slot *reader_enter(unsigned tag, struct pt_shard *shard)
{
    int k = pt_my_slot;
    if (__builtin_expect(k < 0, 0) && (k == PT_SLOT_NONE || (k = slot_claim()) < 0)) {
        pthread_rwlock_rdlock(&shard->lock);
        return NULL;
    }
    struct pt_slot *slot = &pt_slots[k];
    for (;;) {
        atomic_store_explicit(&slot->reading, tag, memory_order_seq_cst);
        if (atomic_load_explicit(&pt_writing, memory_order_seq_cst) != tag)
            return slot;
        atomic_store_explicit(&slot->reading, PT_NO_SHARD, memory_order_release);
        /* the writer holds the shard's rwlock until it is done */
        pthread_rwlock_rdlock(&shard->lock);
        pthread_rwlock_unlock(&shard->lock);
    }
}

static inline void reader_leave(struct pt_slot *slot, struct pt_shard *shard)
{
    if (slot != NULL)
        atomic_store_explicit(&slot->reading, PT_NO_SHARD, memory_order_release);
    else
        pthread_rwlock_unlock(&shard->lock);
}

/* A reader inside stays for one lookup (tens of ns), unless it was
 * preempted: then sleep, so that it can run. Writers are rare. */
static void wait_for_reader(const struct pt_slot *slot, unsigned tag)
{
    for (unsigned spins = 0; atomic_load_explicit(&slot->reading, memory_order_seq_cst) == tag; spins++) {
        if (spins < 64)
            continue;
        if (spins < 72)
            sched_yield();
        else
            nanosleep(&(struct timespec){ .tv_nsec = 20000 }, NULL);
    }
}

/* Exclude every reader from a shard. Caller holds pt_writer. */
static void shard_write_enter(struct pt_level_table *lt, struct pt_shard *shard)
{
    unsigned tag = lt->index * PT_SHARDS + (unsigned)(shard - lt->shards);
    pthread_rwlock_wrlock(&shard->lock);
    atomic_store_explicit(&pt_writing, tag, memory_order_seq_cst);
    for (unsigned k = 0; k < PT_SLOTS; k++)
        wait_for_reader(&pt_slots[k], tag);
}

static void shard_write_leave(struct pt_shard *shard)
{
    atomic_fetch_add_explicit(&pt_generation, 1, memory_order_release); /* each thread's recent ranges are old */
    atomic_store_explicit(&pt_writing, PT_NO_SHARD, memory_order_release);
    pthread_rwlock_unlock(&shard->lock);
}

/* --- one level ------------------------------------------------------------------ */

US_HOT static inline bool level_lookup(struct pt_level_table *lt, uintptr_t addr, struct us_range *out)
{
    uint64_t key = addr >> lt->shift;
    unsigned s = (unsigned)(key & (PT_SHARDS - 1));
    struct pt_shard *shard = &lt->shards[s];
    bool hit = false;
    struct pt_slot *slot = reader_enter(lt->index * PT_SHARDS + s, shard);
    const struct pt_probe *p = index_find(shard, key);
    const struct us_range *r = p != NULL ? probe_range_at(p, addr) : NULL;
    if (r != NULL) {
        *out = *r;
        hit = true;
    }
    reader_leave(slot, shard);
    return hit;
}

/* Erase base from granules [first, end) of lt, one shard at a time. */
static void level_erase(struct pt_level_table *lt, uint64_t first, uint64_t end, uintptr_t base)
{
    uint64_t shards = end - first < PT_SHARDS ? end - first : PT_SHARDS;
    for (uint64_t i = 0; i < shards; i++) {
        struct pt_shard *shard = shard_of(lt, first + i);
        shard_write_enter(lt, shard);
        for (uint64_t key = first + i; key < end; key += PT_SHARDS)
            shard_del_range(shard, key, base);
        shard_write_leave(shard);
    }
}

/* Enter range under every granule of lt it overlaps; all or nothing. */
static bool level_insert(struct pt_level_table *lt, const struct us_range *range)
{
    uint64_t first = range->base >> lt->shift;
    uint64_t end = (range_last(range) >> lt->shift) + 1;
    uint64_t shards = end - first < PT_SHARDS ? end - first : PT_SHARDS;
    bool added = true;
    for (uint64_t i = 0; i < shards && added; i++) {
        struct pt_shard *shard = shard_of(lt, first + i);
        shard_write_enter(lt, shard);
        for (uint64_t key = first + i; key < end && added; key += PT_SHARDS)
            added = shard_add_range(shard, key, range);
        shard_write_leave(shard);
    }
    if (!added)
        level_erase(lt, first, end, range->base); /* erasing what is absent is a no-op */
    return added;
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
        /* Only writers change granules, and we are the writer: no exclusion. */
        const struct pt_probe *p = index_find(shard_of(lt, key), key);
        if (p == NULL)
            continue;
        uint32_t count;
        const struct us_range *ranges = probe_ranges(p, &count);
        for (uint32_t i = 0; i < count; i++) {
            const struct us_range *r = &ranges[i];
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

/* Caller holds pt_writer. */
static void index_by_base_drop_all(void)
{
    struct pt_entry *e, *tmp;
    HASH_ITER(hh, pt_by_base, e, tmp) {
        HASH_DEL(pt_by_base, e);
        free(e);
    }
    pt_coarse_count = 0;
    coarse_bounds_reset();
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

US_HOT bool us_ptrtable_lookup(uintptr_t addr, struct us_range *out)
{
    uint64_t generation = atomic_load_explicit(&pt_generation, memory_order_acquire);
    for (unsigned i = 0; i < PT_RECENT; i++) {
        const struct pt_recent *recent = &pt_recent[i];
        if (recent->generation == generation && addr - recent->range.base < recent->range.size) {
            if (out != NULL)
                *out = recent->range;
            return true;
        }
    }
    struct us_range found;
    if (!level_lookup(&pt_levels[PT_FINE], addr, &found)
        && (addr < atomic_load_explicit(&pt_coarse_lo, memory_order_relaxed)
            || addr > atomic_load_explicit(&pt_coarse_hi, memory_order_relaxed)
            || !level_lookup(&pt_levels[PT_COARSE], addr, &found)))
        return false;
    pt_recent[pt_recent_next++ % PT_RECENT] = (struct pt_recent){ .generation = generation, .range = found };
    if (out != NULL)
        *out = found;
    return true;
}

/* In a forked child: only this thread exists, and any lock or reader slot
 * may be held by a thread that did not survive the fork. */
static void clear_in_child(void)
{
    /* The writer mutex free means no change was under way: the structures
     * are consistent and can be freed. Otherwise abandon them. */
    if (pthread_mutex_trylock(&pt_writer) == 0) {
        for (unsigned l = 0; l < PT_LEVELS; l++)
            for (unsigned i = 0; i < PT_SHARDS; i++)
                shard_drop_all(&pt_levels[l].shards[i]);
        index_by_base_drop_all();
    }
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    for (unsigned l = 0; l < PT_LEVELS; l++) {
        for (unsigned i = 0; i < PT_SHARDS; i++) {
            struct pt_shard *shard = &pt_levels[l].shards[i];
            pthread_rwlock_init(&shard->lock, &attr);
            shard->index = NULL;
            shard->bits = 0;
            shard->used = 0;
        }
    }
    pthread_rwlockattr_destroy(&attr);
    for (unsigned k = 0; k < PT_SLOTS; k++) {
        atomic_store(&pt_slots[k].reading, PT_NO_SHARD);
        atomic_store(&pt_slots[k].owned, (int)k == pt_my_slot ? 1 : 0);
    }
    atomic_store(&pt_writing, PT_NO_SHARD);
    atomic_fetch_add(&pt_generation, 1); /* this thread's recent ranges went with the table */
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
            shard_write_enter(&pt_levels[l], shard);
            shard_drop_all(shard);
            shard_write_leave(shard);
        }
    }
    index_by_base_drop_all();
    pthread_mutex_unlock(&pt_writer);
}
