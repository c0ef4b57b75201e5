/* test_streams.c - the program's streams remembered at creation, so that
 * destruction needs no runtime query (streams.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "summary.h"

#include "device_state.h"
#include "streams.h"

#define HANDLE(n) ((cudaStream_t)(uintptr_t)(0x1000 * (n)))

static int reset(void **state)
{
    (void)state;
    us_streams_reset();
    us_device_state_reset();
    return 0;
}

static void test_streams_destroy_uncounts_by_handle(void **state)
{
    (void)state;
    us_streams_note_created(HANDLE(1), 1, true);
    us_streams_note_created(HANDLE(2), 1, false);
    us_streams_note_created(HANDLE(3), 0, true);
    assert_int_equal(us_streams_count(), 3);
    assert_int_equal(us_device_blocking_streams(1), 1);
    assert_int_equal(us_device_blocking_streams(0), 1);
    us_streams_note_destroyed(HANDLE(1)); /* device and flags come from the table */
    assert_int_equal(us_device_blocking_streams(1), 0);
    assert_int_equal(us_device_blocking_streams(0), 1);
    us_streams_note_destroyed(HANDLE(2));
    us_streams_note_destroyed(HANDLE(3));
    assert_int_equal(us_streams_count(), 0);
    assert_false(us_device_any_blocking_streams());
}

static void test_streams_unknown_destroy_is_ignored(void **state)
{
    (void)state;
    us_streams_note_created(HANDLE(1), 0, true);
    us_streams_note_destroyed(HANDLE(9)); /* made before the shim loaded */
    us_streams_note_destroyed(HANDLE(1));
    us_streams_note_destroyed(HANDLE(1)); /* twice: the second is unknown */
    assert_int_equal(us_device_blocking_streams(0), 0);
    us_streams_note_created(HANDLE(2), 0, true);
    assert_int_equal(us_device_blocking_streams(0), 1);
}

static void test_streams_reused_handle_replaces(void **state)
{
    (void)state;
    /* the runtime hands out a destroyed handle again; the destroy went
     * around us: the old entry must not count twice */
    us_streams_note_created(HANDLE(4), 0, true);
    us_streams_note_created(HANDLE(4), 1, false);
    assert_int_equal(us_streams_count(), 1);
    assert_int_equal(us_device_blocking_streams(0), 0);
    us_streams_note_destroyed(HANDLE(4));
    assert_false(us_device_any_blocking_streams());
    assert_int_equal(us_streams_count(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_streams_destroy_uncounts_by_handle, reset),
        cmocka_unit_test_setup(test_streams_unknown_destroy_is_ignored, reset),
        cmocka_unit_test_setup(test_streams_reused_handle_replaces, reset),
    };
    return US_RUN_TESTS("test_streams", tests, NULL, NULL);
}
