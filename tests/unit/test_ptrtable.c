/* test_ptrtable.c - the table of memory ranges (shim/base/ptrtable.c).
 *
 * Addresses are numbers: the table never touches the memory it describes.
 * What a lookup costs: make bench-costs (tools/bench/costs.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "summary.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ptrtable.h"

#define KiB ((uintptr_t)1 << 10)
#define MiB ((uintptr_t)1 << 20)
#define GiB ((uintptr_t)1 << 30)
#define TiB ((uintptr_t)1 << 40)
#define GRAN (2 * MiB)
#define REGION ((uintptr_t)0x7f0000000000) /* granule- and GiB-aligned */

static int setup(void **state)
{
    (void)state;
    us_ptrtable_clear();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    us_ptrtable_clear();
    return 0;
}

/* addr is inside exactly the range (base, size, kind, device). */
static void expect_hit(uintptr_t addr, uintptr_t base, size_t size, enum us_mem_kind kind, int device)
{
    struct us_range r = { 0 };
    if (!us_ptrtable_lookup(addr, &r))
        fail_msg("lookup(%#lx) missed, expected range %#lx+%#zx", (unsigned long)addr, (unsigned long)base, size);
    assert_int_equal(r.base, base);
    assert_int_equal(r.size, size);
    assert_int_equal(r.kind, kind);
    assert_int_equal(r.device, device);
}

static void expect_miss(uintptr_t addr)
{
    struct us_range r = { .base = 0xdead, .size = 7, .kind = US_MEM_PAGEABLE, .device = 42 };
    if (us_ptrtable_lookup(addr, &r))
        fail_msg("lookup(%#lx) hit range %#lx+%#zx, expected a miss", (unsigned long)addr, (unsigned long)r.base,
                 r.size);
    /* out is left alone on a miss */
    assert_int_equal(r.base, 0xdead);
    assert_int_equal(r.size, 7);
    assert_int_equal(r.kind, US_MEM_PAGEABLE);
    assert_int_equal(r.device, 42);
}

/* Every interesting address of [base, base+size): edges, granule edges. */
static void expect_range(uintptr_t base, size_t size, enum us_mem_kind kind, int device)
{
    uintptr_t last = base + size - 1;
    expect_hit(base, base, size, kind, device);
    expect_hit(base + size / 2, base, size, kind, device);
    expect_hit(last, base, size, kind, device);
    for (uintptr_t g = (base / GRAN + 1) * GRAN; g > base && g <= last && g - base < 64 * GRAN; g += GRAN) {
        expect_hit(g - 1, base, size, kind, device);
        expect_hit(g, base, size, kind, device);
    }
}

static void test_ptrtable_bounds(void **state)
{
    (void)state;
    uintptr_t base = REGION + 3 * GRAN + 100;
    us_ptrtable_insert(base, 1000, US_MEM_DEVICE, 2);
    expect_hit(base, base, 1000, US_MEM_DEVICE, 2);
    expect_hit(base + 500, base, 1000, US_MEM_DEVICE, 2);
    expect_hit(base + 999, base, 1000, US_MEM_DEVICE, 2);
    expect_miss(base + 1000);
    expect_miss(base - 1);
    expect_miss(REGION + 3 * GRAN);
    expect_miss(REGION + 4 * GRAN);
    /* a NULL out is allowed */
    assert_true(us_ptrtable_lookup(base + 1, NULL));
    assert_false(us_ptrtable_lookup(base + 1000, NULL));
}

static void test_ptrtable_spans_granules(void **state)
{
    (void)state;
    uintptr_t base = REGION + GRAN - 4 * KiB;
    size_t size = 3 * GRAN + 8 * KiB; /* touches 5 granules, ends 4 KiB into the 5th */
    us_ptrtable_insert(base, size, US_MEM_PINNED, -1);
    expect_range(base, size, US_MEM_PINNED, -1);
    for (uintptr_t g = REGION + GRAN; g <= REGION + 4 * GRAN; g += GRAN)
        expect_hit(g, base, size, US_MEM_PINNED, -1);
    expect_miss(base - 1);
    expect_miss(base + size);
    expect_miss(REGION + 5 * GRAN - 1);
    expect_miss(REGION + 5 * GRAN);

    /* a granule-aligned range of exactly whole granules */
    uintptr_t b2 = REGION + 16 * GRAN;
    us_ptrtable_insert(b2, 2 * GRAN, US_MEM_DEVICE, 0);
    expect_range(b2, 2 * GRAN, US_MEM_DEVICE, 0);
    expect_miss(b2 - 1);
    expect_miss(b2 + 2 * GRAN);
}

