/* test_staging.c - the pinned staging pool: allocated on first need one
 * slot at a time, sized after the copy, portable, bounded by pinned_max,
 * reused, pending slots not claimed until their event completed, failures
 * declined and logged once; growth inside a copy only within its inline
 * budget, the rest by the grower thread (on the copy's device, in relaxed
 * capture mode, topping up to what is available). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "summary.h"

#include "fake_cuda.h"
#include "grower.h"
#include "hostpages.h"
#include "log.h"
#include "real.h"
#include "staging.h"

#define SLOT (64u << 10)

/* A device's primary context (no driver to ask in these tests: one entry
 * per device). */
static const struct us_ctx *ctx_of(int device)
{
    return us_context_primary(device);
}

static int setup(void **state)
{
    (void)state;
    fake_cuda_begin(SLOT, 4, 16 * SLOT);
    return 0;
}

#define MiB ((size_t)1 << 20)

/* Growth follows the copies: slots of an eighth of the copy (64 KiB at least,
 * chunk_bytes at most), one allocation each, no more than the copy needs.
 * Before, the first claim pinned slots x chunk_bytes in one allocation
 * whatever the copy: a 4 KiB copy 4 MiB here (16.8 GB with allowed values),
 * and one call held the driver for all of it. */
static void test_staging_growth_follows_the_copy(void **state)
{
    (void)state;
    fake_cuda_config(MiB, 4, 64 * MiB);
    struct us_slot *s[4], *t[4], *u[4];
    /* a 4 KiB copy: one 64 KiB slot, portable */
    assert_int_equal(us_staging_claim(4, 4096, s), 1);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
    assert_int_equal(fake_cuda.host_alloc_bytes, US_STAGING_MIN_SLOT);
    assert_int_equal(s[0]->bytes, US_STAGING_MIN_SLOT);
    assert_true(fake_cuda.host_alloc_flags & cudaHostAllocPortable);
    s[0]->ptr[US_STAGING_MIN_SLOT - 1] = 1; /* the whole slot is usable */
    us_staging_release(s, 1, NULL);
    /* again: the same slot, no allocation */
    assert_int_equal(us_staging_claim(4, 4096, t), 1);
    assert_ptr_equal(t[0], s[0]);
    us_staging_release(t, 1, NULL);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
    /* 512 KiB: 64 KiB slots; the free one, and 3 new ones up to `want` */
    assert_int_equal(us_staging_claim(4, 512u << 10, t), 4);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 4);
    /* 2 MiB: slots of 256 KiB; the 64 KiB ones are too small to use */
    assert_int_equal(us_staging_claim(2, 2 * MiB, u), 2);
    assert_int_equal(u[0]->bytes, 256u << 10);
    assert_int_equal(u[1]->bytes, 256u << 10);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 6);
    us_staging_release(u, 2, NULL);
    /* 64 MiB: slots of chunk_bytes at most */
    assert_int_equal(us_staging_claim(4, 64 * MiB, u), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(u[i]->bytes, MiB);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 10);
    assert_int_equal(fake_cuda.host_alloc_bytes, 4 * US_STAGING_MIN_SLOT + 2 * (256u << 10) + 4 * MiB);
    assert_int_equal(us_staging_pinned_bytes(), fake_cuda.host_alloc_bytes);
}

static void test_staging_grow_bytes(void **state)
{
    (void)state;
    fake_cuda_config(8 * MiB, 4, 64 * MiB);
    assert_int_equal(us_staging_grow_bytes(0), US_STAGING_MIN_SLOT);
    assert_int_equal(us_staging_grow_bytes(4096), US_STAGING_MIN_SLOT);
    assert_int_equal(us_staging_grow_bytes(MiB), 128u << 10);
    assert_int_equal(us_staging_grow_bytes(MiB + 1), 128u << 10);
    assert_int_equal(us_staging_grow_bytes(8 * MiB), MiB);
    assert_int_equal(us_staging_grow_bytes(64 * MiB), 8 * MiB);
    assert_int_equal(us_staging_grow_bytes((size_t)1 << 40), 8 * MiB);
}

/* The size policy (us_staging_pieces, measured: staging.c): an H2D in one
 * piece, a D2H in halves below 8 MiB and quarters from 8 MiB; slots of a
 * power of two within 64 KiB .. chunk_bytes. */
