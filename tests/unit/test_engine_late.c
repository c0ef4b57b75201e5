/* test_engine_late.c - how busy_engine_d2d turns a probe's timings into
 * "started late": the event pair's excess over what the size explains, and,
 * in a context that competes for the device, the delay before the stream's
 * host function ran (the events wait with the copies there). */
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

static void test_start_delay_counts_only_beyond_a_host_function_round_trip(void **state)
{
    (void)state;
    uint64_t issued = 1000000000u;
    assert_int_equal(us_engine_start_delay_ns(issued, 0), 0);              /* never ran */
    assert_int_equal(us_engine_start_delay_ns(issued, issued - 5), 0);     /* clock before the issue */
    assert_int_equal(us_engine_start_delay_ns(issued, issued + 30000), 0); /* an idle GPU: tens of us */
    /* a 2 ms time slice: what exceeds the 50 us a host function takes */
    assert_int_equal(us_engine_start_delay_ns(issued, issued + 2440000), 2390000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lateness_is_what_the_size_does_not_explain),
        cmocka_unit_test(test_start_delay_counts_only_beyond_a_host_function_round_trip),
    };
    return US_RUN_TESTS("test_engine_late", tests, NULL, NULL);
}