static void test_ptrtable_adjacent(void **state)
{
    (void)state;
    /* a ends mid-granule where b starts; b ends on a granule edge where c starts */
    uintptr_t a = REGION + 10 * GRAN + 512 * KiB;
    uintptr_t b = a + GRAN; /* a covers one granule's worth, straddling an edge */
    uintptr_t c = REGION + 13 * GRAN;
    us_ptrtable_insert(a, b - a, US_MEM_DEVICE, 0);
    us_ptrtable_insert(b, c - b, US_MEM_DEVICE, 1);
    us_ptrtable_insert(c, 4 * KiB, US_MEM_REGISTERED, -1);
    expect_hit(b - 1, a, b - a, US_MEM_DEVICE, 0);
    expect_hit(b, b, c - b, US_MEM_DEVICE, 1);
    expect_hit(c - 1, b, c - b, US_MEM_DEVICE, 1);
    expect_hit(c, c, 4 * KiB, US_MEM_REGISTERED, -1);
    expect_miss(a - 1);
    expect_miss(c + 4 * KiB);
    expect_range(a, b - a, US_MEM_DEVICE, 0);
    expect_range(b, c - b, US_MEM_DEVICE, 1);
}

static void test_ptrtable_shared_granule(void **state)
{
    (void)state;
    uintptr_t g = REGION + 20 * GRAN;
    /* one range comes in from the previous granule, one leaves into the next,
     * four small ones with gaps in between */
    uintptr_t in_base = g - GRAN / 2, in_size = GRAN / 2 + 64 * KiB;
    uintptr_t out_base = g + GRAN - 128 * KiB, out_size = 256 * KiB;
    us_ptrtable_insert(in_base, in_size, US_MEM_PINNED, -1);
    us_ptrtable_insert(out_base, out_size, US_MEM_DEVICE, 3);
    for (int i = 0; i < 4; i++)
        us_ptrtable_insert(g + 256 * KiB + (uintptr_t)i * 256 * KiB, 100 * KiB, US_MEM_DEVICE, i);

    expect_hit(g, in_base, in_size, US_MEM_PINNED, -1);
    expect_hit(g + 64 * KiB - 1, in_base, in_size, US_MEM_PINNED, -1);
    expect_miss(g + 64 * KiB);
    for (int i = 0; i < 4; i++) {
        uintptr_t b = g + 256 * KiB + (uintptr_t)i * 256 * KiB;
        expect_miss(b - 1);
        expect_hit(b, b, 100 * KiB, US_MEM_DEVICE, i);
        expect_hit(b + 100 * KiB - 1, b, 100 * KiB, US_MEM_DEVICE, i);
        expect_miss(b + 100 * KiB);
    }
    expect_miss(out_base - 1);
    expect_hit(out_base, out_base, out_size, US_MEM_DEVICE, 3);
    expect_hit(g + GRAN, out_base, out_size, US_MEM_DEVICE, 3);
    expect_miss(out_base + out_size);
}

static void test_ptrtable_replace(void **state)
{
    (void)state;
    uintptr_t base = REGION + 30 * GRAN + 4 * KiB;
    us_ptrtable_insert(base, 3 * GRAN, US_MEM_DEVICE, 0);
    us_ptrtable_insert(base, 100, US_MEM_PINNED, -1);
    expect_hit(base, base, 100, US_MEM_PINNED, -1);
    expect_hit(base + 99, base, 100, US_MEM_PINNED, -1);
    expect_miss(base + 100);
    expect_miss(base + GRAN);
    expect_miss(base + 3 * GRAN - 1);

    /* grow again: the new far granules are known */
    us_ptrtable_insert(base, 5 * GRAN, US_MEM_REGISTERED, -1);
    expect_range(base, 5 * GRAN, US_MEM_REGISTERED, -1);

    struct us_range r;
    assert_true(us_ptrtable_remove(base, &r));
    assert_int_equal(r.base, base);
    assert_int_equal(r.size, 5 * GRAN);
    assert_int_equal(r.kind, US_MEM_REGISTERED);
    assert_int_equal(r.device, -1);
    assert_false(us_ptrtable_remove(base, NULL)); /* replaced, not stacked */
    expect_miss(base);
}

/* A new range over part of an old one with another base: the old one was
 * released unseen; it is dropped whole. */
static void test_ptrtable_overlap_evicts(void **state)
{
    (void)state;
    uintptr_t a = REGION + 40 * GRAN, a_size = 3 * GRAN;
    uintptr_t b = a + 2 * GRAN + 4 * KiB, b_size = GRAN;
    uintptr_t n = a + 8 * GRAN; /* a neighbour that must survive */
    us_ptrtable_insert(a, a_size, US_MEM_DEVICE, 0);
    us_ptrtable_insert(n, 4 * KiB, US_MEM_DEVICE, 0);
    us_ptrtable_insert(b, b_size, US_MEM_DEVICE, 1);
    expect_miss(a);
    expect_miss(a + GRAN);
    expect_miss(b - 1);
    expect_range(b, b_size, US_MEM_DEVICE, 1);
    assert_false(us_ptrtable_remove(a, NULL));
    expect_hit(n, n, 4 * KiB, US_MEM_DEVICE, 0);

    /* one range covering several small ones drops them all */
    uintptr_t s = REGION + 60 * GRAN;
    for (int i = 0; i < 8; i++)
        us_ptrtable_insert(s + (uintptr_t)i * 512 * KiB, 4 * KiB, US_MEM_PINNED, -1);
    us_ptrtable_insert(s + 600 * KiB, 3 * MiB, US_MEM_REGISTERED, -1);
    expect_hit(s, s, 4 * KiB, US_MEM_PINNED, -1);
    expect_hit(s + 512 * KiB, s + 512 * KiB, 4 * KiB, US_MEM_PINNED, -1);
    for (int i = 2; i < 8; i++)
        assert_false(us_ptrtable_remove(s + (uintptr_t)i * 512 * KiB, NULL));
    expect_hit(s + 1024 * KiB, s + 600 * KiB, 3 * MiB, US_MEM_REGISTERED, -1);
}

