/* staging.c - see staging.h.
 *
 * The slots live in blocks, one pinned allocation each, in a list that only
 * grows. The budget (pinned_max) is reserved with an atomic before an
 * allocation and given back if it fails, so concurrent growers never
 * overshoot it together. */
#include "staging.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "config.h"
#include "log.h"
#include "pipeline_common.h"
#include "real.h"

struct block {
    struct block *next;
    unsigned n;
    struct us_slot slots[];
};

static struct {
    pthread_mutex_t mu;
    struct block *head, *tail; /* oldest first */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

static atomic_size_t pinned_bytes;
static int logged_budget, logged_alloc, logged_oom;

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

/* `bytes` of portable pinned memory within the budget. */
static bool pinned_alloc(size_t bytes, void **out)
{
    if (!reserve(bytes))
        return false;
    void *p = NULL;
    cudaError_t err = us_real()->cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
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

bool us_staging_ring_alloc(size_t bytes, void **out)
{
    return pinned_alloc(bytes, out);
}

size_t us_staging_pinned_bytes(void)
{
    return atomic_load(&pinned_bytes);
}

/* Fixed at the first use (the pool's slots all have it); an atomic, since
 * every rewritten copy reads it several times. */
static atomic_size_t slot_bytes_fixed;

size_t us_staging_slot_bytes(void)
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
    if (s->pending_device < 0)
        return true;
    if (!query || us_real()->cudaEventQuery(s->events[s->pending_device]) != cudaSuccess)
        return false; /* not done yet, or its stream failed: leave it */
    s->pending_device = -1;
    return true;
}

static unsigned claim_locked(unsigned want, struct us_slot **out, bool query)
{
    unsigned got = 0;
    for (struct block *b = pool.head; b != NULL && got < want; b = b->next)
        for (unsigned i = 0; i < b->n && got < want; i++)
            if (available_locked(&b->slots[i], query)) {
                b->slots[i].claimed = true;
                out[got++] = &b->slots[i];
            }
    return got;
}

/* A new block of at least `need` slots (cfg slots when more), as many as the
 * budget allows; its first `need` slots claimed into out[]. */
static unsigned grow(unsigned need, size_t slot_bytes, struct us_slot **out)
{
    const struct us_config *cfg = us_config();
    size_t n = need > cfg->slots ? need : cfg->slots;
    size_t used = us_staging_pinned_bytes();
    size_t room = used < cfg->pinned_max ? cfg->pinned_max - used : 0;
    if (n * slot_bytes > room && room / slot_bytes >= 1)
        n = room / slot_bytes; /* what is left of the budget, if a slot fits */
    struct block *b = calloc(1, sizeof *b + n * sizeof b->slots[0]);
    if (b == NULL) {
        us_log_once(&logged_oom, US_LOG_WARN, "out of memory for the staging pool's bookkeeping");
        return 0;
    }
    void *mem;
    if (!pinned_alloc(n * slot_bytes, &mem)) {
        free(b);
        return 0;
    }
    b->n = (unsigned)n;
    for (unsigned i = 0; i < b->n; i++) {
        b->slots[i].ptr = (char *)mem + (size_t)i * slot_bytes;
        b->slots[i].pending_device = -1;
    }
    unsigned got = need < b->n ? need : b->n;
    for (unsigned i = 0; i < got; i++) {
        b->slots[i].claimed = true;
        out[i] = &b->slots[i];
    }
    pthread_mutex_lock(&pool.mu);
    if (pool.tail != NULL)
        pool.tail->next = b;
    else
        pool.head = b;
    pool.tail = b;
    pthread_mutex_unlock(&pool.mu);
    return got;
}

unsigned us_staging_claim(unsigned want, struct us_slot **out)
{
    if (want > US_STAGING_MAX_CLAIM)
        want = US_STAGING_MAX_CLAIM;
    size_t slot_bytes = us_staging_slot_bytes();
    pthread_mutex_lock(&pool.mu);
    /* free slots first: they cost no query */
    unsigned got = claim_locked(want, out, false);
    if (got < want)
        got += claim_locked(want - got, out + got, true);
    pthread_mutex_unlock(&pool.mu);
    if (got < want)
        got += grow(want - got, slot_bytes, out + got);
    return got;
}

cudaError_t us_staging_slot_event(struct us_slot *slot, int device, int current, cudaEvent_t *out)
{
    if (slot->events[device] == NULL) {
        cudaError_t err = us_pipe_event_create(device, current, &slot->events[device]);
        if (err != cudaSuccess)
            return err;
    }
    *out = slot->events[device];
    return cudaSuccess;
}

void us_staging_release(struct us_slot *const *slots, unsigned n, const int *pending_device)
{
    pthread_mutex_lock(&pool.mu);
    for (unsigned i = 0; i < n; i++) {
        int pending = pending_device != NULL ? pending_device[i] : -1;
        slots[i]->claimed = false;
        if (pending == US_STAGING_LOST)
            slots[i]->lost = true;
        else
            slots[i]->pending_device = pending;
    }
    pthread_mutex_unlock(&pool.mu);
}

void us_staging_reset(void)
{
    pthread_mutex_lock(&pool.mu);
    /* the bookkeeping goes; the pinned memory is the (fake) runtime's to free */
    for (struct block *b = pool.head, *next; b != NULL; b = next) {
        next = b->next;
        free(b);
    }
    pool.head = pool.tail = NULL;
    atomic_store(&slot_bytes_fixed, 0);
    atomic_store(&pinned_bytes, 0);
    pthread_mutex_unlock(&pool.mu);
}
