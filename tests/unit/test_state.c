/* test_state.c - whether the shim acts (state.h): a thread already inside
 * the shim passes through, before and after the shim's start. The cases run
 * in order in one process: the start happens once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "summary.h"

#include "lifecycle.h"
#include "state.h"

/* The start maps in the shim's own data (prefault.h): a page of .bss that
 * nothing touched is resident once the shim has started. */
static char untouched_page[4096] __attribute__((aligned(4096)));

static bool untouched_page_resident(void)
{
    unsigned char vec[1];
    assert_int_equal(mincore(untouched_page, sizeof untouched_page, vec), 0);
    return (vec[0] & 1) != 0;
}

/* A re-entry during the start (the configuration loader's own logging, a
 * runtime call from inside the shim) passes through at once: it neither
 * starts the shim nor waits for the start under way on its own thread. */
static void test_state_reentry_before_start_passes_through_without_starting(void **state)
{
    (void)state;
    assert_int_equal(atomic_load(&us_state_bypass), -1);
    assert_false(untouched_page_resident());
    us_state_enter();
    assert_true(us_passthrough());
    us_state_leave();
    assert_int_equal(atomic_load(&us_state_bypass), -1); /* not started */
}

/* The start itself reaches the shim again on its own thread (the start hook
 * here; the configuration loader's logging, a runtime call): that call
 * passes through instead of waiting in pthread_once for the start it is
 * part of. A wait would never end: the alarm fails the test instead. */
static int hook_calls;
static bool hook_saw_passthrough;

static void start_hook_reenters(void)
{
    hook_calls++;
    hook_saw_passthrough = us_passthrough();
}

static void test_state_reentry_during_the_start_passes_through(void **state)
{
    (void)state;
    us_lifecycle_on_start(start_hook_reenters);
    alarm(10);
    assert_false(us_passthrough()); /* starts the shim, which runs the hook */
    alarm(0);
    assert_int_equal(hook_calls, 1);
    assert_true(hook_saw_passthrough);
}

static void test_state_starts_active(void **state)
{
    (void)state;
    assert_false(us_passthrough());
    assert_int_equal(atomic_load(&us_state_bypass), 0);
    assert_true(untouched_page_resident());
}

/* Once started and active, the shim's own calls still pass through. */
static void test_state_reentry_passes_through(void **state)
{
    (void)state;
    us_state_enter();
    assert_true(us_passthrough());
    us_state_enter(); /* nested */
    assert_true(us_passthrough());
    us_state_leave();
    assert_true(us_passthrough());
    us_state_leave();
    assert_false(us_passthrough());
}

static void test_state_notes_the_first_hook(void **state)
{
    (void)state;
    assert_false(us_state_was_hooked());
    us_state_note_call();
    assert_true(us_state_was_hooked());
}

int main(void)
{
    unsetenv("UNSTALL_DISABLE");
    unsetenv("UNSTALL_CONFIG");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_reentry_before_start_passes_through_without_starting),
        cmocka_unit_test(test_state_reentry_during_the_start_passes_through),
        cmocka_unit_test(test_state_starts_active),
        cmocka_unit_test(test_state_reentry_passes_through),
        cmocka_unit_test(test_state_notes_the_first_hook),
    };
    return US_RUN_TESTS("test_state", tests, NULL, NULL);
}