static void test_ptrtable_remove(void **state)
{
    (void)state;
    uintptr_t g = REGION + 70 * GRAN;
    uintptr_t left = g - 8 * KiB, left_size = 16 * KiB;      /* shares granule g */
    uintptr_t big = g + 16 * KiB, big_size = 2 * GRAN;        /* spans g..g+2 */
    uintptr_t right = big + big_size, right_size = 4 * KiB;   /* shares granule g+2 */
    us_ptrtable_insert(left, left_size, US_MEM_PINNED, -1);
    us_ptrtable_insert(big, big_size, US_MEM_DEVICE, 5);
    us_ptrtable_insert(right, right_size, US_MEM_DEVICE, 6);

    struct us_range r;
    assert_true(us_ptrtable_remove(big, &r));
    assert_int_equal(r.base, big);
    assert_int_equal(r.size, big_size);
    assert_int_equal(r.kind, US_MEM_DEVICE);
    assert_int_equal(r.device, 5);
    expect_miss(big);
    expect_miss(big + GRAN);
    expect_miss(big + big_size - 1);
    expect_range(left, left_size, US_MEM_PINNED, -1);
    expect_range(right, right_size, US_MEM_DEVICE, 6);

    assert_true(us_ptrtable_remove(left, NULL));
    assert_true(us_ptrtable_remove(right, NULL));
    expect_miss(left);
    expect_miss(right);

    /* the table is usable after its granules emptied */
    us_ptrtable_insert(big, big_size, US_MEM_DEVICE, 7);
    expect_range(big, big_size, US_MEM_DEVICE, 7);
}

static void test_ptrtable_remove_unknown(void **state)
{
    (void)state;
    uintptr_t base = REGION + 80 * GRAN + 4 * KiB;
    struct us_range r = { .base = 1, .size = 2, .kind = US_MEM_MANAGED, .device = 3 };
    assert_false(us_ptrtable_remove(base, &r));
    us_ptrtable_insert(base, 3 * GRAN, US_MEM_DEVICE, 1);
    /* an address inside is not a base */
    assert_false(us_ptrtable_remove(base + 4 * KiB, &r));
    assert_false(us_ptrtable_remove(base + GRAN, &r));
    assert_false(us_ptrtable_remove(base - 4 * KiB, &r));
    assert_int_equal(r.base, 1);
    assert_int_equal(r.size, 2);
    assert_int_equal(r.kind, US_MEM_MANAGED);
    assert_int_equal(r.device, 3);
    expect_range(base, 3 * GRAN, US_MEM_DEVICE, 1);
    assert_true(us_ptrtable_remove(base, NULL));
    assert_false(us_ptrtable_remove(base, NULL));
}

static void test_ptrtable_clear(void **state)
{
    (void)state;
    uintptr_t a = REGION + 90 * GRAN, b = REGION + 100 * GRAN + 12, c = REGION + 64 * GiB + 3 * KiB;
    us_ptrtable_insert(a, 4 * KiB, US_MEM_DEVICE, 0);
    us_ptrtable_insert(b, 7 * GRAN, US_MEM_PINNED, -1);
    us_ptrtable_insert(c, 16 * GiB, US_MEM_REGISTERED, -1); /* coarse level */
    expect_hit(c + 8 * GiB, c, 16 * GiB, US_MEM_REGISTERED, -1);
    us_ptrtable_clear();
    expect_miss(a);
    expect_miss(b + GRAN);
    expect_miss(c);
    expect_miss(c + 8 * GiB);
    assert_false(us_ptrtable_remove(a, NULL));
    assert_false(us_ptrtable_remove(c, NULL));
    us_ptrtable_insert(b, 4 * KiB, US_MEM_DEVICE, 2);
    expect_hit(b, b, 4 * KiB, US_MEM_DEVICE, 2);
    us_ptrtable_clear();
    us_ptrtable_clear(); /* twice, and on an empty table */
    expect_miss(b);
}

