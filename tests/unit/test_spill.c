/* test_spill.c - spill memory: carved from one reserved region, reused once
 * given back, its pages known to be in or not (warmed, written before),
 * bounded by spill_max, carving started over only when nothing is taken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "summary.h"

#include "config.h"
#include "fake_cuda.h"
#include "spill.h"

#define MiB ((size_t)1 << 20)

static void set_spill_max(size_t bytes)
{
    struct us_config cfg = *us_config();
    cfg.spill_max = bytes;
    us_config_set(&cfg);
}

static int setup(void **state)
{
    (void)state;
    fake_cuda_begin(64u << 10, 4, 64 * MiB);
    us_spill_reset();
    set_spill_max(16 * MiB);
    return 0;
}

static int teardown(void **state)
{
    us_spill_reset();
    return fake_cuda_teardown(state);
}

static void test_spill_buffers_are_writable_and_reused_once_given_back(void **state)
{
    (void)state;
    struct us_spill *a, *b;
    assert_true(us_spill_take(3 * MiB + 1, &a));
    assert_true(us_spill_fresh(a)); /* never written */
    memset(us_spill_memory(a), 0x5a, 3 * MiB + 1);
    assert_int_equal((uintptr_t)us_spill_memory(a) % (2 * MiB), 0); /* whole huge pages */
    assert_int_equal(us_spill_taken_bytes(), 4 * MiB);              /* in 2 MiB multiples */
    us_spill_give(a);
    assert_int_equal(us_spill_taken_bytes(), 0);
    assert_true(us_spill_take(2 * MiB, &b));
    assert_ptr_equal(us_spill_memory(b), us_spill_memory(a)); /* the kept one, pages in */
    assert_false(us_spill_fresh(b));
    assert_int_equal(us_spill_carved_bytes(), 4 * MiB);
    us_spill_give(b);
}

/* A buffer of the `warmed` bytes is not fresh, the next one past them is. */
static void assert_warm_up_to(size_t warmed)
{
    struct us_spill *a, *b;
    assert_true(us_spill_take(warmed, &a));
    assert_false(us_spill_fresh(a));
    assert_true(us_spill_take(2 * MiB, &b)); /* past the warmed part */
    assert_true(us_spill_fresh(b));
    us_spill_give(a);
    us_spill_give(b);
}

static void test_spill_warmed_memory_is_not_fresh(void **state)
{
    (void)state;
    us_spill_reserve(4 * MiB);
    assert_warm_up_to(4 * MiB);
}

static void test_spill_bounded_by_spill_max(void **state)
{
    (void)state;
    struct us_spill *a, *b;
    assert_false(us_spill_take(17 * MiB, &a));
    assert_true(us_spill_take(10 * MiB, &a));
    assert_false(us_spill_take(8 * MiB, &b)); /* 10 + 8 > 16, and a is taken */
    assert_int_equal(fake_cuda_log_count("spill_max"), 1);
    assert_false(us_spill_take(8 * MiB, &b));
    assert_int_equal(fake_cuda_log_count("spill_max"), 1); /* logged once */
    us_spill_give(a);
    /* nothing taken: carving starts over, over the pages already in */
    assert_true(us_spill_take(12 * MiB, &b));
    assert_int_equal(us_spill_carved_bytes(), 12 * MiB);
    assert_true(us_spill_fresh(b)); /* its first 10 MiB are in, its last 2 not */
    us_spill_give(b);
}

static void set_spill_warm(size_t bytes)
{
    struct us_config cfg = *us_config();
    cfg.spill_warm = bytes;
    us_config_set(&cfg);
}

static void wait_warmed(void)
{
    for (int i = 0; i < 5000 && us_spill_warming(); i++) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    assert_false(us_spill_warming());
}

/* us_spill_warm_start: once, a thread faults the region in up to
 * spill_warm; a spill there then writes memory already in. Bounded by
 * spill_max; a second call starts nothing. */
static void test_spill_warmed_later_in_the_background(void **state)
{
    (void)state;
    set_spill_warm(6 * MiB);
    us_spill_reserve(2 * MiB);
    assert_int_equal(us_spill_touched_bytes(), 2 * MiB);
    us_spill_warm_start();
    wait_warmed();
    assert_int_equal(us_spill_touched_bytes(), 6 * MiB);
    assert_warm_up_to(6 * MiB);
    set_spill_warm(64 * MiB); /* more than spill_max (16 MiB), and asked again: nothing more */
    us_spill_warm_start();
    assert_false(us_spill_warming());
    assert_int_equal(us_spill_touched_bytes(), 8 * MiB); /* carved */
}

static void test_spill_warming_bounded_and_off(void **state)
{
    (void)state;
    set_spill_warm(64 * MiB);
    us_spill_warm_start();
    wait_warmed();
    assert_int_equal(us_spill_touched_bytes(), 16 * MiB); /* spill_max */
    us_spill_reset();
    set_spill_max(16 * MiB);
    set_spill_warm(0);
    us_spill_warm_start();
    assert_false(us_spill_warming());
    assert_int_equal(us_spill_touched_bytes(), 0);
}

static void test_spill_off_takes_nothing(void **state)
{
    (void)state;
    set_spill_max(0);
    struct us_spill *a;
    assert_false(us_spill_take(MiB, &a));
    us_spill_reserve(MiB); /* nothing to reserve */
    assert_int_equal(us_spill_carved_bytes(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_spill_buffers_are_writable_and_reused_once_given_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spill_warmed_memory_is_not_fresh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spill_bounded_by_spill_max, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spill_off_takes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spill_warmed_later_in_the_background, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spill_warming_bounded_and_off, setup, teardown),
    };
    return US_RUN_TESTS("test_spill", tests, NULL, NULL);
}
