/* test_prefault.c - the object's own data mapped in (prefault.h): pages of
 * .bss no code has touched are resident afterwards, and no byte of .data or
 * .bss changed. Here the object is this test program, which links the core
 * as the shim does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "summary.h"

#include "prefault.h"

#define PAGES 32

/* aligned so that no other variable shares its pages and touches them */
static char untouched[PAGES * 4096] __attribute__((aligned(4096)));
static char written[PAGES * 4096] __attribute__((aligned(4096)));
static int initialised[1024] = {1, 2, 3, [1023] = 1023};

/* how many of the PAGES pages from p are resident */
static int resident_pages(const void *p)
{
    long page = sysconf(_SC_PAGESIZE);
    unsigned char vec[PAGES]; /* pages are 4 KiB or larger */
    size_t pages = (size_t)PAGES * 4096 / (size_t)page;
    if (pages > sizeof vec || mincore((void *)p, pages * (size_t)page, vec) != 0)
        return -1;
    int n = 0;
    for (size_t i = 0; i < pages; i++)
        n += vec[i] & 1;
    return n * (int)(page / 4096);
}

static void test_prefault_maps_in_untouched_data_and_changes_no_byte(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof written; i += 512)
        written[i] = (char)(i / 512 + 1);
    assert_int_equal(resident_pages(untouched), 0); /* the check can fail */
    size_t covered = us_prefault_self();
    assert_true(covered >= sizeof untouched + sizeof written);
    assert_int_equal(resident_pages(untouched), PAGES);
    for (size_t i = 0; i < sizeof untouched; i++)
        if (untouched[i] != 0)
            fail_msg("untouched[%zu] = %d", i, untouched[i]);
    for (size_t i = 0; i < sizeof written; i++)
        if (written[i] != (i % 512 == 0 ? (char)(i / 512 + 1) : 0))
            fail_msg("written[%zu] changed", i);
    assert_int_equal(initialised[0], 1);
    assert_int_equal(initialised[2], 3);
    assert_int_equal(initialised[1023], 1023);
    assert_int_equal(us_prefault_self(), covered); /* again: same range, nothing else */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefault_maps_in_untouched_data_and_changes_no_byte),
    };
    return US_RUN_TESTS("test_prefault", tests, NULL, NULL);
}