/* Ranges over 4 GiB live on the 1 GiB level: same answers. */
static void test_ptrtable_large_ranges(void **state)
{
    (void)state;
    uintptr_t dev = REGION + 128 * GiB + 6 * MiB + 512; /* neither granule nor GiB aligned */
    size_t dev_size = 80 * GiB + 123;
    uintptr_t host = REGION + 1 * TiB; /* a 1 TiB registration */
    size_t host_size = 1 * TiB;
    us_ptrtable_insert(dev, dev_size, US_MEM_DEVICE, 1);
    us_ptrtable_insert(host, host_size, US_MEM_REGISTERED, -1);
    /* a small range right after the big one, in the same 1 GiB and 2 MiB granule */
    uintptr_t after = dev + dev_size;
    us_ptrtable_insert(after, 4 * KiB, US_MEM_PINNED, -1);

    expect_range(dev, dev_size, US_MEM_DEVICE, 1);
    for (uintptr_t g = (dev / GiB + 1) * GiB; g < dev + dev_size; g += 7 * GiB) {
        expect_hit(g - 1, dev, dev_size, US_MEM_DEVICE, 1);
        expect_hit(g, dev, dev_size, US_MEM_DEVICE, 1);
    }
    expect_miss(dev - 1);
    expect_hit(after, after, 4 * KiB, US_MEM_PINNED, -1);
    expect_miss(after + 4 * KiB);

    expect_range(host, host_size, US_MEM_REGISTERED, -1);
    expect_hit(host + 777 * GiB + 5, host, host_size, US_MEM_REGISTERED, -1);
    expect_miss(host - 1);
    expect_miss(host + host_size);

    /* sizes around the 4 GiB switch between the levels */
    const size_t sizes[] = { 4 * GiB - 1, 4 * GiB, 4 * GiB + 1, 4 * GiB + 2 * MiB + 1 };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uintptr_t b = REGION + 512 * GiB + i * 16 * GiB + 3 * MiB + 17;
        us_ptrtable_insert(b, sizes[i], US_MEM_DEVICE, (int)i);
        expect_range(b, sizes[i], US_MEM_DEVICE, (int)i);
        expect_hit(b + sizes[i] - 1, b, sizes[i], US_MEM_DEVICE, (int)i);
        expect_miss(b + sizes[i]);
        expect_miss(b - 1);
    }

    struct us_range r;
    assert_true(us_ptrtable_remove(dev, &r));
    assert_int_equal(r.size, dev_size);
    expect_miss(dev);
    expect_miss(dev + 40 * GiB);
    expect_hit(after, after, 4 * KiB, US_MEM_PINNED, -1);
    /* a small range where the big one was */
    us_ptrtable_insert(dev + 40 * GiB, 4 * KiB, US_MEM_DEVICE, 0);
    expect_hit(dev + 40 * GiB + 1, dev + 40 * GiB, 4 * KiB, US_MEM_DEVICE, 0);
    expect_miss(dev + 40 * GiB + 4 * KiB);
}

/* Overlap eviction across the two levels. */
static void test_ptrtable_large_overlaps(void **state)
{
    (void)state;
    uintptr_t base = REGION + 2 * TiB;
    for (int i = 0; i < 16; i++)
        us_ptrtable_insert(base + (uintptr_t)i * GiB + 5 * MiB, 4 * KiB, US_MEM_PINNED, -1);
    us_ptrtable_insert(base + 64 * GiB, 4 * KiB, US_MEM_PINNED, -1); /* beyond: survives */
    us_ptrtable_insert(base, 16 * GiB, US_MEM_REGISTERED, -1);
    expect_range(base, 16 * GiB, US_MEM_REGISTERED, -1);
    for (int i = 0; i < 16; i++) {
        expect_hit(base + (uintptr_t)i * GiB + 5 * MiB, base, 16 * GiB, US_MEM_REGISTERED, -1);
        assert_false(us_ptrtable_remove(base + (uintptr_t)i * GiB + 5 * MiB, NULL));
    }
    expect_hit(base + 64 * GiB, base + 64 * GiB, 4 * KiB, US_MEM_PINNED, -1);

    /* a small range inside the big one: the big one was released unseen */
    us_ptrtable_insert(base + 3 * GiB, 4 * KiB, US_MEM_DEVICE, 0);
    expect_miss(base);
    expect_miss(base + 10 * GiB);
    expect_hit(base + 3 * GiB, base + 3 * GiB, 4 * KiB, US_MEM_DEVICE, 0);
    assert_false(us_ptrtable_remove(base, NULL));
}