static void test_staging_pieces_policy(void **state)
{
    (void)state;
    fake_cuda_config(8 * MiB, 4, 64 * MiB);
    assert_int_equal(us_staging_pieces(true, 4096), 1);
    assert_int_equal(us_staging_pieces(true, 64 * MiB), 1);
    assert_int_equal(us_staging_pieces(false, 4), 2);
    assert_int_equal(us_staging_pieces(false, 8 * MiB - 1), 2);
    assert_int_equal(us_staging_pieces(false, 8 * MiB), 4);
    assert_int_equal(us_staging_slot_bytes_for(2 * MiB, 1), 2 * MiB);
    assert_int_equal(us_staging_slot_bytes_for(3 * MiB, 1), 2 * MiB);
    assert_int_equal(us_staging_slot_bytes_for(4 * MiB, 2), 2 * MiB);
    assert_int_equal(us_staging_slot_bytes_for(16 * MiB, 4), 4 * MiB);
    assert_int_equal(us_staging_slot_bytes_for(64 * MiB, 1), 8 * MiB);
    assert_int_equal(us_staging_slot_bytes_for(4096, 2), US_STAGING_MIN_SLOT);
    /* a claim with pieces uses slots of that size: an H2D of 2 MiB, one */
    struct us_slot *s[4];
    bool growing;
    struct us_staging_ask a = {.want = 4, .copy_bytes = 2 * MiB, .device = 0, .pieces = 1};
    assert_int_equal(us_staging_claim_for_copy(&a, s, &growing), 0); /* over the inline budget */
    assert_true(growing);
    us_grower_wait_idle();
    assert_int_equal(us_staging_claim_for_copy(&a, s, &growing), 1);
    assert_int_equal(s[0]->bytes, 2 * MiB);
}

/* A claim stops once its slots hold the whole copy. */
static void test_staging_claim_stops_when_the_copy_fits(void **state)
{
    (void)state;
    fake_cuda_warm_pool(4, SLOT);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 4);
    struct us_slot *s[4];
    assert_int_equal(us_staging_claim(4, SLOT, s), 1);
    us_staging_release(s, 1, NULL);
    assert_int_equal(us_staging_claim(4, 2 * SLOT + 1, s), 3);
    us_staging_release(s, 3, NULL);
    assert_int_equal(us_staging_claim(4, 40 * SLOT, s), 4);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 4);
}

static void test_staging_bounded_by_pinned_max(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 4, 2 * SLOT);
    struct us_slot *s[8], *t[8];
    assert_int_equal(us_staging_claim(4, 8 * SLOT, s), 2); /* what fits */
    assert_int_equal(us_staging_pinned_bytes(), 2 * SLOT);
    /* full: no allocation is even tried, the claimer declines */
    assert_int_equal(us_staging_claim(1, SLOT, t), 0);
    assert_int_equal(us_staging_claim(1, SLOT, t), 0);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 2);
    assert_int_equal(fake_cuda_log_count("pinned_max"), 1); /* once */
}

static void test_staging_pending_slot_waits_for_its_event(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 4, 4 * SLOT);
    fake_cuda_warm_pool(4, SLOT);
    struct us_slot *s[4];
    assert_int_equal(us_staging_claim(1, SLOT, s), 1);
    cudaEvent_t ev;
    assert_int_equal(us_staging_slot_event(s[0], ctx_of(0), ctx_of(0), &ev), cudaSuccess);
    int pending = 0;
    us_staging_release(s, 1, &pending);

    fake_cuda.events_busy = true; /* the GPU still reads it */
    struct us_slot *t[4];
    assert_int_equal(us_staging_claim(4, 4 * SLOT, t), 3);
    for (int i = 0; i < 3; i++)
        assert_ptr_not_equal(t[i], s[0]);
    us_staging_release(t, 3, NULL);

    fake_cuda.events_busy = false; /* done: it is free again */
    assert_int_equal(us_staging_claim(4, 4 * SLOT, t), 4);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 4);
}

static void test_staging_lost_slot_is_never_reused(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 2, 2 * SLOT);
    fake_cuda_warm_pool(2, SLOT);
    struct us_slot *s[2];
    assert_int_equal(us_staging_claim(2, 2 * SLOT, s), 2);
    int pending[2] = {US_STAGING_LOST, -1};
    us_staging_release(s, 2, pending);
    struct us_slot *t[2];
    assert_int_equal(us_staging_claim(2, 2 * SLOT, t), 1);
    assert_ptr_equal(t[0], s[1]);
}

static void test_staging_alloc_failure_declines_and_keeps_budget(void **state)
{
    (void)state;
    fake_cuda_fail(FAKE_cudaHostAlloc, 1, 0, cudaErrorMemoryAllocation);
    struct us_slot *s[2];
    assert_int_equal(us_staging_claim(2, SLOT, s), 0);
    assert_int_equal(us_staging_claim(2, SLOT, s), 0);
    assert_int_equal(us_staging_pinned_bytes(), 0);
    assert_int_equal(fake_cuda_log_count("cudaHostAlloc"), 1);
    void *ring;
    struct us_pinned_owner ring_owner;
    assert_false(us_staging_ring_alloc(SLOT, &ring, &ring_owner));
    fake_cuda_fail(FAKE_cudaHostAlloc, 0, 0, cudaSuccess);
    assert_int_equal(us_staging_claim(2, SLOT, s), 1);
}

