/* test_device_state.c - peer access pairs, blocking stream counts, legacy use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "summary.h"

#include "device_state.h"

static int reset(void **state)
{
    (void)state;
    us_device_state_reset();
    return 0;
}

static void test_device_peer_either_direction(void **state)
{
    (void)state;
    assert_false(us_device_peer_enabled(0, 1));
    us_device_note_peer(0, 1, true);
    assert_true(us_device_peer_enabled(0, 1));
    assert_true(us_device_peer_enabled(1, 0));
    assert_false(us_device_peer_enabled(0, 2));
    us_device_note_peer(0, 1, false);
    assert_false(us_device_peer_enabled(1, 0));
    us_device_note_peer(63, 62, true);
    assert_true(us_device_peer_enabled(62, 63));
}

static void test_device_out_of_range_is_unknown(void **state)
{
    (void)state;
    us_device_note_peer(-1, 1, true);
    us_device_note_peer(0, US_MAX_DEVICES, true);
    assert_false(us_device_peer_enabled(-1, 1));
    assert_false(us_device_peer_enabled(0, US_MAX_DEVICES));
    us_device_note_stream_created(-1, true);
    assert_int_equal(us_device_blocking_streams(-1), 0);
    assert_false(us_device_note_legacy_use(US_MAX_DEVICES));
}

static void test_device_blocking_stream_count(void **state)
{
    (void)state;
    us_device_note_stream_created(1, false); /* non-blocking: not counted */
    assert_false(us_device_any_blocking_streams());
    us_device_note_stream_created(1, true);
    us_device_note_stream_created(1, true);
    assert_int_equal(us_device_blocking_streams(1), 2);
    assert_true(us_device_any_blocking_streams());
    assert_int_equal(us_device_blocking_streams(0), 0);
    us_device_note_stream_destroyed(1, true);
    us_device_note_stream_destroyed(1, true);
    us_device_note_stream_destroyed(1, true); /* one we never saw created */
    assert_int_equal(us_device_blocking_streams(1), 0);
    assert_false(us_device_any_blocking_streams());
}

static void test_device_legacy_use_noted_once(void **state)
{
    (void)state;
    assert_false(us_device_legacy_used(0));
    assert_true(us_device_note_legacy_use(0));
    assert_false(us_device_note_legacy_use(0));
    assert_true(us_device_legacy_used(0));
    assert_false(us_device_legacy_used(1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_device_peer_either_direction, reset),
        cmocka_unit_test_setup(test_device_out_of_range_is_unknown, reset),
        cmocka_unit_test_setup(test_device_blocking_stream_count, reset),
        cmocka_unit_test_setup(test_device_legacy_use_noted_once, reset),
    };
    return US_RUN_TESTS("test_device_state", tests, NULL, NULL);
}