static void test_ptrtable_odd_sizes(void **state)
{
    (void)state;
    uintptr_t base = REGION + 200 * GRAN;
    us_ptrtable_insert(base, 0, US_MEM_DEVICE, 0); /* empty: not stored */
    expect_miss(base);
    assert_false(us_ptrtable_remove(base, NULL));

    /* a size that wraps past the end of the address space: not stored, and
     * it still replaces the range with its base */
    us_ptrtable_insert(base, 4 * KiB, US_MEM_DEVICE, 0);
    us_ptrtable_insert(base, SIZE_MAX, US_MEM_DEVICE, 0);
    expect_miss(base);
    assert_false(us_ptrtable_remove(base, NULL));

    /* over 64 TiB: not stored (the runtime answers for it) */
    us_ptrtable_insert(base, 65 * TiB, US_MEM_REGISTERED, -1);
    expect_miss(base);
    expect_miss(base + TiB);

    /* one byte, and the very top of the address space */
    us_ptrtable_insert(base + 5, 1, US_MEM_PINNED, -1);
    expect_hit(base + 5, base + 5, 1, US_MEM_PINNED, -1);
    expect_miss(base + 4);
    expect_miss(base + 6);
    uintptr_t top = UINTPTR_MAX - 3 * GRAN + 1;
    us_ptrtable_insert(top, 3 * GRAN, US_MEM_DEVICE, 1);
    expect_range(top, 3 * GRAN, US_MEM_DEVICE, 1);
    expect_hit(UINTPTR_MAX, top, 3 * GRAN, US_MEM_DEVICE, 1);
    expect_miss(top - 1);
    us_ptrtable_insert(0, 4 * KiB, US_MEM_PINNED, -1);
    expect_hit(0, 0, 4 * KiB, US_MEM_PINNED, -1);
    expect_hit(4 * KiB - 1, 0, 4 * KiB, US_MEM_PINNED, -1);
    expect_miss(4 * KiB);
}

/* --- many ranges ----------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

struct layout {
    unsigned n;
    uintptr_t *base;
    size_t *size;
};

/* n ranges from REGION up, sizes 256 B..8 MiB (mostly small), gaps 0..1 MiB
 * (adjacent ranges included). */
static struct layout layout_make(unsigned n, uint64_t seed)
{
    struct layout l = { n, calloc(n, sizeof(uintptr_t)), calloc(n, sizeof(size_t)) };
    assert_non_null(l.base);
    assert_non_null(l.size);
    uintptr_t at = REGION + 4 * TiB;
    for (unsigned i = 0; i < n; i++) {
        uint64_t r = rng_next(&seed);
        size_t size;
        switch (r % 4) {
        case 0: size = 256 + (r >> 8) % (64 * KiB); break;
        case 1: size = 64 * KiB + (r >> 8) % (512 * KiB); break;
        case 2: size = 1 * MiB + (r >> 8) % (2 * MiB); break;
        default: size = (r >> 8) % (8 * MiB) + 1; break;
        }
        uint64_t gap = rng_next(&seed);
        at += (gap % 4 == 0) ? 0 : (gap >> 8) % MiB;
        l.base[i] = at;
        l.size[i] = size;
        at += size;
    }
    return l;
}

static void layout_free(struct layout *l)
{
    free(l->base);
    free(l->size);
}

static enum us_mem_kind kind_of(unsigned i)
{
    return (enum us_mem_kind)(US_MEM_DEVICE + i % 3);
}

static int device_of(unsigned i)
{
    return kind_of(i) == US_MEM_DEVICE ? (int)(i % 8) : -1;
}

static void test_ptrtable_many(void **state)
{
    (void)state;
    struct layout l = layout_make(10000, 0x1234567);
    for (unsigned i = 0; i < l.n; i++)
        us_ptrtable_insert(l.base[i], l.size[i], kind_of(i), device_of(i));
    for (unsigned i = 0; i < l.n; i++) {
        expect_hit(l.base[i], l.base[i], l.size[i], kind_of(i), device_of(i));
        expect_hit(l.base[i] + l.size[i] / 2, l.base[i], l.size[i], kind_of(i), device_of(i));
        expect_hit(l.base[i] + l.size[i] - 1, l.base[i], l.size[i], kind_of(i), device_of(i));
        uintptr_t next = i + 1 < l.n ? l.base[i + 1] : UINTPTR_MAX;
        if (l.base[i] + l.size[i] < next)
            expect_miss(l.base[i] + l.size[i]);
    }
    expect_miss(l.base[0] - 1);
    /* drop every other range */
    for (unsigned i = 0; i < l.n; i += 2) {
        struct us_range r;
        assert_true(us_ptrtable_remove(l.base[i], &r));
        assert_int_equal(r.size, l.size[i]);
    }
    for (unsigned i = 0; i < l.n; i++) {
        if (i % 2 == 0) {
            expect_miss(l.base[i]);
            expect_miss(l.base[i] + l.size[i] - 1);
        } else {
            expect_range(l.base[i], l.size[i], kind_of(i), device_of(i));
        }
    }
    layout_free(&l);
}

/* Thousands of granules in one shard (granule numbers 64 apart): the shard's
 * index grows, collides, deletes from the middle of probe runs and shrinks. */