static void test_staging_ring_counts_toward_the_budget(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 4, 6 * SLOT);
    void *ring;
    struct us_pinned_owner ring_owner;
    assert_true(us_staging_ring_alloc(4 * SLOT, &ring, &ring_owner));
    assert_int_equal(us_staging_pinned_bytes(), 4 * SLOT);
    assert_false(us_staging_ring_alloc(4 * SLOT, &ring, &ring_owner));
    fake_cuda_warm_pool(4, SLOT);
    assert_int_equal(us_staging_pinned_bytes(), 6 * SLOT); /* 2 slots fit beside the ring */
}

/* A ring faulted in ahead by the grower (us_staging_ring_ahead) is the one
 * the next ring allocation registers, within the same budget; it is asked
 * for once a process, and not at all where the budget could not register
 * it. */
static void test_staging_ring_ahead_is_the_next_ring(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 4, 6 * SLOT);
    us_staging_ring_ahead(0, 4 * SLOT);
    us_grower_wait_idle();
    assert_int_equal(us_staging_ring_ahead_waiting(), 4 * SLOT);
    assert_int_equal(us_staging_pinned_bytes(), 0); /* faulted in, not pinned */
    void *ring;
    struct us_pinned_owner ring_owner;
    assert_true(us_staging_ring_alloc(4 * SLOT, &ring, &ring_owner));
    assert_int_equal(us_staging_ring_ahead_waiting(), 0);
    assert_int_equal(us_staging_pinned_bytes(), 4 * SLOT);
    memset(ring, 7, 4 * SLOT); /* the whole ring is there */
    us_staging_ring_ahead(0, 4 * SLOT); /* asked before: nothing */
    us_grower_wait_idle();
    assert_int_equal(us_staging_ring_ahead_waiting(), 0);
}

/* A lane that made its ring before the grower faulted one in ahead: none is
 * kept waiting for a later lane. */
static void test_staging_ring_ahead_not_after_the_first_ring(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 4, 16 * SLOT);
    void *ring;
    struct us_pinned_owner ring_owner;
    assert_true(us_staging_ring_alloc(4 * SLOT, &ring, &ring_owner));
    us_staging_ring_ahead(0, 4 * SLOT);
    us_grower_wait_idle();
    assert_int_equal(us_staging_ring_ahead_waiting(), 0);
}

static void test_staging_ring_ahead_within_the_budget(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 4, 6 * SLOT);
    us_staging_ring_ahead(0, 8 * SLOT); /* more than pinned_max: not faulted in */
    us_grower_wait_idle();
    assert_int_equal(us_staging_ring_ahead_waiting(), 0);
}

/* The pool's own pinned memory leaves the pages the runtime called pageable
 * remembered (hostpages.h): it is freshly mapped, so no page the program
 * holds is in it. The fake's cudaHostAlloc forgets them, as the runtime's
 * allocation does through the driver layer's wrapper; a program's
 * allocation, the same call from outside the pool, still does. */
static void test_staging_growth_keeps_pageable_pages_remembered(void **state)
{
    (void)state;
    static char page[4096] __attribute__((aligned(4096)));
    us_hostpages_learn_pageable(page, us_hostpages_generation());
    assert_true(us_hostpages_pageable(page));
    unsigned allocs = fake_cuda_count(FAKE_cudaHostAlloc);
    void *ring;
    struct us_pinned_owner ring_owner;
    assert_true(us_staging_ring_alloc(4 * SLOT, &ring, &ring_owner)); /* a ring */
    struct us_slot *slot[1];
    assert_int_equal(us_staging_claim(1, 4096, slot), 1); /* a slot, grown inside a copy */
    us_staging_release(slot, 1, NULL);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), allocs + 2);
    assert_true(us_hostpages_pageable(page));
    void *program;
    assert_int_equal(us_real()->cudaHostAlloc(&program, 4096, cudaHostAllocDefault), cudaSuccess);
    assert_false(us_hostpages_pageable(page));
}

static void test_staging_slot_event_made_on_its_device(void **state)
{
    (void)state;
    struct us_slot *s[1];
    assert_int_equal(us_staging_claim(1, SLOT, s), 1);
    cudaEvent_t e1, e1again, e0;
    assert_int_equal(us_staging_slot_event(s[0], ctx_of(1), ctx_of(0), &e1), cudaSuccess);
    assert_int_equal(fake_cuda_event_device(e1), 1);
    assert_true(fake_cuda.event_flags & cudaEventDisableTiming);
    int dev = -1;
    assert_int_equal(us_real()->cudaGetDevice(&dev), cudaSuccess);
    assert_int_equal(dev, 0); /* the caller's device is restored */
    assert_int_equal(us_staging_slot_event(s[0], ctx_of(1), ctx_of(0), &e1again), cudaSuccess);
    assert_ptr_equal(e1, e1again); /* made once */
    assert_int_equal(us_staging_slot_event(s[0], ctx_of(0), ctx_of(0), &e0), cudaSuccess);
    assert_int_equal(fake_cuda_event_device(e0), 0);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventCreateWithFlags), 2);
}

