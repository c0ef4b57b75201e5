/* test_unwinder.c - the stack walk call sites are captured with: the order
 * the unwinders are chosen in (the distribution's libunwind, libgcc_s,
 * backtrace(3)); with each, the call site of a known function, to the
 * return address and to its file:line, the same whichever walks; a walk
 * through hand-made code without unwind information (its frame pointer
 * garbage) and one from a stack deeper than it asks for, both returning
 * safely; the walk memo's slots. Walk costs: make bench-costs. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "summary.h"

#include "callsite.h"
#include "config.h"
#include "srcline.h"
#include "unwinder.h"

static struct us_config defaults;

static const enum us_unwinder_kind kinds[] = {US_UNWINDER_LIBUNWIND, US_UNWINDER_LIBGCC, US_UNWINDER_BACKTRACE};
#define KINDS (int)(sizeof kinds / sizeof kinds[0])

static int setup(void **state)
{
    (void)state;
    us_config_load(&defaults, NULL, NULL, NULL, NULL);
    us_config_set(&defaults);
    us_callsite_set_self_range(0, 0); /* linked into the program: nothing is the shim's */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    us_unwinder_prefer(US_UNWINDER_LIBUNWIND); /* the shim's own order again */
    return 0;
}

/* Under a sanitizer (tests/sanitize.sh sets TEST_SANITIZER) the code is
 * instrumented: functions grow, frames gain the instrumentation's spills, and
 * libgcc_s finds no slots through ASan's and TSan's frames. The walks still
 * run, and must return safely within their bounds (what the sanitizers are
 * there to check); the exact frames and slots are judged in the plain build. */
static bool sanitized(void)
{
    const char *san = getenv("TEST_SANITIZER");
    return san != NULL && *san != '\0';
}

static bool under_tsan(void)
{
    return dlsym(RTLD_DEFAULT, "__tsan_init") != NULL;
}

/* `kind` chosen, or false where it does not load here (libunwind missing,
 * or under ThreadSanitizer) */
static bool use(enum us_unwinder_kind kind)
{
    us_unwinder_prefer(kind);
    return us_unwinder_kind() == kind;
}

static void test_unwinder_order_libunwind_libgcc_backtrace(void **state)
{
    (void)state;
    bool libunwind = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL) != NULL;
    us_unwinder_prefer(US_UNWINDER_LIBUNWIND);
    /* every glibc system has libgcc_s; libunwind where installed, never
     * under ThreadSanitizer */
    assert_int_equal(us_unwinder_kind(), libunwind && !under_tsan() ? US_UNWINDER_LIBUNWIND : US_UNWINDER_LIBGCC);
    us_unwinder_prefer(US_UNWINDER_LIBGCC);
    assert_int_equal(us_unwinder_kind(), US_UNWINDER_LIBGCC);
    us_unwinder_prefer(US_UNWINDER_BACKTRACE);
    assert_int_equal(us_unwinder_kind(), US_UNWINDER_BACKTRACE);
}

/* --- the site of a known function ------------------------------------------------------ */

static void *caller_ret; /* the return address into the caller of hook() */
static int hook_line;    /* the line of hook()'s capture */

__attribute__((noinline, noclone)) static void hook(struct us_site *site)
{
    hook_line = __LINE__ + 1;
    us_site_capture(site);
    caller_ret = __builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) static void program(struct us_site *site)
{
    hook(site);
    __asm__ volatile("" ::: "memory");
}

static void test_unwinder_known_site_with_each(void **state)
{
    (void)state;
    struct us_site site[KINDS];
    bool taken[KINDS] = {false};
    int last = -1;
    struct us_config cfg = defaults;
    for (int k = 0; k < KINDS; k++) {
        if (!use(kinds[k]))
            continue; /* libunwind missing here, or ThreadSanitizer */
        /* a depth of its own for each: a key the walk memo has not met, so
         * that each unwinder walks */
        cfg.callsite_depth = 6 + (unsigned)k;
        us_config_set(&cfg);
        memset(&site[k], 0, sizeof site[k]);
        program(&site[k]);
        us_config_set(&defaults);
        taken[k] = true;
        assert_int_equal(site[k].depth, 6 + k);
        /* frames[0] is the return into hook (the capture's own frames are
         * gone), frames[1] the return into program */
        assert_true(site[k].depth >= 3);
        assert_true((uintptr_t)site[k].frames[0] > (uintptr_t)&hook);
        assert_true((uintptr_t)site[k].frames[0] < (uintptr_t)&hook + 512);
        assert_ptr_equal(site[k].frames[1], caller_ret);
        /* the report's text: the capture's own line, through libdw */
        if (us_srcline_available()) {
            struct us_frame fr;
            us_callsite_symbolize_source(site[k].frames[0], &fr);
            assert_int_equal(fr.line, hook_line);
            const char *base = strrchr(fr.file, '/');
            assert_string_equal(base != NULL ? base + 1 : fr.file, "test_unwinder.c");
            assert_string_equal(fr.function, "hook");
        }
        /* every unwinder gives the same site, frame for frame */
        if (last >= 0)
            assert_memory_equal(site[k].frames, site[last].frames, (size_t)site[last].depth * sizeof(void *));
        last = k;
    }
    assert_true(taken[1] && taken[2]); /* libgcc_s and backtrace(3) everywhere */
}