static void test_ptrtable_one_shard_many_granules(void **state)
{
    (void)state;
    enum { N = 3000 };
    static bool present[N];
    uintptr_t base0 = REGION + 3 * TiB;
    for (unsigned i = 0; i < N; i++) {
        us_ptrtable_insert(base0 + (uintptr_t)i * 64 * GRAN + i, 4 * KiB, kind_of(i), device_of(i));
        present[i] = true;
    }
    uint64_t seed = 77;
    for (unsigned round = 0; round < 4; round++) {
        /* drop (or bring back) a random third, then check everything */
        for (unsigned n = 0; n < N / 3; n++) {
            unsigned i = (unsigned)(rng_next(&seed) % N);
            uintptr_t b = base0 + (uintptr_t)i * 64 * GRAN + i;
            if (present[i]) {
                assert_true(us_ptrtable_remove(b, NULL));
            } else {
                us_ptrtable_insert(b, 4 * KiB, kind_of(i), device_of(i));
            }
            present[i] = !present[i];
        }
        for (unsigned i = 0; i < N; i++) {
            uintptr_t b = base0 + (uintptr_t)i * 64 * GRAN + i;
            if (present[i])
                expect_hit(b + 4 * KiB - 1, b, 4 * KiB, kind_of(i), device_of(i));
            else
                expect_miss(b);
        }
    }
    for (unsigned i = 0; i < N; i++)
        if (present[i])
            assert_true(us_ptrtable_remove(base0 + (uintptr_t)i * 64 * GRAN + i, NULL));
    for (unsigned i = 0; i < N; i += 97)
        expect_miss(base0 + (uintptr_t)i * 64 * GRAN + i);
}

/* --- concurrency ------------------------------------------------------------------- */

/* Slots interleave stable ranges (inserted once, looked up all along) with
 * ranges that writer threads insert and remove, so they share granules and
 * shards. Slot i belongs to the stable set when i % (WRITERS + 1) == 0, else
 * to writer i % (WRITERS + 1) - 1. Two areas: 1.5 MiB slots (ranges cross
 * granule edges) and 24 KiB slots (dozens of ranges per granule). Every
 * range leaves a gap at the end of its slot: gaps are always misses. */
#define C_WRITERS 3
#define C_READERS 2
#define C_SLOTS 1536
#define C_ROUNDS 15 /* odd rounds remove what they insert; the last one keeps it */
#define C_BIG_SLOT (3 * MiB / 2)
#define C_SMALL_SLOT (24 * KiB)
#define C_AREA2 (REGION + 6 * TiB)
#define C_HUGE (REGION + 10 * TiB)  /* a stable range on the 1 GiB level */
#define C_HUGE_SIZE (8 * GiB + 4 * KiB)
#define C_CHURN_HUGE (REGION + 11 * TiB) /* writer 0 adds and drops one there */

static uintptr_t slot_base(unsigned i)
{
    return i < C_SLOTS / 2 ? REGION + 5 * TiB + (uintptr_t)i * C_BIG_SLOT
                           : C_AREA2 + (uintptr_t)(i - C_SLOTS / 2) * C_SMALL_SLOT;
}

static size_t slot_range_size(unsigned i, unsigned variant)
{
    size_t slot = i < C_SLOTS / 2 ? C_BIG_SLOT : C_SMALL_SLOT;
    return slot - 4 * KiB - (variant % 3) * KiB;
}

static atomic_uint c_errors;
static atomic_bool c_stop;

/* One lookup of a stable range and one of a gap; errors are counted. */
static void reader_check(uint64_t *seed)
{
    uint64_t r = rng_next(seed);
    unsigned i = (unsigned)(r % (C_SLOTS / (C_WRITERS + 1))) * (C_WRITERS + 1);
    size_t size = slot_range_size(i, 0);
    uintptr_t addr = slot_base(i) + (r >> 32) % size;
    struct us_range got;
    if (!us_ptrtable_lookup(addr, &got) || got.base != slot_base(i) || got.size != size || got.kind != kind_of(i)
        || got.device != device_of(i))
        atomic_fetch_add(&c_errors, 1);
    uintptr_t h = C_HUGE + (r >> 20) % C_HUGE_SIZE;
    if (!us_ptrtable_lookup(h, &got) || got.base != C_HUGE || got.size != C_HUGE_SIZE
        || got.kind != US_MEM_REGISTERED || got.device != -1)
        atomic_fetch_add(&c_errors, 1);
    /* the gap after any slot's range, stable or not */
    unsigned j = (unsigned)((r >> 16) % C_SLOTS);
    if (us_ptrtable_lookup(slot_base(j) + slot_range_size(j, 0) + 2 * KiB, NULL))
        atomic_fetch_add(&c_errors, 1);
}

static void *reader_main(void *arg)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
    unsigned long n = 0;
    while (!atomic_load_explicit(&c_stop, memory_order_relaxed) || n < 100000) {
        reader_check(&seed);
        n++;
    }
    return NULL;
}