/* A context that is gone takes its slot events along: the slots forget
 * them (never destroyed again), are free of its work, and make a new one in
 * the next context at that index. */
static void test_staging_forget_context_drops_its_events(void **state)
{
    (void)state;
    struct us_slot *s[1];
    assert_int_equal(us_staging_claim(1, SLOT, s), 1);
    struct us_ctx created = {.handle = NULL, .id = 99, .index = 9, .device = 0, .primary = true};
    cudaEvent_t ev;
    assert_int_equal(us_staging_slot_event(s[0], &created, &created, &ev), cudaSuccess);
    int pending = (int)created.index;
    us_staging_release(s, 1, &pending);
    unsigned destroyed = fake_cuda_count(FAKE_cudaEventDestroy);
    us_staging_forget_context(&created);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventDestroy), destroyed);
    assert_int_equal(us_staging_claim(1, SLOT, s), 1); /* free again without a query of the dead event */
    assert_null(s[0]->events[created.index]);
    cudaEvent_t fresh;
    assert_int_equal(us_staging_slot_event(s[0], &created, &created, &fresh), cudaSuccess);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventCreateWithFlags), 2);
    us_staging_release(s, 1, NULL);
}

/* Several threads claim and release at once: a slot is never held twice. */
static atomic_int holders[16];
static struct us_slot *all_slots[8];

static size_t slot_index(const struct us_slot *slot)
{
    for (size_t i = 0; i < 8; i++)
        if (all_slots[i] == slot)
            return i;
    return 15; /* not one of the pool's: counted apart */
}

static void *claimer(void *arg)
{
    (void)arg;
    for (int round = 0; round < 2000; round++) {
        struct us_slot *s[3];
        unsigned n = us_staging_claim(3, 3 * SLOT, s);
        for (unsigned i = 0; i < n; i++)
            if (atomic_fetch_add(&holders[slot_index(s[i])], 1) != 0)
                return (void *)1;
        for (unsigned i = 0; i < n; i++)
            atomic_fetch_sub(&holders[slot_index(s[i])], 1);
        us_staging_release(s, n, NULL);
    }
    return NULL;
}

static void test_staging_concurrent_claims_are_exclusive(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 8, 8 * SLOT); /* 8 slots at most: no CUDA call while threads run */
    fake_cuda_warm_pool(8, SLOT);
    assert_int_equal(us_staging_claim(8, 8 * SLOT, all_slots), 8);
    us_staging_release(all_slots, 8, NULL);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, claimer, NULL);
    for (int i = 0; i < 4; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        assert_null(ret);
    }
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 8);
}

/* --- first use: growth off the copy's thread (contract.md §4) ------------------------- */

static void test_staging_inline_budget(void **state)
{
    (void)state;
    assert_int_equal(us_staging_inline_budget(0), US_STAGING_MIN_SLOT);
    assert_int_equal(us_staging_inline_budget(4), US_STAGING_MIN_SLOT);
    assert_int_equal(us_staging_inline_budget(MiB), 128u << 10);
    assert_int_equal(us_staging_inline_budget(8 * MiB), MiB);
    assert_int_equal(us_staging_inline_budget(64 * MiB), US_STAGING_INLINE_MAX);
    assert_int_equal(US_STAGING_INLINE_MAX, MiB);
}

/* cudaHostAlloc calls so far: on this thread, and on others (the grower). */
static void host_allocs(unsigned *here, unsigned *elsewhere, size_t *largest_here)
{
    *here = *elsewhere = 0;
    *largest_here = 0;
    for (size_t i = 0; i < fake_cuda.ncalls; i++) {
        const struct fake_cuda_call *c = &fake_cuda.calls[i];
        if (c->fn != FAKE_cudaHostAlloc)
            continue;
        if (pthread_equal(c->thread, pthread_self())) {
            ++*here;
            if (c->bytes > *largest_here)
                *largest_here = c->bytes;
        } else {
            ++*elsewhere;
        }
    }
}

/* A copy's claim, in slots of an eighth of it (pieces 0); pin_one: a D2H's,
 * which pins one slot here rather than go native when it finds none. */
static unsigned ask(unsigned want, size_t bytes, int device, bool pin_one, struct us_slot **out, bool *growing)
{
    struct us_staging_ask a = {.want = want, .copy_bytes = bytes, .device = device, .pin_one = pin_one};
    return us_staging_claim_for_copy(&a, out, growing);
}

/* An H2D's claim (pipeline_h2d.c): it cycles through the slots that are
 * ready, pinning nothing inside the call past its budget, and goes native
 * only with none ready. Before, it went native until every slot it wanted was
 * there: on an H100 a 256 MiB cudaMemcpy repeated 16 times went native every
 * time, its native copies holding the driver the grower's registrations
 * wait for. */
