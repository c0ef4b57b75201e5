/* test_staging.c - the pinned staging pool: allocated on first need in whole
 * blocks, portable, bounded by pinned_max, reused, pending slots not claimed
 * until their event completed, failures declined and logged once. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_cuda.h"
#include "log.h"
#include "real.h"
#include "staging.h"

#define SLOT (64u << 10)

static int setup(void **state)
{
    (void)state;
    fake_cuda_begin(SLOT, 4, 16 * SLOT);
    return 0;
}

static void test_staging_first_claim_allocates_one_portable_block(void **state)
{
    (void)state;
    struct us_slot *s[4];
    assert_int_equal(us_staging_slot_bytes(), SLOT);
    assert_int_equal(us_staging_claim(2, s), 2);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
    assert_int_equal(fake_cuda.host_alloc_bytes, 4 * SLOT); /* a block of `slots` at least */
    assert_true(fake_cuda.host_alloc_flags & cudaHostAllocPortable);
    assert_int_equal(us_staging_pinned_bytes(), 4 * SLOT);
    assert_ptr_not_equal(s[0]->ptr, s[1]->ptr);
    s[0]->ptr[0] = 1;
    s[1]->ptr[SLOT - 1] = 2; /* the whole slot is usable */

    /* the rest of the block serves the next claims: no new allocation */
    struct us_slot *t[2];
    assert_int_equal(us_staging_claim(2, t), 2);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
    us_staging_release(s, 2, NULL);
    us_staging_release(t, 2, NULL);
    assert_int_equal(us_staging_claim(4, s), 4);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
}

static void test_staging_large_claim_grows_by_what_it_needs(void **state)
{
    (void)state;
    struct us_slot *s[US_STAGING_MAX_CLAIM];
    assert_int_equal(us_staging_claim(10, s), 10);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
    assert_int_equal(fake_cuda.host_alloc_bytes, 10 * SLOT);
    for (int i = 1; i < 10; i++)
        assert_ptr_equal(s[i]->ptr, s[0]->ptr + (size_t)i * SLOT);
}

static void test_staging_bounded_by_pinned_max(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 4, 6 * SLOT);
    struct us_slot *s[8], *t[8];
    assert_int_equal(us_staging_claim(4, s), 4);
    /* only 2 more slots fit: the block is cut to the budget */
    assert_int_equal(us_staging_claim(4, t), 2);
    assert_int_equal(us_staging_pinned_bytes(), 6 * SLOT);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 2);
    /* full: no allocation is even tried, the claimer declines */
    assert_int_equal(us_staging_claim(1, t + 2), 0);
    assert_int_equal(us_staging_claim(1, t + 2), 0);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 2);
    assert_int_equal(fake_cuda_log_count("pinned_max"), 1); /* once */
}

static void test_staging_pending_slot_waits_for_its_event(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 4, 4 * SLOT);
    struct us_slot *s[4];
    assert_int_equal(us_staging_claim(1, s), 1);
    cudaEvent_t ev;
    assert_int_equal(us_staging_slot_event(s[0], 0, 0, &ev), cudaSuccess);
    int pending = 0;
    us_staging_release(s, 1, &pending);

    fake_cuda.events_busy = true; /* the GPU still reads it */
    struct us_slot *t[4];
    assert_int_equal(us_staging_claim(4, t), 3);
    for (int i = 0; i < 3; i++)
        assert_ptr_not_equal(t[i], s[0]);
    us_staging_release(t, 3, NULL);

    fake_cuda.events_busy = false; /* done: it is free again */
    assert_int_equal(us_staging_claim(4, t), 4);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
}

static void test_staging_lost_slot_is_never_reused(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 2, 2 * SLOT);
    struct us_slot *s[2];
    assert_int_equal(us_staging_claim(2, s), 2);
    int pending[2] = {US_STAGING_LOST, -1};
    us_staging_release(s, 2, pending);
    struct us_slot *t[2];
    assert_int_equal(us_staging_claim(2, t), 1);
    assert_ptr_equal(t[0], s[1]);
}