/* a walk's first frame is in us_unwind itself, whichever walks */
static void test_unwinder_first_frame_is_us_unwind(void **state)
{
    (void)state;
    for (int k = 0; k < KINDS; k++) {
        if (!use(kinds[k]))
            continue;
        void *frames[8];
        assert_true(us_unwind(frames, 8) >= 2);
        assert_true((uintptr_t)frames[0] > (uintptr_t)&us_unwind);
        if (!sanitized())
            assert_true((uintptr_t)frames[0] < (uintptr_t)&us_unwind + 512);
        assert_int_equal(us_unwind(frames, 0), 0);
    }
}

/* --- code without unwind information ------------------------------------------------- */

#if defined(__x86_64__)
/* What a JIT's code looks like to an unwinder: no unwind tables registered,
 * and the frame pointer register used for data. The stub calls fn(arg) with
 * rbp pointing at a page of 0x41 bytes, so that a frame-pointer fallback
 * reads 0x4141414141414141 as the next frame and return address. */
static const unsigned char stub_code[] = {
    0x55,                         /* push %rbp */
    0x48, 0xbd, 0, 0, 0, 0, 0, 0, 0, 0, /* movabs $garbage, %rbp (patched below) */
    0x48, 0x89, 0xf8,             /* mov %rdi, %rax */
    0x48, 0x89, 0xf7,             /* mov %rsi, %rdi */
    0xff, 0xd0,                   /* call *%rax */
    0x5d,                         /* pop %rbp */
    0xc3,                         /* ret */
};
#define STUB_RBP_IMM 3

struct in_stub {
    void *frames[64];
    int n;
    void *stub_ret;
    int slots_found;
    uintptr_t slot;
    bool slot_held; /* read while the stub's frame is live: after it returns the slot is dead stack */
};

__attribute__((noinline, noclone)) static void inside_stub(struct in_stub *r)
{
    r->stub_ret = __builtin_return_address(0);
    r->n = us_unwind(r->frames, 64);
    r->slots_found = us_unwind_slots(&r->stub_ret, 1, &r->slot);
    r->slot_held = r->slots_found == 1 && *(void **)r->slot == r->stub_ret;
    __asm__ volatile("" ::: "memory");
}

static void test_unwinder_code_without_cfi_ends_the_walk_safely(void **state)
{
    (void)state;
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *code = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *junk = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(code != MAP_FAILED && junk != MAP_FAILED);
    memset(junk, 0x41, (size_t)page);
    uintptr_t garbage = (uintptr_t)junk + (uintptr_t)page / 2;
    memcpy(code, stub_code, sizeof stub_code);
    memcpy(code + STUB_RBP_IMM, &garbage, sizeof garbage);
    assert_int_equal(mprotect(code, (size_t)page, PROT_READ | PROT_EXEC), 0);
    void (*stub)(void (*)(struct in_stub *), struct in_stub *);
    *(void **)&stub = code;

    for (int k = 0; k < KINDS; k++) {
        if (!use(kinds[k]))
            continue;
        struct in_stub r;
        memset(&r, 0, sizeof r);
        stub(inside_stub, &r);
        /* the walk came back: us_unwind, inside_stub, then the stub */
        assert_true(r.n >= 3);
        assert_true(r.n <= 64);
        if (sanitized())
            continue; /* returned safely; the frames are judged in the plain build */
        assert_ptr_equal(r.frames[2], r.stub_ret);
        assert_true((uintptr_t)r.stub_ret > (uintptr_t)code && (uintptr_t)r.stub_ret < (uintptr_t)code + sizeof stub_code);
        /* libgcc_s (backtrace(3) is libgcc_s too) ends at the frame it has
         * no tables for: nothing read through the garbage frame pointer */
        if (kinds[k] != US_UNWINDER_LIBUNWIND)
            assert_int_equal(r.n, 3);
        /* the slot of the return into the stub: the stub's frame is found
         * from inside_stub's tables, the only ones it needs */
        assert_int_equal(r.slots_found, 1);
        assert_true(r.slot_held);
    }
    munmap(code, (size_t)page);
    munmap(junk, (size_t)page);
}
#else
static void test_unwinder_code_without_cfi_ends_the_walk_safely(void **state)
{
    (void)state;
    us_test_skip(); /* the stub is x86-64 code */
}
#endif