static void test_staging_h2d_runs_with_the_ready_slots(void **state)
{
    (void)state;
    fake_cuda_config(8 * MiB, 4, 1024 * MiB);
    struct us_slot *s[US_STAGING_MAX_CLAIM];
    bool growing = false;
    struct us_staging_ask h2d = {.want = 64, .copy_bytes = 64 * MiB, .device = 0, .pieces = 1};
    /* none ready: none, nothing pinned here, the grower asked */
    assert_int_equal(us_staging_claim_for_copy(&h2d, s, &growing), 0);
    assert_true(growing);
    us_grower_wait_idle();
    unsigned here, elsewhere;
    size_t largest;
    host_allocs(&here, &elsewhere, &largest);
    assert_int_equal(here, 0);
    assert_int_equal(elsewhere, 8);
    /* a larger copy finds 8 of its 32 slots: it runs with them, the grower adds the rest */
    h2d.copy_bytes = 256 * MiB;
    assert_int_equal(us_staging_claim_for_copy(&h2d, s, &growing), 8);
    assert_true(growing);
    us_grower_wait_idle();
    host_allocs(&here, &elsewhere, &largest);
    assert_int_equal(here, 0);
    assert_int_equal(elsewhere, 32);
    us_staging_release(s, 8, NULL);
    assert_int_equal(us_staging_claim_for_copy(&h2d, s, &growing), 32);
    assert_false(growing);
    us_staging_release(s, 32, NULL);
}

/* An H2D that finds none of its own slots ready runs with ready slots of
 * half its own size or more (the pool's first slots, us_staging_warm, or
 * those of a smaller copy) while the grower pins its own, instead of going
 * native: on an H100 the first 14-24 16 MiB H2D of a process took 1.3-2.9
 * ms each that way, against 0.7 once its 8 MiB slots were there. Never
 * smaller than half: a 16 MiB copy through 64 KiB slots would be slower than
 * native. */
static void test_staging_h2d_runs_with_half_size_slots_while_its_own_grow(void **state)
{
    (void)state;
    fake_cuda_config(8 * MiB, 4, 1024 * MiB);
    struct us_slot *s[US_STAGING_MAX_CLAIM];
    bool growing = false;
    struct us_staging_ask h2d = {.want = 64, .copy_bytes = 16 * MiB, .device = 0, .pieces = 1};
    /* a pool of a 2 MiB slot and a 4 MiB one, free */
    assert_true(us_staging_add_free(2 * MiB));
    assert_true(us_staging_add_free(4 * MiB));
    unsigned before = fake_cuda_count(FAKE_cudaHostAlloc);
    /* a 16 MiB copy wants 8 MiB slots: none; it takes the 4 MiB one, not the 2 MiB one */
    assert_int_equal(us_staging_claim_for_copy(&h2d, s, &growing), 1);
    assert_true(growing);
    assert_int_equal(s[0]->bytes, 4 * MiB);
    us_staging_release(s, 1, NULL);
    us_grower_wait_idle();
    assert_true(fake_cuda_count(FAKE_cudaHostAlloc) > before); /* its own 8 MiB slots, by the grower */
    /* a 64 MiB copy (8 MiB slots, as the 16 MiB one's) finds those */
    h2d.copy_bytes = 64 * MiB;
    assert_true(us_staging_claim_for_copy(&h2d, s, &growing) >= 1);
    assert_int_equal(s[0]->bytes, 8 * MiB);
}

/* A copy whose missing slots come to more than its inline budget pins
 * nothing inside the call: it declines (an H2D goes native) and the grower
 * thread pins them, with the copy's stream device current and in relaxed
 * capture mode; the same copy then finds them ready. Before, the first
 * 64 MiB copy pinned 8 slots of 8 MiB inside the call (about 26 ms on an
 * H100, against 8.8 ms for the native copy). */
static void test_staging_large_growth_goes_to_the_grower(void **state)
{
    (void)state;
    fake_cuda_config(8 * MiB, 4, 1024 * MiB);
    struct us_slot *s[US_STAGING_MAX_CLAIM];
    bool growing = false;
    assert_int_equal(ask(64, 64 * MiB, 1, false, s, &growing), 0);
    assert_true(growing);
    us_grower_wait_idle();
    unsigned here, elsewhere;
    size_t largest;
    host_allocs(&here, &elsewhere, &largest);
    assert_int_equal(here, 0);
    assert_int_equal(elsewhere, 8); /* the whole copy, in slots of 8 MiB */
    for (size_t i = 0; i < fake_cuda.ncalls; i++) {
        const struct fake_cuda_call *c = &fake_cuda.calls[i];
        if (c->fn == FAKE_cudaHostAlloc) {
            assert_int_equal(c->bytes, 8 * MiB);
            assert_int_equal(c->device, 1); /* the copy's device: no context on device 0 */
            assert_true(c->relaxed);        /* a program's global capture stays valid */
        }
    }
    assert_int_equal(fake_cuda_log_count("goes native while a background thread grows the pool"), 1);
    int dev = -1;
    assert_int_equal(us_real()->cudaGetDevice(&dev), cudaSuccess);
    assert_int_equal(dev, 0); /* this thread's device untouched */
    /* the next copy of that size finds its slots */
    assert_int_equal(ask(64, 64 * MiB, 1, false, s, &growing), 8);
    assert_false(growing);
    us_staging_release(s, 8, NULL);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 8);
    /* a larger copy runs with the 8 it finds while the grower adds the rest,
     * and logs nothing more */
    assert_int_equal(ask(64, 128 * MiB, 1, false, s, &growing), 8);
    assert_true(growing);
    us_staging_release(s, 8, NULL);
    us_grower_wait_idle();
    assert_int_equal(fake_cuda_log_count("goes native while a background thread grows the pool"), 1);
}

