/* test_engine_late.c - how busy_engine_d2d turns a probe's timings into
 * "started late": the event pair's excess over what the size explains, and,
 * in a context that competes for the device, the host time to a sync that
 * the stream's GPU time does not explain (the events wait with the copies
 * there). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "summary.h"

#include "engine_late.h"

static void test_lateness_is_what_the_size_does_not_explain(void **state)
{
    (void)state;
    /* 1 MiB: 50 us + 1048576 / 200 ns = about 55 us explained */
    assert_int_equal(us_engine_lateness_ns(0.040, 1 << 20), 0);
    uint64_t late = us_engine_lateness_ns(2.440, 1 << 20);
    assert_true(late > 2380000u && late < 2390000u);
}

static void test_sync_delay_is_the_host_time_the_gpu_time_does_not_explain(void **state)
{
    (void)state;
    uint64_t issued = 1000000000u;
    assert_int_equal(us_engine_sync_delay_ns(issued, issued - 5, 0.0), 0);          /* clock went back */
    assert_int_equal(us_engine_sync_delay_ns(issued, issued + 60000, 0.040), 0);    /* idle: 40 us of work */
    assert_int_equal(us_engine_sync_delay_ns(issued, issued + 5000000, 4.990), 0);  /* busy with its own work */
    /* a 2.44 ms burst whose work took 40 us on the GPU: it waited the rest */
    assert_int_equal(us_engine_sync_delay_ns(issued, issued + 2440000, 0.040), 2350000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lateness_is_what_the_size_does_not_explain),
        cmocka_unit_test(test_sync_delay_is_the_host_time_the_gpu_time_does_not_explain),
    };
    return US_RUN_TESTS("test_engine_late", tests, NULL, NULL);
}