static void *writer_main(void *arg)
{
    unsigned w = (unsigned)(uintptr_t)arg;
    for (unsigned round = 0; round < C_ROUNDS; round++) {
        for (unsigned i = w + 1; i < C_SLOTS; i += C_WRITERS + 1) {
            uintptr_t base = slot_base(i);
            size_t size = slot_range_size(i, round);
            enum us_mem_kind kind = kind_of(i + round);
            int device = kind == US_MEM_DEVICE ? (int)w : -1;
            if (round % 4 == 3)
                us_ptrtable_insert(base, 4 * KiB, US_MEM_PINNED, -1); /* replaced next line */
            us_ptrtable_insert(base, size, kind, device);
            struct us_range got;
            if (!us_ptrtable_lookup(base + size - 1, &got) || got.base != base || got.size != size
                || got.kind != kind || got.device != device)
                atomic_fetch_add(&c_errors, 1);
            if (round % 2 == 1) {
                if (!us_ptrtable_remove(base, &got) || got.base != base || got.size != size)
                    atomic_fetch_add(&c_errors, 1);
                if (us_ptrtable_lookup(base, NULL) || us_ptrtable_lookup(base + size - 1, NULL))
                    atomic_fetch_add(&c_errors, 1);
            }
            if (w == 0 && i % 64 == 1) {
                us_ptrtable_insert(C_CHURN_HUGE, 6 * GiB, US_MEM_PINNED, -1);
                if (!us_ptrtable_lookup(C_CHURN_HUGE + 5 * GiB, &got) || got.base != C_CHURN_HUGE)
                    atomic_fetch_add(&c_errors, 1);
                if (!us_ptrtable_remove(C_CHURN_HUGE, NULL) || us_ptrtable_lookup(C_CHURN_HUGE, NULL))
                    atomic_fetch_add(&c_errors, 1);
            }
        }
    }
    return NULL;
}

static void insert_stable(void)
{
    for (unsigned i = 0; i < C_SLOTS; i += C_WRITERS + 1)
        us_ptrtable_insert(slot_base(i), slot_range_size(i, 0), kind_of(i), device_of(i));
    us_ptrtable_insert(C_HUGE, C_HUGE_SIZE, US_MEM_REGISTERED, -1);
}

static void test_ptrtable_concurrent(void **state)
{
    (void)state;
    insert_stable();
    atomic_store(&c_errors, 0);
    atomic_store(&c_stop, false);
    pthread_t readers[C_READERS], writers[C_WRITERS];
    for (uintptr_t t = 0; t < C_READERS; t++)
        assert_int_equal(pthread_create(&readers[t], NULL, reader_main, (void *)t), 0);
    for (uintptr_t t = 0; t < C_WRITERS; t++)
        assert_int_equal(pthread_create(&writers[t], NULL, writer_main, (void *)t), 0);
    for (unsigned t = 0; t < C_WRITERS; t++)
        pthread_join(writers[t], NULL);
    atomic_store(&c_stop, true);
    for (unsigned t = 0; t < C_READERS; t++)
        pthread_join(readers[t], NULL);
    assert_int_equal(atomic_load(&c_errors), 0);
    /* afterwards: stable ranges intact, each writer slot holds its last round's range */
    const unsigned last = C_ROUNDS - 1;
    for (unsigned i = 0; i < C_SLOTS; i++) {
        if (i % (C_WRITERS + 1) == 0)
            expect_hit(slot_base(i) + 1, slot_base(i), slot_range_size(i, 0), kind_of(i), device_of(i));
        else
            expect_hit(slot_base(i) + 1, slot_base(i), slot_range_size(i, last), kind_of(i + last),
                       kind_of(i + last) == US_MEM_DEVICE ? (int)(i % (C_WRITERS + 1) - 1) : -1);
    }
}

/* More threads than reader slots at once: the ones without a slot read
 * under the shard rwlock, and writers exclude both kinds of reader. */
#define O_THREADS 160
static pthread_barrier_t o_barrier;

static void *crowd_reader_main(void *arg)
{
    uint64_t seed = 0x51afd7ed558ccd1dull * ((uintptr_t)arg + 1);
    pthread_barrier_wait(&o_barrier); /* all alive before any lookup */
    for (unsigned n = 0; n < 3000; n++)
        reader_check(&seed);
    pthread_barrier_wait(&o_barrier); /* nobody leaves (and frees a slot) early */
    return NULL;
}