/* A D2H whose own slots the grower has not pinned yet uses the smaller slot
 * that an earlier copy of its size pinned inside its call, free again, rather
 * than pinning one more: each such copy had pinned a slot of its own and ran
 * through it alone, the slow calls of the 2-16 MiB rows' p99 while the pool
 * grew (tools/bench/smallcopy.sh on an H100). Here pinned_max (2 MiB) holds
 * the 1 MiB inline slot but none of the grower's 8 MiB ones, so the copy's
 * own slots never come, whichever thread allocates first. */
static void test_staging_partial_claim_reuses_the_inline_slot(void **state)
{
    (void)state;
    fake_cuda_config(8 * MiB, 4, 2 * MiB);
    struct us_slot *s[4];
    bool growing = false;
    assert_int_equal(ask(4, 64 * MiB, 0, true, s, &growing), 1);
    assert_true(growing);
    assert_int_equal(s[0]->bytes, US_STAGING_INLINE_MAX);
    struct us_slot *first = s[0];
    us_grower_wait_idle();
    us_staging_release(s, 1, NULL);
    assert_int_equal(ask(4, 64 * MiB, 0, true, s, &growing), 1); /* pinning one more would be over pinned_max */
    assert_true(growing);
    assert_ptr_equal(s[0], first);
    us_staging_release(s, 1, NULL);
    us_grower_wait_idle();
}

/* A D2H runs with fewer slots than it wants: one pinned inside the call when
 * it has none, within the budget (a D2H is rewritten from its first use: a
 * native one can deadlock behind another thread's launch), the rest from the
 * grower. Before, a first 1 MiB D2H pinned 4 slots of 128 KiB inside the
 * call. */
