/* test_walkmemo.c - a call site captured again from the same frame is taken
 * from the thread's memo only while the stack still holds the walk: the
 * same frames as a walk gives, a different caller at the same stack depth
 * told apart, the self range and depth part of the key, each thread its own. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "summary.h"

#include "callsite.h"
#include "config.h"
#include "unwinder.h"
#include "walkmemo.h"

static struct us_config defaults;

static int setup(void **state)
{
    (void)state;
    us_config_load(&defaults, NULL, NULL, NULL, NULL);
    us_config_set(&defaults);
    us_callsite_set_self_range(0, 0);
    return 0;
}

/* the entry: captures the site of its caller */
__attribute__((noipa)) static void hook(struct us_site *site)
{
    us_site_capture(site);
    __asm__ volatile("" ::: "memory");
}

/* two callers alike, frame for frame (noipa: not folded into one): called
 * from one place, hook's frame, and the capture's, are at the same address
 * whichever calls it */
__attribute__((noipa)) static void via_a(struct us_site *site)
{
    hook(site);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noipa)) static void via_b(struct us_site *site)
{
    hook(site);
    __asm__ volatile("" ::: "memory");
}

/* learning needs libgcc_s's walk (each frame's stack address): where only
 * backtrace(3) is there, every capture walks */
static bool memo_expected(void)
{
#if defined(__x86_64__)
    return us_unwinder_kind() != US_UNWINDER_BACKTRACE;
#else
    return false;
#endif
}

static void same_frames(const struct us_site *a, const struct us_site *b)
{
    assert_int_equal(a->depth, b->depth);
    for (int i = 0; i < a->depth; i++)
        assert_ptr_equal(a->frames[i], b->frames[i]);
}

/* n captures from one call instruction, through via_a, or via_b where
 * pattern[i] says 'b' */
__attribute__((noipa)) static void capture_from_one_place(struct us_site *out, int n, const char *pattern)
{
    for (int i = 0; i < n; i++) {
        void (*via)(struct us_site *) = pattern != NULL && pattern[i] == 'b' ? via_b : via_a;
        via(&out[i]);
    }
}

/* the same from one frame deeper: a key no other test has met */
__attribute__((noipa)) static void capture_from_depth(struct us_site *out, int n)
{
    capture_from_one_place(out, n, NULL);
    __asm__ volatile("" ::: "memory");
}

static void test_walkmemo_repeated_capture_is_remembered(void **state)
{
    (void)state;
    struct us_site s[7];
    unsigned long hits = us_walkmemo_hits(), learnt = us_walkmemo_learnt();
    capture_from_one_place(s, 7, NULL); /* walked, walked and learnt, then remembered */
    for (int i = 1; i < 7; i++)
        same_frames(&s[0], &s[i]);
    assert_true(s[0].depth >= 3);
    if (memo_expected()) {
        assert_int_equal(us_walkmemo_learnt(), learnt + 1);
        assert_int_equal(us_walkmemo_hits(), hits + 5);
    }
}

static void test_walkmemo_tells_callers_at_the_same_depth_apart(void **state)
{
    (void)state;
    struct us_site s[12];
    const char *pattern = "abababaabbab";
    capture_from_one_place(s, 12, pattern);
    /* the one frame that differs: the return into via_a or via_b */
    assert_ptr_not_equal(s[0].frames[1], s[1].frames[1]);
    for (int i = 2; i < 12; i++)
        same_frames(&s[i], &s[pattern[i] == 'a' ? 0 : 1]);
    if (memo_expected())
        assert_true(us_walkmemo_hits() > 0); /* the memo answered, and was right */
}

static void test_walkmemo_key_holds_self_range_and_depth(void **state)
{
    (void)state;
    struct us_site s[4];
    capture_from_one_place(s, 3, NULL); /* remembered with every frame kept */
    /* hook is "the shim": dropped */
    us_callsite_set_self_range((uintptr_t)s[0].frames[0], (uintptr_t)s[0].frames[0] + 1);
    capture_from_one_place(&s[3], 1, NULL);
    assert_ptr_equal(s[3].frames[0], s[0].frames[1]);
    us_callsite_set_self_range(0, 0);
    struct us_config two = defaults;
    two.callsite_depth = 2;
    us_config_set(&two);
    capture_from_one_place(&s[3], 1, NULL);
    assert_int_equal(s[3].depth, 2);
    us_config_set(&defaults);
    capture_from_one_place(&s[3], 1, NULL);
    assert_int_equal(s[3].depth, s[0].depth);
    for (int i = 0; i < 3; i++) /* hook, via_a, capture_from_one_place: then the calls here differ */
        assert_ptr_equal(s[3].frames[i], s[0].frames[i]);
}

static void test_walkmemo_learn_next_learns_at_the_first_miss(void **state)
{
    (void)state;
    struct us_site s[3];
    unsigned long hits = us_walkmemo_hits(), learnt = us_walkmemo_learnt();
    us_callsite_learn_next();
    capture_from_depth(s, 3);
    if (memo_expected()) {
        assert_int_equal(us_walkmemo_learnt(), learnt + 1);
        assert_int_equal(us_walkmemo_hits(), hits + 2); /* the second and third */
    }
    same_frames(&s[0], &s[2]);
}

static void *other_thread(void *arg)
{
    struct us_site *out = arg;
    unsigned long hits = us_walkmemo_hits();
    capture_from_one_place(out, 1, NULL);
    return (void *)(uintptr_t)(us_walkmemo_hits() - hits);
}

static void test_walkmemo_each_thread_its_own(void **state)
{
    (void)state;
    struct us_site here[3], there;
    capture_from_one_place(here, 3, NULL);
    pthread_t t;
    void *hits;
    assert_int_equal(pthread_create(&t, NULL, other_thread, &there), 0);
    assert_int_equal(pthread_join(t, &hits), 0);
    assert_int_equal((uintptr_t)hits, 0); /* its first capture walked */
    assert_ptr_equal(here[0].frames[0], there.frames[0]); /* in hook, as here */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_walkmemo_repeated_capture_is_remembered, setup),
        cmocka_unit_test_setup(test_walkmemo_tells_callers_at_the_same_depth_apart, setup),
        cmocka_unit_test_setup(test_walkmemo_key_holds_self_range_and_depth, setup),
        cmocka_unit_test_setup(test_walkmemo_learn_next_learns_at_the_first_miss, setup),
        cmocka_unit_test_setup(test_walkmemo_each_thread_its_own, setup),
    };
    return US_RUN_TESTS("test_walkmemo", tests, NULL, NULL);
}