static void test_ptrtable_more_threads_than_slots(void **state)
{
    (void)state;
    insert_stable();
    atomic_store(&c_errors, 0);
    assert_int_equal(pthread_barrier_init(&o_barrier, NULL, O_THREADS), 0);
    pthread_t readers[O_THREADS], writer;
    for (uintptr_t t = 0; t < O_THREADS; t++)
        assert_int_equal(pthread_create(&readers[t], NULL, crowd_reader_main, (void *)t), 0);
    assert_int_equal(pthread_create(&writer, NULL, writer_main, (void *)0), 0);
    for (unsigned t = 0; t < O_THREADS; t++)
        pthread_join(readers[t], NULL);
    pthread_join(writer, NULL);
    pthread_barrier_destroy(&o_barrier);
    assert_int_equal(atomic_load(&c_errors), 0);
    /* slots were released at thread exit: new threads read again */
    pthread_t again;
    assert_int_equal(pthread_create(&again, NULL, reader_main, (void *)7), 0);
    atomic_store(&c_stop, true);
    pthread_join(again, NULL);
    assert_int_equal(atomic_load(&c_errors), 0);
}

/* --- fork ---------------------------------------------------------------------------- */

static void *fork_busy_main(void *arg)
{
    uintptr_t t = (uintptr_t)arg;
    uintptr_t base = REGION + 7 * TiB + t * 64 * GRAN;
    unsigned long n = 0;
    while (!atomic_load_explicit(&c_stop, memory_order_relaxed)) {
        if (t % 2 == 0) {
            us_ptrtable_insert(base, 8 * GRAN + 4 * KiB * (n % 4), US_MEM_DEVICE, 0);
            us_ptrtable_remove(base, NULL);
        } else {
            us_ptrtable_lookup(REGION + 7 * TiB + (n % 512) * GRAN, NULL);
        }
        n++;
    }
    return NULL;
}

/* A child forked while other threads hold table locks can clear the table
 * and use it (the child has only one thread). */
static void test_ptrtable_clear_after_fork(void **state)
{
    (void)state;
    uintptr_t stable = REGION + 8 * TiB;
    us_ptrtable_insert(stable, 16 * GRAN, US_MEM_PINNED, -1);
    atomic_store(&c_stop, false);
    pthread_t busy[4];
    for (uintptr_t t = 0; t < 4; t++)
        assert_int_equal(pthread_create(&busy[t], NULL, fork_busy_main, (void *)t), 0);
    int failures = 0;
    for (int k = 0; k < 40 && failures == 0; k++) {
        usleep(1000);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            alarm(5); /* a deadlock ends in SIGALRM */
            us_ptrtable_clear();
            int bad = us_ptrtable_lookup(stable, NULL); /* the parent's table is gone */
            us_ptrtable_insert(stable + GRAN, 3 * GRAN, US_MEM_DEVICE, 1);
            struct us_range r;
            bad |= !us_ptrtable_lookup(stable + 2 * GRAN, &r) || r.base != stable + GRAN;
            bad |= !us_ptrtable_remove(stable + GRAN, NULL);
            us_ptrtable_clear();
            _exit(bad ? 1 : 0);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failures++;
    }
    atomic_store(&c_stop, true);
    for (unsigned t = 0; t < 4; t++)
        pthread_join(busy[t], NULL);
    assert_int_equal(failures, 0);
    expect_hit(stable, stable, 16 * GRAN, US_MEM_PINNED, -1); /* the parent's table is intact */
}

/* A thread keeps its last ranges found until the table changes: the same
 * range found again after its removal, its replacement or a forked child's
 * clear would be a lie. */
static void test_ptrtable_recent_follow_changes(void **state)
{
    (void)state;
    uintptr_t a = REGION + 9 * TiB, b = a + 64 * GRAN;
    us_ptrtable_insert(a, 4 * GRAN, US_MEM_PINNED, -1);
    us_ptrtable_insert(b, GRAN, US_MEM_DEVICE, 0);
    expect_hit(a + 1, a, 4 * GRAN, US_MEM_PINNED, -1);
    expect_hit(b, b, GRAN, US_MEM_DEVICE, 0);
    us_ptrtable_insert(a, 4 * GRAN, US_MEM_DEVICE, 1); /* the same base again: replaced */
    expect_hit(a + 1, a, 4 * GRAN, US_MEM_DEVICE, 1);
    assert_true(us_ptrtable_remove(b, NULL));
    expect_miss(b);
    expect_hit(a, a, 4 * GRAN, US_MEM_DEVICE, 1);
    pid_t pid = fork(); /* this thread found a a moment ago */
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(5);
        us_ptrtable_clear();
        _exit(us_ptrtable_lookup(a, NULL) ? 1 : 0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    expect_hit(a, a, 4 * GRAN, US_MEM_DEVICE, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ptrtable_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_spans_granules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_adjacent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_shared_granule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_replace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_overlap_evicts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_remove_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_clear, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_large_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_large_overlaps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_odd_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_one_shard_many_granules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_concurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_more_threads_than_slots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_clear_after_fork, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ptrtable_recent_follow_changes, setup, teardown),
    };
    /* PTRTABLE_TEST=pattern runs the matching tests only (cmocka's filter) */
    const char *filter = getenv("PTRTABLE_TEST");
    if (filter != NULL)
        cmocka_set_test_filter(filter);
    return US_RUN_TESTS("test_ptrtable", tests, NULL, NULL);
}