/* --- a stack deeper than the walk asks for ---------------------------------------------- */

static void *deep_frames[16];
static int deep_n;
static struct us_site deep_site;

__attribute__((noinline, noclone)) static int recurse(int depth)
{
    if (depth == 0) {
        deep_n = us_unwind(deep_frames, 16);
        us_site_capture(&deep_site);
        return 0;
    }
    int r = recurse(depth - 1);
    __asm__ volatile("" ::: "memory");
    return r + 1; /* no tail call: each level keeps its frame */
}

static void test_unwinder_deep_stack_stops_at_the_limit(void **state)
{
    (void)state;
    for (int k = 0; k < KINDS; k++) {
        if (!use(kinds[k]))
            continue;
        memset(deep_frames, 0, sizeof deep_frames);
        assert_int_equal(recurse(5000), 5000);
        /* 16 asked, 16 given, of 5000 frames: us_unwind, the innermost
         * recursion, then returns into recursion, all from one call */
        assert_int_equal(deep_n, 16);
        assert_int_equal(deep_site.depth, (int)defaults.callsite_depth);
        if (sanitized())
            continue;
        for (int i = 3; i < 16; i++)
            assert_ptr_equal(deep_frames[i], deep_frames[2]);
        assert_int_equal(deep_site.depth, (int)defaults.callsite_depth);
        for (int i = 1; i < deep_site.depth; i++)
            assert_ptr_equal(deep_site.frames[i], deep_frames[2]);
    }
}

/* --- the walk memo's slots -------------------------------------------------------------- */

__attribute__((noinline, noclone)) static int slots_of_callers(void *const *rets, int n, uintptr_t *slots)
{
    int found = us_unwind_slots(rets, n, slots);
    __asm__ volatile("" ::: "memory");
    return found;
}

/* what a slots walk found, checked while the frames are still there */
struct slots_seen {
    void *frames[12];
    int n, found;
    uintptr_t slots[12];
    bool held, ascending;
};

__attribute__((noinline, noclone)) static void walk_then_slots(int levels, struct slots_seen *s, bool out_of_order)
{
    if (levels > 0) {
        walk_then_slots(levels - 1, s, out_of_order);
        __asm__ volatile("" ::: "memory");
        return;
    }
    s->n = us_unwind(s->frames, 12);
    /* frames[1] is the return into here, which the slots walk (called from
     * here too) meets at another address: from frames[2], this function's
     * callers */
    void *rets[12];
    memcpy(rets, s->frames + 2, (size_t)(s->n - 2) * sizeof *rets);
    if (out_of_order)
        rets[1] = rets[6]; /* one skipped: the return into the test, not the recursion's */
    s->found = slots_of_callers(rets, s->n - 2, s->slots);
    s->held = s->ascending = true;
    for (int i = 0; i < s->found; i++) {
        s->held = s->held && *(void **)s->slots[i] == rets[i];
        s->ascending = s->ascending && (i == 0 || s->slots[i] > s->slots[i - 1]);
    }
}

static void test_unwinder_slots_hold_the_return_addresses(void **state)
{
    (void)state;
    for (int k = 0; k < KINDS; k++) {
        if (!use(kinds[k]))
            continue;
        struct slots_seen s;
        memset(&s, 0, sizeof s);
        walk_then_slots(6, &s, false);
        assert_int_equal(s.n, 12);
        if (sanitized()) {
            assert_true(s.held && s.ascending); /* what it found, if anything, is right */
            continue;
        }
        /* all ten, from libgcc_s's walk whichever unwinder walked first,
         * each slot holding its return address, outward up the stack */
        assert_int_equal(s.found, 10);
        assert_true(s.held);
        assert_true(s.ascending);
        /* one not in the walk's order: those before it only */
        walk_then_slots(6, &s, true);
        assert_int_equal(s.found, 1);
        assert_true(s.held);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unwinder_order_libunwind_libgcc_backtrace),
        cmocka_unit_test(test_unwinder_known_site_with_each),
        cmocka_unit_test(test_unwinder_first_frame_is_us_unwind),
        cmocka_unit_test(test_unwinder_code_without_cfi_ends_the_walk_safely),
        cmocka_unit_test(test_unwinder_deep_stack_stops_at_the_limit),
        cmocka_unit_test(test_unwinder_slots_hold_the_return_addresses),
    };
    return US_RUN_TESTS("test_unwinder", tests, setup, teardown);
}