static void test_staging_partial_claim_pins_one_slot_inline(void **state)
{
    (void)state;
    fake_cuda_config(8 * MiB, 4, 1024 * MiB);
    struct us_slot *s[4];
    bool growing = false;
    assert_int_equal(ask(4, MiB, 0, true, s, &growing), 1);
    assert_true(growing);
    assert_int_equal(s[0]->bytes, 128u << 10);
    us_grower_wait_idle();
    unsigned here, elsewhere;
    size_t largest;
    host_allocs(&here, &elsewhere, &largest);
    assert_int_equal(here, 1);
    assert_int_equal(largest, 128u << 10);
    assert_int_equal(elsewhere, 3); /* the copy holds one: three more make its four */
    us_staging_release(s, 1, NULL);
    assert_int_equal(ask(4, MiB, 0, true, s, &growing), 4);
    assert_false(growing);
    us_staging_release(s, 4, NULL);
    /* a D2H whose slots are over its inline budget: one slot of the budget
     * inside the call (rewritten from its first use, never native: a native
     * D2H can deadlock a program), its own slots from the grower */
    assert_int_equal(ask(4, 64 * MiB, 0, true, s, &growing), 1);
    assert_true(growing);
    assert_int_equal(s[0]->bytes, US_STAGING_INLINE_MAX);
    assert_int_equal(fake_cuda_log_count("goes native while a background thread grows the pool"), 0);
    us_grower_wait_idle();
    host_allocs(&here, &elsewhere, &largest);
    assert_int_equal(here, 2); /* since the test began */
    assert_int_equal(largest, US_STAGING_INLINE_MAX);
    assert_int_equal(elsewhere, 7); /* four of 8 MiB: the small one is not one of its slots */
    us_staging_release(s, 1, NULL);
    assert_int_equal(ask(4, 64 * MiB, 0, true, s, &growing), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(s[i]->bytes, 8 * MiB);
}

/* Small growth stays inside the call, and asks the grower for nothing. */
static void test_staging_small_growth_stays_inline(void **state)
{
    (void)state;
    fake_cuda_config(8 * MiB, 4, 1024 * MiB);
    unsigned long requests = us_grower_requests_done();
    struct us_slot *s[4];
    bool growing = true;
    assert_int_equal(ask(4, 4096, 0, false, s, &growing), 1);
    assert_false(growing);
    assert_int_equal(s[0]->bytes, US_STAGING_MIN_SLOT);
    us_staging_release(s, 1, NULL);
    /* 4 MiB: 512 KiB slots, its budget one of them: one missing is pinned here */
    assert_int_equal(ask(1, 4 * MiB, 0, false, s, &growing), 1);
    assert_false(growing);
    us_grower_wait_idle();
    assert_int_equal(us_grower_requests_done(), requests);
    unsigned here, elsewhere;
    size_t largest;
    host_allocs(&here, &elsewhere, &largest);
    assert_int_equal(here, 2);
    assert_int_equal(elsewhere, 0);
}

/* The grower counts what is available when it works a request: the same
 * request twice adds the slots once; slots another copy holds, or whose GPU
 * work is pending, do not count, so concurrent copies each get theirs. */
static void test_staging_grower_tops_up_to_what_is_available(void **state)
{
    (void)state;
    fake_cuda_config(8 * MiB, 4, 1024 * MiB);
    struct us_slot *s[US_STAGING_MAX_CLAIM], *t[US_STAGING_MAX_CLAIM];
    bool growing;
    assert_int_equal(ask(64, 16 * MiB, 0, false, s, &growing), 0);
    us_grower_wait_idle();
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 8); /* 8 slots of 2 MiB */
    assert_true(us_grower_request(&us_staging_grower_pool, 0, 2 * MiB, 8)); /* asked again: they are there */
    us_grower_wait_idle();
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 8);
    assert_int_equal(ask(64, 16 * MiB, 0, false, s, &growing), 8);
    /* held by this copy: another one of that size gets its own */
    assert_int_equal(ask(64, 16 * MiB, 0, false, t, &growing), 0);
    us_grower_wait_idle();
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 16);
    assert_int_equal(ask(64, 16 * MiB, 0, false, t, &growing), 8);
    /* released with their work pending: not available either */
    int pending[US_STAGING_MAX_CLAIM];
    for (int i = 0; i < 8; i++) {
        cudaEvent_t ev;
        assert_int_equal(us_staging_slot_event(s[i], ctx_of(0), ctx_of(0), &ev), cudaSuccess);
        pending[i] = 0;
    }
    us_staging_release(s, 8, pending);
    fake_cuda.events_busy = true;
    assert_int_equal(ask(64, 16 * MiB, 0, false, s, &growing), 0);
    us_grower_wait_idle();
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 24);
    us_staging_release(t, 8, NULL);
}

/* The first device allocation pins the first copies' slots in one block
 * (us_staging_warm): two of each size from 64 KiB up, doubling, within
 * warm_pinned (16 MiB: 64 KiB to 4 MiB). Measured on an H100 before: while
 * the grower pinned the slots of the first 2-4 MiB copies one at a time, each
 * registration holding the driver, those copies' worst calls were 2-6 times
 * native's. A claim takes the first fit in the pool's order, ascending here,
 * so the smallest slots that fit. Once per process: the only test calling it. */
static void test_staging_warm_pins_the_ladder_in_one_block(void **state)
{
    (void)state;
    fake_cuda_config(8 * MiB, 4, 1024 * MiB);
    static char device_bytes[64] = "the program's new allocation";
    us_staging_warm(device_bytes, sizeof device_bytes);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
    /* one DMA of 4 bytes from the program's allocation into the block's
     * first slot, on a non-blocking stream of its own, waited for, the
     * stream destroyed; the allocation is not written */
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 1);
    const struct fake_cuda_call *dma = &fake_cuda.calls[fake_cuda_find(FAKE_cudaMemcpyAsync, 0)];
    assert_ptr_equal(dma->src, device_bytes);
    assert_int_equal(dma->bytes, 4);
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamCreateWithFlags), 1);
    assert_int_equal(fake_cuda.stream_flags, cudaStreamNonBlocking);
    int sync = fake_cuda_find(FAKE_cudaStreamSynchronize, 0);
    int destroy = fake_cuda_find(FAKE_cudaStreamDestroy, 0);
    assert_true(sync > fake_cuda_find(FAKE_cudaMemcpyAsync, 0) && destroy > sync);
    assert_ptr_equal(fake_cuda.calls[sync].stream, dma->stream);
    assert_ptr_equal(fake_cuda.calls[destroy].stream, dma->stream);
    assert_string_equal(device_bytes, "the program's new allocation");
    size_t ladder = 2 * (US_STAGING_MIN_SLOT * 127); /* 64 KiB + 128 KiB + ... + 4 MiB, twice */
    assert_int_equal(fake_cuda.host_alloc_bytes, ladder);
    assert_int_equal(us_staging_pinned_bytes(), ladder);
    /* a 1 MiB copy's eighths: the first four slots of 128 KiB or more, ready */
    struct us_slot *s[US_STAGING_MAX_CLAIM];
    bool growing;
    assert_int_equal(ask(4, MiB, 0, true, s, &growing), 4);
    assert_false(growing);
    assert_int_equal(s[0]->bytes, 2 * US_STAGING_MIN_SLOT);
    assert_int_equal(s[1]->bytes, 2 * US_STAGING_MIN_SLOT);
    assert_int_equal(s[2]->bytes, 4 * US_STAGING_MIN_SLOT);
    assert_int_equal(s[3]->bytes, 4 * US_STAGING_MIN_SLOT);
    /* carved from one block, none overlapping, laid out largest first: each
     * slot at a multiple of its size from the block's start, so that none of
     * 2 MiB or less crosses the end of a registered piece
     * (US_STAGING_PIN_PIECE); for powers of two, any two slots lie a
     * multiple of the smaller one's size apart */
    for (unsigned i = 0; i < 4; i++)
        for (unsigned j = 0; j < 4; j++) {
            size_t smaller = s[i]->bytes < s[j]->bytes ? s[i]->bytes : s[j]->bytes;
            assert_true(i == j || s[i]->ptr + s[i]->bytes <= s[j]->ptr || s[j]->ptr + s[j]->bytes <= s[i]->ptr);
            assert_int_equal((size_t)(s[i]->ptr > s[j]->ptr ? s[i]->ptr - s[j]->ptr : s[j]->ptr - s[i]->ptr) % smaller,
                             0);
        }
    assert_true(s[2]->ptr < s[0]->ptr); /* larger first */
    for (unsigned i = 0; i < 4; i++) /* the DMA went into one of the 64 KiB slots, not these */
        assert_true((const char *)dma->dst + 4 <= s[i]->ptr || (const char *)dma->dst >= s[i]->ptr + s[i]->bytes);
    assert_memory_equal(dma->dst, device_bytes, 4);
    us_staging_release(s, 4, NULL);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
}