static void test_staging_alloc_failure_declines_and_keeps_budget(void **state)
{
    (void)state;
    fake_cuda_fail(FAKE_cudaHostAlloc, 1, 0, cudaErrorMemoryAllocation);
    struct us_slot *s[2];
    assert_int_equal(us_staging_claim(2, s), 0);
    assert_int_equal(us_staging_claim(2, s), 0);
    assert_int_equal(us_staging_pinned_bytes(), 0);
    assert_int_equal(fake_cuda_log_count("cudaHostAlloc"), 1);
    void *ring;
    assert_false(us_staging_ring_alloc(SLOT, &ring));
    fake_cuda_fail(FAKE_cudaHostAlloc, 0, 0, cudaSuccess);
    assert_int_equal(us_staging_claim(2, s), 2);
}

static void test_staging_ring_counts_toward_the_budget(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 4, 6 * SLOT);
    void *ring;
    assert_true(us_staging_ring_alloc(4 * SLOT, &ring));
    assert_int_equal(us_staging_pinned_bytes(), 4 * SLOT);
    assert_false(us_staging_ring_alloc(4 * SLOT, &ring));
    struct us_slot *s[4];
    assert_int_equal(us_staging_claim(4, s), 2);
}

static void test_staging_slot_event_made_on_its_device(void **state)
{
    (void)state;
    struct us_slot *s[1];
    assert_int_equal(us_staging_claim(1, s), 1);
    cudaEvent_t e1, e1again, e0;
    assert_int_equal(us_staging_slot_event(s[0], 1, 0, &e1), cudaSuccess);
    assert_int_equal(fake_cuda_event_device(e1), 1);
    assert_true(fake_cuda.event_flags & cudaEventDisableTiming);
    int dev = -1;
    assert_int_equal(us_real()->cudaGetDevice(&dev), cudaSuccess);
    assert_int_equal(dev, 0); /* the caller's device is restored */
    assert_int_equal(us_staging_slot_event(s[0], 1, 0, &e1again), cudaSuccess);
    assert_ptr_equal(e1, e1again); /* made once */
    assert_int_equal(us_staging_slot_event(s[0], 0, 0, &e0), cudaSuccess);
    assert_int_equal(fake_cuda_event_device(e0), 0);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventCreateWithFlags), 2);
}

/* Several threads claim and release at once: a slot is never held twice. */
static atomic_int holders[16];
static struct us_slot *first_slot;

static void *claimer(void *arg)
{
    (void)arg;
    for (int round = 0; round < 2000; round++) {
        struct us_slot *s[3];
        unsigned n = us_staging_claim(3, s);
        for (unsigned i = 0; i < n; i++) {
            size_t idx = (size_t)(s[i]->ptr - first_slot->ptr) / SLOT;
            if (atomic_fetch_add(&holders[idx], 1) != 0)
                return (void *)1;
        }
        for (unsigned i = 0; i < n; i++) {
            size_t idx = (size_t)(s[i]->ptr - first_slot->ptr) / SLOT;
            atomic_fetch_sub(&holders[idx], 1);
        }
        us_staging_release(s, n, NULL);
    }
    return NULL;
}

static void test_staging_concurrent_claims_are_exclusive(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 8, 8 * SLOT);
    struct us_slot *all[8];
    assert_int_equal(us_staging_claim(8, all), 8); /* one block: no CUDA call while threads run */
    first_slot = all[0];
    us_staging_release(all, 8, NULL);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, claimer, NULL);
    for (int i = 0; i < 4; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        assert_null(ret);
    }
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_staging_first_claim_allocates_one_portable_block, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_large_claim_grows_by_what_it_needs, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_bounded_by_pinned_max, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_pending_slot_waits_for_its_event, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_lost_slot_is_never_reused, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_alloc_failure_declines_and_keeps_budget, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_ring_counts_toward_the_budget, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_slot_event_made_on_its_device, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_staging_concurrent_claims_are_exclusive, setup, fake_cuda_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
