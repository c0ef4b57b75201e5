/* staging.c - see staging.h.
 *
 * The slots live in blocks, one pinned allocation each (mapped and registered
 * by the shim: see map_and_register) (one slot a block
 * since growth follows the copies), in a list that only grows. The budget
 * (pinned_max) is reserved with an atomic before an allocation and given back
 * if it fails, so concurrent growers (copies pinning inline, the grower
 * thread) never overshoot it together. */
#include "staging.h"
#include "hot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "config.h"
#include "context.h"
#include "grower.h"
#include "hostpages.h"
#include "lifecycle.h"
#include "log.h"
#include "ondevice.h"
#include "prefault.h"
#include "real.h"
#include "spill.h"
#include "state.h"

struct block {
    struct block *next;
    struct us_pinned_owner owner; /* whose end frees the memory */
    unsigned n;
    struct us_slot slots[];
};

static struct {
    pthread_mutex_t mu;
    struct block *head, *tail; /* oldest first */
    struct block *retired;     /* freed by a device reset: kept, never freed (a copy still
                                * holding one of its slots may write to it), and reachable */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

static atomic_size_t pinned_bytes;
static int logged_budget, logged_alloc, logged_register, logged_oom, logged_deferred, logged_partial;

static bool reserve(size_t bytes)
{
    size_t max = us_config()->pinned_max;
    size_t cur = atomic_load(&pinned_bytes);
    do {
        if (bytes > max || cur > max - bytes) {
            us_log_once(&logged_budget, US_LOG_WARN,
                        "pinned_max (%zu bytes) reached: copies that find no free staging go native", max);
            return false;
        }
    } while (!atomic_compare_exchange_weak(&pinned_bytes, &cur, cur + bytes));
    return true;
}

/* Every page of the new mapping in, before the driver sees it, in huge
 * pages where the kernel gives them (THP mode madvise or always): measured on
 * an H200 host (driver 580), 16 MiB faulted in 4.4 ms and registered in 0.85
 * ms with 4 KiB pages, 1.1 and 0.42 ms with huge pages (64 MiB: 18.4 and 2.3
 * ms against 9.1 and 1.6): the registration holds the driver half as long.
 * The mapping is written in full at once, so huge pages waste nothing.
 * us_prefault_range faults it in (MADV_POPULATE_WRITE; before Linux 5.14, a
 * write per page). */
static void fault_in(void *p, size_t bytes)
{
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    (void)us_prefault_range(p, bytes, true);
}

/* Between two pieces of a grower's registration (map_and_register). */
#define PIECE_PAUSE_US 50

/* The registration that starts at p: to the end of its piece, or all that is left. */
static size_t registration_len(const char *p, size_t left, bool in_pieces)
{
    return in_pieces ? us_staging_piece_room(p, left) : left;
}

/* A private mapping of `bytes` on a piece's boundary, kept from forked
 * children (MADV_DONTFORK, below) and faulted in; NULL: mmap failed. */
static void *map_faulted_in(size_t bytes)
{
    char *p = us_map_on_boundary(bytes, US_STAGING_PIN_PIECE, 0);
    if (p == NULL)
        return NULL;
    (void)madvise(p, bytes, MADV_DONTFORK);
    fault_in(p, bytes);
    return p;
}

/* Memory the shim maps and faults in itself, then registers (portable):
 * the page faults happen outside the driver, which holds a lock that other
 * threads' CUDA calls wait for while it pins. Measured on an H100 (driver
 * 580): cudaHostAlloc of 8 MiB took 4.4 ms, and while a thread made 32 of
 * them another thread's 4 KiB pinned copy + synchronize waited up to 269 ms
 * (11 copies in 288 ms); mapped with MAP_POPULATE then cudaHostRegister: 0.9
 * ms each, the other thread's copies 11 us on average, 4 ms at worst (21,000
 * copies); faulted in with huge pages since (fault_in). MADV_DONTFORK: a
 * forked child (a DataLoader worker) must not share the pages copy-on-write,
 * or the parent's next write to a slot would move it to a new page while the
 * GPU still reads the old one. NULL: mapping or registration failed (the
 * caller falls back to cudaHostAlloc).
 *
 * in_pieces: registered in pieces that end at multiples of
 * US_STAGING_PIN_PIECE (staging.h), `pause` between them. Another thread's
 * kernel launch waits for a registration in progress: on an H200 host
 * (tools/bench/launch_hold.cu, memory faulted in, huge pages) registering
 * 8 MiB took 300-520 us on average and held a launch up to 0.8-1.2 ms,
 * 2 MiB 140-170 us and 0.3-0.4 ms (launches alone: 0.06-0.13 ms at worst;
 * natively, during a loop of pageable D2H copies: 0.06-0.44 ms). The pause
 * lets a launch that waited take the driver before the next piece, and a
 * copy being issued then finishes issuing first (us_grower_yield_to_copies). */
static void *map_and_register(size_t bytes, bool in_pieces, bool pause, void *faulted_ahead)
{
    const struct us_real_api *real = us_real();
    if (real->cudaHostRegister == NULL) {
        if (faulted_ahead != NULL)
            munmap(faulted_ahead, bytes);
        return NULL;
    }
    char *p = faulted_ahead;
    uint64_t began = us_now_ns();
    if (p == NULL) {
        /* on a piece's boundary: the slots' offsets say where pieces end (grow_block), and huge pages fill it */
        p = map_faulted_in(bytes);
        if (p == NULL)
            return NULL;
    }
    uint64_t faulted = us_now_ns(), registering = 0, longest = 0;
    unsigned pieces = 0;
    size_t at = 0;
    cudaError_t err = cudaSuccess;
    while (at < bytes) {
        size_t len = registration_len(p + at, bytes - at, in_pieces);
        uint64_t t0 = us_now_ns();
        err = real->cudaHostRegister(p + at, len, cudaHostRegisterPortable);
        uint64_t took = us_now_ns() - t0;
        registering += took;
        longest = took > longest ? took : longest;
        pieces++;
        if (err != cudaSuccess)
            break;
        at += len;
        if (pause && at < bytes) {
            struct timespec gap = {0, PIECE_PAUSE_US * 1000L};
            nanosleep(&gap, NULL);
            us_grower_yield_to_copies(); /* as before each slot: a copy being issued goes first */
        }
    }
    if (err != cudaSuccess) {
        us_log_once(&logged_register, US_LOG_INFO,
                    "cudaHostRegister of %zu bytes of staging failed (%s): staging comes from cudaHostAlloc", bytes,
                    us_real_error_name(err));
        for (size_t done = 0; done < at; done += registration_len(p + done, at - done, in_pieces))
            (void)real->cudaHostUnregister(p + done); /* the pieces registered before it */
        munmap(p, bytes);
        return NULL;
    }
    /* what another thread's CUDA calls may have waited for: its timing */
    us_log(US_LOG_DEBUG, "staging: pinned %zu bytes at %.3f ms (monotonic clock): %s in %.0f us, %u "
           "registration(s) in %.0f us, the longest %.0f us", bytes, (double)began / 1e6,
           faulted_ahead != NULL ? "faulted in ahead, taken" : "faulted in", (double)(faulted - began) / 1e3,
           pieces, (double)registering / 1e3, (double)longest / 1e3);
    return p;
}

/* `bytes` of portable pinned memory within the budget, in the current
 * device's primary context when it is active (it stays as long as the
 * runtime), else in the current context (*owner says which: its end frees
 * the memory; see us_staging_forget_device/_context). Never freed: the pool
 * only grows. */
static bool pinned_alloc(size_t bytes, bool in_pieces, bool pause, void *faulted_ahead, void **out,
                         struct us_pinned_owner *owner, bool *pieced)
{
    *pieced = false;
    if (!reserve(bytes)) {
        if (faulted_ahead != NULL)
            munmap(faulted_ahead, bytes);
        return false;
    }
    owner->device = -1;
    owner->ctx = 0;
    us_real()->cudaGetDevice(&owner->device);
    bool pushed = false;
    if (!us_context_enter_primary(owner->device, &pushed)) {
        const struct us_ctx *here = us_context_this();
        if (here != NULL && !here->primary)
            owner->ctx = here->id;
    }
    us_hostpages_own_mapping_begin(); /* fresh memory: pages remembered pageable stay so */
    void *p = map_and_register(bytes, in_pieces, pause, faulted_ahead);
    *pieced = p != NULL && in_pieces; /* cudaHostAlloc's memory is one allocation */
    cudaError_t err = cudaSuccess;
    if (p == NULL)
        err = us_real()->cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    us_hostpages_own_mapping_end();
    us_context_leave_primary(pushed);
    if (err != cudaSuccess || p == NULL) {
        atomic_fetch_sub(&pinned_bytes, bytes);
        us_log_once(&logged_alloc, US_LOG_WARN,
                    "cudaHostAlloc of %zu bytes of staging failed (%s): copies that need it go native", bytes,
                    us_real_error_name(err));
        return false;
    }
    *out = p;
    return true;
}

/* A lane's ring faulted in ahead by the grower (us_staging_ring_ahead), for
 * the next lane to register. Faulting the memory in was most of a first
 * rewritten cross-GPU copy's time in the call: on a two-H200 host a 32 MiB
 * ring faulted in in 5.1-7.3 ms and registered in 1.4-3.1 ms inside that
 * call (docs/pipelines.md, case A). Page faults hold no driver lock, so the
 * grower takes them off the program's threads; the registration stays in
 * the call that makes the lane, which needs the ring then (a ring registered
 * in the background held the copies around it, measured: docs/pipelines.md).
 * Once a process: the first lane takes it and later lanes fault their own in
 * (a ring kept waiting for a lane that may never come would cost its memory
 * for nothing); never inherited by a forked child (MADV_DONTFORK). */
static struct {
    pthread_mutex_t mu;
    void *p;
    size_t bytes;
} ring_ahead = {.mu = PTHREAD_MUTEX_INITIALIZER};
static atomic_bool ring_ahead_asked; /* asked once: ask no more */
static atomic_bool first_ring_made;  /* a lane has its ring: one faulted in ahead now would wait for nothing */

/* For the ring being allocated: the one faulted in ahead, if it waits (and
 * none is kept after this: ring_ahead_add tests first_ring_made under the
 * same lock). */
static void *take_ring_ahead(size_t bytes)
{
    if (atomic_load(&us_lifecycle_in_forked_child))
        return NULL; /* its mapping is not in the child, and a parent's thread may have held the lock at fork */
    pthread_mutex_lock(&ring_ahead.mu);
    atomic_store(&first_ring_made, true);
    void *p = NULL;
    if (ring_ahead.p != NULL && ring_ahead.bytes == bytes) {
        p = ring_ahead.p;
        ring_ahead.p = NULL;
    }
    pthread_mutex_unlock(&ring_ahead.mu);
    return p;
}

size_t us_staging_ring_ahead_waiting(void)
{
    pthread_mutex_lock(&ring_ahead.mu);
    size_t bytes = ring_ahead.p != NULL ? ring_ahead.bytes : 0;
    pthread_mutex_unlock(&ring_ahead.mu);
    return bytes;
}

static unsigned ring_ahead_missing(size_t bytes, unsigned count)
{
    (void)count;
    pthread_mutex_lock(&ring_ahead.mu);
    bool have = ring_ahead.p != NULL;
    pthread_mutex_unlock(&ring_ahead.mu);
    /* a ring the budget could not register, or that no first lane will take, is not worth its memory */
    return !have && !atomic_load(&first_ring_made) && atomic_load(&pinned_bytes) + bytes <= us_config()->pinned_max;
}

static bool ring_ahead_add(size_t bytes)
{
    void *p = map_faulted_in(bytes);
    if (p == NULL)
        return false;
    pthread_mutex_lock(&ring_ahead.mu);
    bool kept = ring_ahead.p == NULL && !atomic_load(&first_ring_made); /* the first lane may have come meanwhile */
    if (kept) {
        ring_ahead.p = p;
        ring_ahead.bytes = bytes;
    }
    pthread_mutex_unlock(&ring_ahead.mu);
    if (!kept)
        munmap(p, bytes);
    else
        us_log(US_LOG_DEBUG, "staging: a lane's ring of %zu bytes faulted in ahead", bytes);
    return false; /* nothing added to the slot pool, which the grower counts */
}

static const struct us_grower_pool ring_ahead_pool = {ring_ahead_missing, ring_ahead_add};

void us_staging_ring_ahead(int device, size_t bytes)
{
    if (atomic_load_explicit(&ring_ahead_asked, memory_order_relaxed) || atomic_exchange(&ring_ahead_asked, true))
        return;
    if (!us_grower_request(&ring_ahead_pool, device, bytes, 1))
        atomic_store(&ring_ahead_asked, false); /* no grower (a forked child): the next copy asks again */
}

bool us_staging_ring_alloc(size_t bytes, void **out, struct us_pinned_owner *owner)
{
    /* a lane's ring is one registration: its copies are not split (pipeline_peer.c) */
    bool pieced;
    return pinned_alloc(bytes, false, false, take_ring_ahead(bytes), out, owner, &pieced);
}

void us_staging_ring_forget(size_t bytes)
{
    atomic_fetch_sub(&pinned_bytes, bytes);
}

size_t us_staging_pinned_bytes(void)
{
    return atomic_load(&pinned_bytes);
}

/* Fixed at the first use (the pool's slots all have it); an atomic, since
 * every rewritten copy reads it several times. */
static atomic_size_t slot_bytes_fixed;

US_HOT size_t us_staging_slot_bytes(void)
{
    size_t bytes = atomic_load_explicit(&slot_bytes_fixed, memory_order_relaxed);
    if (bytes != 0)
        return bytes;
    size_t expected = 0;
    bytes = us_config()->chunk_bytes;
    if (!atomic_compare_exchange_strong(&slot_bytes_fixed, &expected, bytes))
        bytes = expected; /* another thread fixed it first */
    return bytes;
}

/* Under pool.mu: whether the slot can be claimed now; a released slot whose
 * event completed becomes free. cudaEventQuery does not block. */
static bool available_locked(struct us_slot *s, bool query)
{
    if (s->claimed || s->lost)
        return false;
    if (s->pending_ctx < 0)
        return true;
    if (!query || us_real()->cudaEventQuery(s->events[s->pending_ctx]) != cudaSuccess)
        return false; /* not done yet, or its stream failed: leave it */
    s->pending_ctx = -1;
    return true;
}

size_t us_staging_slot_bytes_for(size_t copy_bytes, unsigned pieces)
{
    size_t max = us_staging_slot_bytes(), want = copy_bytes / (pieces > 0 ? pieces : 1), bytes = US_STAGING_MIN_SLOT;
    while (bytes < max && bytes * 2 <= want)
        bytes *= 2;
    return bytes < max ? bytes : max;
}

US_HOT size_t us_staging_ask_slot_bytes(const struct us_staging_ask *ask)
{
    return us_staging_slot_bytes_for(ask->copy_bytes, ask->pieces > 0 ? ask->pieces : US_STAGING_GROW_DIVISOR);
}

size_t us_staging_grow_bytes(size_t copy_bytes)
{
    return us_staging_slot_bytes_for(copy_bytes, US_STAGING_GROW_DIVISOR);
}

/* Measured on an H100 (driver 580; median of 300 cudaMemcpy calls, idle GPU,
 * copy_thread_min 1m; us): a pageable H2D in one piece beat the native copy
 * at every size from 2 MiB (2 MiB 158 vs 176, 3 MiB 251 vs 272, 4 MiB 335 vs
 * 365, 8 MiB 448 vs 651), where eighths lost (243, 366, 483, 645): each small
 * piece is copied in by fewer threads, and the pieces do not overlap much with
 * the transfers, which are 4-10 times faster than the host copy. A pageable
 * D2H gains from overlap (the copy-out of one piece while the next arrives):
 * halves beat native below 8 MiB (1 MiB 83 vs 127, 2 MiB 211 vs 244, 4 MiB 275
 * vs 359), quarters from 8 MiB (346 vs 845; 16 MiB 475 vs 1328). Larger copies
 * are cut in slots of chunk_bytes anyway. */
US_HOT unsigned us_staging_pieces(bool to_device, size_t copy_bytes)
{
    if (to_device)
        return 1;
    return copy_bytes < ((size_t)8 << 20) ? 2 : 4;
}

/* Under pool.mu: claims available slots of min_bytes to max_bytes into out[]
 * (`got` already there, holding *held bytes) until `want` slots or `need`
 * bytes. A slot holds at most `piece` bytes of the copy (the chunks are cut
 * at the copy's own slot size: us_pipe_chunk_room), so a larger slot
 * counts as one piece. Returns the new count. */
US_HOT static unsigned claim_locked(unsigned got, unsigned want, size_t min_bytes, size_t max_bytes, size_t piece,
                             size_t need, size_t *held, struct us_slot **out, bool query)
{
    for (struct block *b = pool.head; b != NULL && got < want && *held < need; b = b->next)
        for (unsigned i = 0; i < b->n && got < want && *held < need; i++) {
            struct us_slot *slot = &b->slots[i];
            if (slot->bytes >= min_bytes && slot->bytes <= max_bytes && available_locked(slot, query)) {
                slot->claimed = true;
                out[got++] = slot;
                *held += slot->bytes < piece ? slot->bytes : piece;
            }
        }
    return got;
}

/* A new block of n slots of sizes[i] bytes, one pinned allocation: claimed
 * into out[0..n) when out is not NULL, else free in the pool (the grower's:
 * a pause between its registration's pieces). false: no budget, or the
 * allocation failed (logged once each). The sizes are multiples of
 * US_STAGING_MIN_SLOT. Laid out largest first, so that a block of powers of
 * two (us_staging_warm's) puts every slot on a multiple of its size: none of
 * 2 MiB or less crosses the end of a registered piece, and a small copy
 * through it stays one call. */
static bool grow_block(const size_t *sizes, unsigned n, struct us_slot **out)
{
    struct block *b = calloc(1, sizeof *b + n * sizeof b->slots[0]);
    if (b == NULL) {
        us_log_once(&logged_oom, US_LOG_WARN, "out of memory for the staging pool's bookkeeping");
        return false;
    }
    size_t total = 0;
    for (unsigned i = 0; i < n; i++)
        total += sizes[i];
    void *mem;
    bool pieced;
    if (!pinned_alloc(total, true, out == NULL, NULL, &mem, &b->owner, &pieced)) {
        free(b);
        return false;
    }
    b->n = n;
    for (unsigned i = 0; i < n; i++) {
        size_t off = 0; /* the slots larger than this one, and those as large before it, come first */
        for (unsigned j = 0; j < n; j++)
            if (sizes[j] > sizes[i] || (sizes[j] == sizes[i] && j < i))
                off += sizes[j];
        b->slots[i] = (struct us_slot){
            .ptr = (char *)mem + off, .bytes = sizes[i], .pending_ctx = -1, .claimed = out != NULL, .pieced = pieced};
        if (out != NULL)
            out[i] = &b->slots[i];
    }
    pthread_mutex_lock(&pool.mu);
    if (pool.tail != NULL)
        pool.tail->next = b;
    else
        pool.head = b;
    pool.tail = b;
    pthread_mutex_unlock(&pool.mu);
    return true;
}

/* One slot of `bytes`, a block of its own. One allocation of an eighth of
 * the copy or less: see staging.h. */
static bool grow(size_t bytes, struct us_slot **out)
{
    return grow_block(&bytes, 1, out);
}

size_t us_staging_inline_budget(size_t copy_bytes)
{
    size_t budget = copy_bytes / US_STAGING_GROW_DIVISOR;
    return budget < US_STAGING_MIN_SLOT ? US_STAGING_MIN_SLOT
           : budget > US_STAGING_INLINE_MAX ? US_STAGING_INLINE_MAX
                                            : budget;
}

/* Claims what is there now, of min_bytes to max_bytes: free slots first
 * (they cost no query), then released ones whose event completed. */
US_HOT static unsigned claim_ready(unsigned want, size_t min_bytes, size_t max_bytes, size_t piece, size_t need,
                            size_t *held, struct us_slot **out)
{
    pthread_mutex_lock(&pool.mu);
    unsigned got = claim_locked(0, want, min_bytes, max_bytes, piece, need, held, out, false);
    got = claim_locked(got, want, min_bytes, max_bytes, piece, need, held, out, true);
    pthread_mutex_unlock(&pool.mu);
    return got;
}

/* Grows the pool by up to `n` slots of `bytes`, claimed into out[got..]
 * (one allocation each, outside the pool's mutex); returns the new count. */
static unsigned grow_inline(unsigned got, unsigned n, size_t bytes, size_t *held, struct us_slot **out)
{
    for (unsigned i = 0; i < n && grow(bytes, out + got); i++) {
        got++;
        *held += bytes;
    }
    return got;
}

/* us_staging_claim with slots of `slot` bytes. */
static unsigned claim_growing(unsigned want, size_t copy_bytes, size_t slot, struct us_slot **out)
{
    if (want > US_STAGING_MAX_CLAIM)
        want = US_STAGING_MAX_CLAIM;
    if (want == 0)
        return 0;
    size_t need = copy_bytes > 0 ? copy_bytes : 1, held = 0;
    unsigned got = claim_ready(want, slot, SIZE_MAX, slot, need, &held, out);
    /* one slot an allocation, each short (staging.h); as many as the copy needs */
    while (got < want && held < need && grow(slot, out + got)) {
        got++;
        held += slot;
    }
    return got;
}

unsigned us_staging_claim(unsigned want, size_t copy_bytes, struct us_slot **out)
{
    return claim_growing(want, copy_bytes, us_staging_grow_bytes(copy_bytes), out);
}

US_HOT unsigned us_staging_claim_for_copy(const struct us_staging_ask *ask, struct us_slot **out, bool *growing)
{
    *growing = false;
    unsigned want = ask->want > US_STAGING_MAX_CLAIM ? US_STAGING_MAX_CLAIM : ask->want;
    if (want == 0)
        return 0;
    size_t slot = us_staging_ask_slot_bytes(ask);
    size_t need = ask->copy_bytes > 0 ? ask->copy_bytes : 1, held = 0;
    unsigned got = claim_ready(want, slot, SIZE_MAX, slot, need, &held, out);
    if (got == want || held >= need)
        return got;
    /* short: the slots of `slot` bytes that would complete the claim */
    size_t missing_slots = (need - held + slot - 1) / slot;
    unsigned missing = missing_slots < want - got ? (unsigned)missing_slots : want - got;
    if (ask->ready_only && got == 0 && !ask->inline_only)
        return 0; /* the caller may have a better way than pinning now (pipeline_d2h.c) */
    size_t budget = us_staging_inline_budget(ask->copy_bytes);
    if ((size_t)missing * slot <= budget)
        return grow_inline(got, missing, slot, &held, out);

    /* Too much to pin inside this call: the grower adds it, and the copy
     * runs with what it has (and, pin_one, pins one slot inline when it has
     * none: a D2H must not go native when it can help it, case C's
     * stream-0 D2H deadlock). The count asked for is of slots available to
     * others: those this copy keeps are not. */
    unsigned inline_now = ask->pin_one && got == 0 ? 1 : 0;
    size_t inline_slot = slot <= budget ? slot : us_staging_slot_bytes_for(budget, 1); /* within the budget */
    unsigned total = got + missing;
    unsigned for_grower = missing - (inline_now && inline_slot == slot ? 1 : 0);
    if (ask->inline_only || !us_grower_request(&us_staging_grower_pool, ask->device, slot, for_grower))
        return grow_inline(got, missing, slot, &held, out); /* no grower thread: as far as the copy needs */
    *growing = true;
    /* Smaller slots, ready now, while the grower works. Smaller than its own
     * only: the grower's, of its own size, may be appearing now, and this
     * call neither waits for nor races them. A D2H takes those that earlier
     * copies of its size pinned inside their call (each such copy had pinned
     * one of its own, and ran slow); a copy that pins none inside the call
     * (an H2D) those of half its own size or more, as the pool's first slots
     * (us_staging_warm) are: it went native instead, and on an H100 the
     * first 14-24 16 MiB H2D of a process took 1.3-2.9 ms each, against 0.7
     * once its 8 MiB slots were there (native: 1.3-1.5). */
    size_t smallest = inline_now ? inline_slot : slot / 2;
    if (got == 0 && smallest < slot)
        got = claim_ready(want, smallest, slot - 1, slot, need, &held, out);
    if (got == 0)
        got = grow_inline(got, inline_now, inline_slot, &held, out);
    if (got > 0) {
        us_log_once(&logged_partial, US_LOG_DEBUG,
                    "a copy runs with %u of the %u staging slots it wants while the pool grows in the background",
                    got, total);
        return got;
    }
    us_log_once(&logged_deferred, US_LOG_INFO,
                "a copy would pin %zu bytes of staging inside the call (over %zu: slower than the native copy); "
                "it goes native while a background thread grows the pool",
                (size_t)missing * slot, budget);
    return 0;
}

bool us_staging_grow_later(const struct us_staging_ask *ask)
{
    if (ask->inline_only)
        return false;
    size_t slot = us_staging_ask_slot_bytes(ask);
    size_t need = ask->copy_bytes > 0 ? ask->copy_bytes : 1;
    size_t slots = (need + slot - 1) / slot;
    unsigned want = ask->want > US_STAGING_MAX_CLAIM ? US_STAGING_MAX_CLAIM : ask->want;
    return us_grower_request(&us_staging_grower_pool, ask->device, slot, slots < want ? (unsigned)slots : want);
}

/* The slots pinned before any copy (us_staging_warm): two of each size
 * from US_STAGING_MIN_SLOT up, doubling, as far as warm_pinned allows (at
 * least the first); ascending, so that a claim, which takes the first fit in
 * the pool's order, finds the smallest of them that fits. Returns the count. */
static unsigned warm_sizes(size_t budget, size_t *sizes, unsigned cap)
{
    unsigned n = 0;
    size_t total = 0;
    for (size_t bytes = US_STAGING_MIN_SLOT; bytes <= us_staging_slot_bytes() && n + 2 <= cap; bytes *= 2)
        for (int twice = 0; twice < 2; twice++)
            if (n == 0 || total + bytes <= budget) {
                sizes[n++] = bytes;
                total += bytes;
            }
    return n;
}

/* One small D2H into the newly pinned block, on a stream of its own, waited
 * for. After the pinning, the process's next DMA was slower, the program's
 * own native copy included; one DMA through the block takes that cost here.
 * On an H200 host, a process's first 4 B pageable cudaMemcpy H2D (16
 * processes each, findings off, tools/bench/firstcall.sh): native
 * 20.4 us, the shim with no slots pinned 25.7, with them 37.2, with them and
 * this DMA 23.7; its first 4 B D2H (rewritten, through a slot) 36.4 -> 26.1
 * (native 29.8). One DMA into the block did as well as one into each slot,
 * or each slot in full; an event recorded and waited for on the new stream
 * did as well for the D2H only, the stream alone nothing. Why the DMA
 * helps is not known (the driver finishing the new mapping on the next DMA
 * is a guess). It reads up to 4 bytes of the program's new allocation and
 * writes nothing of it; 70 us, once, beside the allocation that made the
 * context (200 ms). Any failure: nothing more is tried. */
static void CUDART_CB no_op(void *arg)
{
    (void)arg;
}

/* ... and, where pageable H2D copies are rewritten, one host function that
 * does nothing: the process's first cudaLaunchHostFunc took 230 us on an
 * H100 host (the driver starts the thread that runs them), which a spilled
 * copy (pipeline_h2d.c) paid inside its call. */
static void first_dma(void *slot, const void *device_bytes, size_t size)
{
    const struct us_real_api *real = us_real();
    if (device_bytes == NULL || size == 0)
        return;
    cudaStream_t stream;
    if (real->cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
        return;
    if (us_config()->fix_h2d)
        (void)real->cudaLaunchHostFunc(stream, no_op, NULL);
    if (real->cudaMemcpyAsync(slot, device_bytes, size < 4 ? size : 4, cudaMemcpyDeviceToHost, stream) ==
        cudaSuccess)
        (void)real->cudaStreamSynchronize(stream);
    (void)real->cudaStreamDestroy(stream);
}

void us_staging_warm(const void *device_bytes, size_t size)
{
    static atomic_bool warmed;
    if (atomic_load_explicit(&warmed, memory_order_relaxed) || atomic_exchange(&warmed, true))
        return;
    const struct us_config *cfg = us_config();
    const struct us_real_api *real = us_real();
    if (!cfg->fix || (!cfg->fix_d2h && !cfg->fix_h2d) || us_real_missing_for_rewrite(real) != NULL)
        return;
    if (cfg->fix_h2d) /* as much ordinary memory, faulted in, for the first spills (spill.h) */
        us_spill_reserve(cfg->warm_pinned);
    (void)us_grower_start(); /* the first copy that wants slots finds it running */
    size_t sizes[US_STAGING_MAX_CLAIM];
    size_t budget = cfg->warm_pinned < cfg->pinned_max / 2 ? cfg->warm_pinned : cfg->pinned_max / 2;
    unsigned n = warm_sizes(budget, sizes, US_STAGING_MAX_CLAIM);
    /* the program may be capturing on another thread: relaxed, as the grower */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (real->cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess)
        return;
    us_state_enter();
    struct us_slot *slots[US_STAGING_MAX_CLAIM];
    if (grow_block(sizes, n, slots)) {
        first_dma(slots[0]->ptr, device_bytes, size);
        /* and their events in the current context, where the first copies
         * are likely issued (made on first use there otherwise) */
        const struct us_ctx *here = us_context_this();
        cudaEvent_t event;
        for (unsigned i = 0; i < n && here != NULL; i++)
            (void)us_staging_slot_event(slots[i], here, here, &event);
        us_staging_release(slots, n, NULL);
    }
    us_state_leave();
    real->cudaThreadExchangeStreamCaptureMode(&mode);
    /* more of the spill, in the background; after the block, whose page
     * faults it would slow (16 MiB faulted in in 12.7 ms beside it on an
     * H200 host, against 2-3 ms alone) */
    if (cfg->fix_h2d)
        us_spill_warm_start();
}

unsigned us_staging_missing(size_t slot_bytes, unsigned count)
{
    unsigned available = 0;
    pthread_mutex_lock(&pool.mu);
    for (struct block *b = pool.head; b != NULL && available < count; b = b->next)
        for (unsigned i = 0; i < b->n && available < count; i++)
            if (b->slots[i].bytes >= slot_bytes && available_locked(&b->slots[i], true))
                available++;
    pthread_mutex_unlock(&pool.mu);
    return count - available;
}

const struct us_grower_pool us_staging_grower_pool = {us_staging_missing, us_staging_add_free};

bool us_staging_add_free(size_t slot_bytes)
{
    return grow(slot_bytes, NULL);
}

US_HOT cudaError_t us_staging_slot_event(struct us_slot *slot, const struct us_ctx *in, const struct us_ctx *home,
                                  cudaEvent_t *out)
{
    if (slot->events[in->index] == NULL) {
        cudaError_t err = us_ondevice_event_create_in(in, home, &slot->events[in->index]);
        if (err != cudaSuccess)
            return err;
    }
    *out = slot->events[in->index];
    return cudaSuccess;
}

US_HOT void us_staging_release(struct us_slot *const *slots, unsigned n, const int *pending_ctx)
{
    pthread_mutex_lock(&pool.mu);
    for (unsigned i = 0; i < n; i++) {
        int pending = pending_ctx != NULL ? pending_ctx[i] : -1;
        slots[i]->claimed = false;
        if (pending == US_STAGING_LOST)
            slots[i]->lost = true;
        else
            slots[i]->pending_ctx = pending;
    }
    pthread_mutex_unlock(&pool.mu);
}

/* Under pool.mu: blocks whose memory went with `owner` leave the pool into
 * the retired (a copy still holding one of their slots may write to it). */
static void retire_owned_locked(bool (*owned)(const struct us_pinned_owner *, const void *), const void *arg)
{
    struct block **at = &pool.head, *last = NULL;
    while (*at != NULL) {
        struct block *b = *at;
        if (owned(&b->owner, arg)) {
            *at = b->next;
            b->next = pool.retired;
            pool.retired = b;
            for (unsigned i = 0; i < b->n; i++)
                atomic_fetch_sub(&pinned_bytes, b->slots[i].bytes);
            continue;
        }
        last = b;
        at = &b->next;
    }
    pool.tail = last;
}

static bool owned_by_primary_of(const struct us_pinned_owner *o, const void *device)
{
    return o->ctx == 0 && o->device == *(const int *)device;
}

static bool owned_by_ctx(const struct us_pinned_owner *o, const void *id)
{
    return o->ctx != 0 && o->ctx == *(const uint64_t *)id;
}

void us_staging_forget_device(int device)
{
    if (device < 0 || device >= US_MAX_DEVICES)
        return;
    pthread_mutex_lock(&pool.mu);
    retire_owned_locked(owned_by_primary_of, &device);
    pthread_mutex_unlock(&pool.mu);
}

void us_staging_forget_context(const struct us_ctx *gone)
{
    pthread_mutex_lock(&pool.mu);
    retire_owned_locked(owned_by_ctx, &gone->id);
    for (struct block *b = pool.head; b != NULL; b = b->next)
        for (unsigned i = 0; i < b->n; i++) {
            struct us_slot *slot = &b->slots[i];
            slot->events[gone->index] = NULL; /* went with the context: made again on next use */
            if (slot->pending_ctx == (int)gone->index)
                slot->pending_ctx = -1; /* its work drained or died with the context */
        }
    pthread_mutex_unlock(&pool.mu);
}

void us_staging_reset(void)
{
    us_grower_wait_idle();
    pthread_mutex_lock(&pool.mu);
    /* the bookkeeping goes; the pinned memory is the (fake) runtime's to free */
    for (int list = 0; list < 2; list++) {
        for (struct block *b = list == 0 ? pool.head : pool.retired, *next; b != NULL; b = next) {
            next = b->next;
            free(b);
        }
    }
    pool.head = pool.tail = pool.retired = NULL;
    logged_budget = logged_alloc = logged_register = logged_oom = logged_deferred = logged_partial = 0;
    atomic_store(&slot_bytes_fixed, 0);
    atomic_store(&pinned_bytes, 0);
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_lock(&ring_ahead.mu);
    if (ring_ahead.p != NULL)
        munmap(ring_ahead.p, ring_ahead.bytes);
    ring_ahead.p = NULL;
    pthread_mutex_unlock(&ring_ahead.mu);
    atomic_store(&ring_ahead_asked, false);
    atomic_store(&first_ring_made, false);
}
