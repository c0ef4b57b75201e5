/* test_unwinder.c - the stack walk call sites are captured with: the
 * bundled private libunwind copy (its soname, its signal masking answered
 * without a system call), a walk begun inside a walk, a copy under the
 * common soname left as it is. Walk costs: make bench-costs. */
#include <dlfcn.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bundled_unwind.h"
#include "summary.h"

#include "unwinder.h"

static char bundled[PATH_MAX]; /* BUILD/unstall/libunwind.so.8, beside this program's folder */

static bool under_tsan(void)
{
    return dlsym(RTLD_DEFAULT, "__tsan_init") != NULL;
}

static bool find_bundled(void)
{
    return us_bundled_unwind_path(bundled, sizeof bundled) != NULL;
}

static void *walked_from;

/* Each walker is a return address the unwinder meets once: the first walk
 * through it reads its tables, under the locks whose masking is at stake. */
__attribute__((noinline, noclone)) static int walker_a(void **frames, int max)
{
    int n = us_unwind(frames, max);
    walked_from = __builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
    return n;
}

__attribute__((noinline, noclone)) static int walker_b(void **frames, int max)
{
    int n = us_unwind(frames, max);
    __asm__ volatile("" ::: "memory");
    return n;
}

__attribute__((noinline, noclone)) static int walker_c(void **frames, int max)
{
    int n = us_unwind(frames, max);
    __asm__ volatile("" ::: "memory");
    return n;
}

static void test_private_copy_masks_nothing(void **state)
{
    (void)state;
    if (under_tsan() || !find_bundled())
        us_test_skip(); /* TSan: backtrace(3) always; no copy: the build machine has no libunwind */
    us_unwinder_choose_from(bundled);
    assert_int_equal(us_unwinder_kind(), US_UNWINDER_LIBUNWIND_PRIVATE);
    unsigned long before = us_unwinder_masks_skipped();
    void *frames[16];
    int n = walker_a(frames, 16);
    /* the copy masked around its locks while it read walker_a's tables, and
     * the shim answered; the walk is whole: frames[0] in us_unwind, [1] in
     * walker_a, [2] where walker_a returns to here */
    assert_true(us_unwinder_masks_skipped() > before);
    assert_true(n >= 3);
    assert_ptr_equal(frames[2], walked_from);
    /* a known path again (the loop's call site is new on its first turn
     * only): no table read, no mask */
    unsigned long per_turn[3];
    for (int i = 0; i < 3; i++) {
        unsigned long start = us_unwinder_masks_skipped();
        (void)walker_a(frames, 16);
        per_turn[i] = us_unwinder_masks_skipped() - start;
    }
    assert_true(per_turn[0] > 0);
    assert_int_equal(per_turn[1], 0);
    assert_int_equal(per_turn[2], 0);
}

static int nested_frames = -1;

static void walk_inside_walk(void)
{
    void *frames[16];
    if (nested_frames < 0)
        nested_frames = us_unwind(frames, 16);
}

static void test_walk_inside_walk_returns_nothing(void **state)
{
    (void)state;
    if (under_tsan() || !find_bundled())
        us_test_skip();
    us_unwinder_choose_from(bundled);
    assert_int_equal(us_unwinder_kind(), US_UNWINDER_LIBUNWIND_PRIVATE);
    /* a signal handler that walks while the thread is walking, stood in
     * for by the copy's own signal-mask call: it gets no frames (libunwind's
     * locks may be held), and the walk it interrupted is whole */
    alarm(30); /* a walk that re-entered the copy and deadlocked ends the test */
    nested_frames = -1;
    us_unwinder_on_mask_for_test(walk_inside_walk);
    void *frames[16];
    int n = walker_b(frames, 16);
    us_unwinder_on_mask_for_test(NULL);
    alarm(0);
    assert_int_equal(nested_frames, 0);
    assert_true(n >= 3);
    /* and once out, walking works again */
    assert_true(walker_b(frames, 16) >= 3);
}

static void test_copy_under_common_soname_keeps_its_masking(void **state)
{
    (void)state;
    /* no bundled copy: the system's libunwind.so.8 (which the program may
     * share), or backtrace(3) where there is none; never the private kind */
    us_unwinder_choose_from("/nonexistent/unstall/libunwind.so.8");
    enum us_unwinder_kind kind = us_unwinder_kind();
    assert_int_not_equal(kind, US_UNWINDER_LIBUNWIND_PRIVATE);
    if (under_tsan())
        assert_int_equal(kind, US_UNWINDER_BACKTRACE);
    unsigned long before = us_unwinder_masks_skipped();
    void *frames[16];
    assert_true(walker_c(frames, 16) >= 3);
    assert_int_equal(us_unwinder_masks_skipped(), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_private_copy_masks_nothing),
        cmocka_unit_test(test_walk_inside_walk_returns_nothing),
        cmocka_unit_test(test_copy_under_common_soname_keeps_its_masking),
    };
    return US_RUN_TESTS("test_unwinder", tests, NULL, NULL);
}