static void test_staging_grower_respects_pinned_max(void **state)
{
    (void)state;
    fake_cuda_config(8 * MiB, 4, 24 * MiB);
    struct us_slot *s[US_STAGING_MAX_CLAIM];
    bool growing;
    assert_int_equal(ask(64, 64 * MiB, 0, false, s, &growing), 0);
    us_grower_wait_idle();
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 3);
    assert_int_equal(us_staging_pinned_bytes(), 24 * MiB);
    assert_int_equal(fake_cuda_log_count("pinned_max"), 1);
    /* what the pool holds serves the copies it can hold: one of three pieces
     * (its own slots are 64 KiB; a larger one counts as one piece) */
    assert_int_equal(ask(64, 3 * US_STAGING_MIN_SLOT, 0, false, s, &growing), 3);
    assert_false(growing);
    us_staging_release(s, 3, NULL);
    /* the larger one runs with the three, and nothing more is pinned */
    assert_int_equal(ask(64, 64 * MiB, 0, false, s, &growing), 3);
    us_staging_release(s, 3, NULL);
    us_grower_wait_idle();
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 3);
}

static void test_staging_grower_failure_is_logged_once(void **state)
{
    (void)state;
    fake_cuda_config(8 * MiB, 4, 1024 * MiB);
    fake_cuda_fail(FAKE_cudaHostAlloc, 1, 0, cudaErrorMemoryAllocation);
    struct us_slot *s[US_STAGING_MAX_CLAIM];
    bool growing;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ask(64, 64 * MiB, 0, false, s, &growing), 0);
        us_grower_wait_idle();
    }
    assert_int_equal(fake_cuda_log_count("cudaHostAlloc"), 1);
    assert_int_equal(us_staging_pinned_bytes(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_staging_growth_follows_the_copy, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_pieces_policy, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_grow_bytes, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_claim_stops_when_the_copy_fits, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_bounded_by_pinned_max, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_pending_slot_waits_for_its_event, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_lost_slot_is_never_reused, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_alloc_failure_declines_and_keeps_budget, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_ring_counts_toward_the_budget, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_growth_keeps_pageable_pages_remembered, setup,
                                        fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_forget_context_drops_its_events, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_slot_event_made_on_its_device, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_concurrent_claims_are_exclusive, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_inline_budget, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_h2d_runs_with_half_size_slots_while_its_own_grow, setup,
                                        fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_large_growth_goes_to_the_grower, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_h2d_runs_with_the_ready_slots, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_partial_claim_pins_one_slot_inline, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_partial_claim_reuses_the_inline_slot, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_small_growth_stays_inline, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_grower_tops_up_to_what_is_available, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_ring_ahead_is_the_next_ring, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_ring_ahead_within_the_budget, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_ring_ahead_not_after_the_first_ring, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_warm_pins_the_ladder_in_one_block, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_grower_respects_pinned_max, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_grower_failure_is_logged_once, setup, fake_cuda_teardown),
    };
    return US_RUN_TESTS("test_staging", tests, NULL, NULL);
}
