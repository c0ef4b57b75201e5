/* summary.h - the one closing line every test suite prints, and the only
 * one tests/run-all.sh reads: "<suite>: N passed, M failed" (", K skipped"
 * when some were). For the cmocka programs: US_RUN_TESTS runs the group and
 * prints it; a test that skips calls us_test_skip() instead of cmocka's
 * skip(), so that a skipped test is not counted as passed. */
#ifndef UNSTALL_TEST_SUMMARY_H
#define UNSTALL_TEST_SUMMARY_H

#include <stdio.h>

static int us_tests_skipped;

#define us_test_skip()         \
    do {                       \
        us_tests_skipped++;    \
        skip();                \
    } while (0)

static inline int us_test_summary(const char *suite, size_t total, int failed)
{
    if (failed < 0) { /* the group's setup failed: nothing ran */
        printf("%s: 0 passed, %zu failed\n", suite, total);
        fflush(stdout);
        return 1;
    }
    size_t passed = total - (size_t)failed - (size_t)us_tests_skipped;
    if (us_tests_skipped > 0)
        printf("%s: %zu passed, %d failed, %d skipped\n", suite, passed, failed, us_tests_skipped);
    else
        printf("%s: %zu passed, %d failed\n", suite, passed, failed);
    fflush(stdout); /* a sanitizer's leak check may end the process without flushing it */
    return failed;
}

#define US_RUN_TESTS(suite, tests, setup, teardown)                                                   \
    us_test_summary(suite, sizeof(tests) / sizeof((tests)[0]),                                        \
                    cmocka_run_group_tests_name(suite, tests, setup, teardown))

#endif
