/* test_policy_switches.c - each fix switch turns off the rewrite it names and
 * no other, each size threshold holds at its exact value, and a host-to-host
 * copy goes native before classification (us_policy_decide,
 * us_policy_native_by_kind). Written for the mutants that test_policy let
 * live (tests/mutation/mutants.ini: the fix_d2h switch ignored, a threshold
 * off by one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "summary.h"

#include "policy.h"

#define MiB ((size_t)1 << 20)

static const struct us_call_facts no_facts;

static struct us_config default_config(void)
{
    struct us_config cfg;
    us_config_load(&cfg, NULL, NULL, NULL, NULL);
    return cfg;
}

static struct us_copy copy_of(enum us_copy_path path, enum us_copy_api api, size_t bytes)
{
    struct us_copy c = { .api = api, .bytes = bytes, .path = path, .peer_dst_device = -1, .peer_src_device = -1 };
    switch (path) {
    case US_PATH_H2D_PAGEABLE: c.kind = cudaMemcpyHostToDevice; break;
    case US_PATH_D2H_PAGEABLE: c.kind = cudaMemcpyDeviceToHost; break;
    default: c.kind = cudaMemcpyDeviceToDevice; break;
    }
    return c;
}

static enum us_action action_of(const struct us_copy *c, const struct us_config *cfg, enum us_rule_id *rule)
{
    struct us_decision d;
    us_policy_decide(c, cfg, &no_facts, &d);
    assert_int_equal(d.rule_count, 1); /* reported whatever the switches say */
    *rule = d.rules[0];
    return d.action;
}

/* The three rewritable paths, large enough for every threshold, and what
 * each becomes with a switch off: only the switched path goes native. */
static void test_policy_each_switch_turns_off_its_own_rewrite_only(void **state)
{
    (void)state;
    static const struct {
        enum us_copy_path path;
        enum us_copy_api api;
        enum us_action rewrite;
        enum us_rule_id rule;
    } paths[] = {
        { US_PATH_H2D_PAGEABLE, US_API_MEMCPY_ASYNC, US_ACT_H2D, US_RULE_pageable_h2d },
        { US_PATH_D2H_PAGEABLE, US_API_MEMCPY_ASYNC, US_ACT_D2H, US_RULE_pageable_d2h },
        { US_PATH_D2D_STAGED, US_API_MEMCPY_PEER_ASYNC, US_ACT_PEER, US_RULE_staged_peer },
    };
    enum { ALL_ON, FIX_OFF, FIX_H2D_OFF, FIX_D2H_OFF, FIX_PEER_OFF, SWITCHES };
    for (int s = ALL_ON; s < SWITCHES; s++) {
        struct us_config cfg = default_config();
        switch (s) {
        case FIX_OFF: cfg.fix = false; break;
        case FIX_H2D_OFF: cfg.fix_h2d = false; break;
        case FIX_D2H_OFF: cfg.fix_d2h = false; break;
        case FIX_PEER_OFF: cfg.fix_peer = false; break;
        default: break;
        }
        for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
            struct us_copy c = copy_of(paths[p].path, paths[p].api, 64 * MiB);
            bool off = s == FIX_OFF || (s == FIX_H2D_OFF && p == 0) || (s == FIX_D2H_OFF && p == 1) ||
                       (s == FIX_PEER_OFF && p == 2);
            enum us_rule_id rule;
            enum us_action action = action_of(&c, &cfg, &rule);
            if (action != (off ? US_ACT_NATIVE : paths[p].rewrite))
                fail_msg("switch case %d, path %d: action %d", s, (int)paths[p].path, (int)action);
            assert_int_equal(rule, paths[p].rule);
        }
    }
}

/* With its switch off, a host copy of that direction is native by its kind
 * alone (the chain then skips classification); with it on, it is not. */
static void test_policy_switch_off_makes_the_kind_native(void **state)
{
    (void)state;
    struct us_config cfg = default_config();
    struct us_copy h2d = copy_of(US_PATH_UNKNOWN, US_API_MEMCPY_ASYNC, 64 * MiB);
    h2d.kind = cudaMemcpyHostToDevice;
    struct us_copy d2h = h2d;
    d2h.kind = cudaMemcpyDeviceToHost;
    assert_false(us_policy_native_by_kind(&h2d, &cfg));
    assert_false(us_policy_native_by_kind(&d2h, &cfg));
    cfg.fix_d2h = false;
    assert_false(us_policy_native_by_kind(&h2d, &cfg));
    assert_true(us_policy_native_by_kind(&d2h, &cfg));
    cfg = default_config();
    cfg.fix_h2d = false;
    assert_true(us_policy_native_by_kind(&h2d, &cfg));
    assert_false(us_policy_native_by_kind(&d2h, &cfg));
}

/* A copy of exactly a threshold is rewritten, one byte less is not. */
static void test_policy_thresholds_hold_at_their_exact_value(void **state)
{
    (void)state;
    struct us_config cfg = default_config();
    cfg.h2d_min_bytes = 3 * MiB;
    cfg.d2h_min_bytes = 1 * MiB;
    cfg.peer_min_bytes = 5 * MiB;
    static const struct {
        enum us_copy_path path;
        enum us_copy_api api;
        enum us_action rewrite;
    } paths[] = {
        { US_PATH_H2D_PAGEABLE, US_API_MEMCPY_ASYNC, US_ACT_H2D },
        { US_PATH_D2H_PAGEABLE, US_API_MEMCPY_ASYNC, US_ACT_D2H },
        { US_PATH_D2D_STAGED, US_API_MEMCPY_PEER_ASYNC, US_ACT_PEER },
    };
    const size_t min[] = { cfg.h2d_min_bytes, cfg.d2h_min_bytes, cfg.peer_min_bytes };
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        enum us_rule_id rule;
        struct us_copy c = copy_of(paths[p].path, paths[p].api, min[p]);
        if (action_of(&c, &cfg, &rule) != paths[p].rewrite)
            fail_msg("path %d: a copy of exactly its threshold (%zu) not rewritten", (int)paths[p].path, min[p]);
        c.bytes = min[p] - 1;
        if (action_of(&c, &cfg, &rule) != US_ACT_NATIVE)
            fail_msg("path %d: a copy one byte under its threshold rewritten", (int)paths[p].path);
    }
    /* the kind alone says the same for the host directions */
    struct us_copy c = copy_of(US_PATH_UNKNOWN, US_API_MEMCPY_ASYNC, cfg.d2h_min_bytes);
    c.kind = cudaMemcpyDeviceToHost;
    assert_false(us_policy_native_by_kind(&c, &cfg));
    c.bytes--;
    assert_true(us_policy_native_by_kind(&c, &cfg));
}

/* A host-to-host copy is never rewritten: native by its kind, at any size,
 * synchronous or not, so that the chain passes it on before classifying. */
static void test_policy_host_to_host_is_native_by_kind(void **state)
{
    (void)state;
    struct us_config cfg = default_config();
    static const enum us_copy_api apis[] = { US_API_MEMCPY, US_API_MEMCPY_ASYNC };
    static const size_t sizes[] = { 0, 4, 64 * MiB };
    for (size_t a = 0; a < sizeof apis / sizeof apis[0]; a++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            struct us_copy c = copy_of(US_PATH_UNKNOWN, apis[a], sizes[z]);
            c.kind = cudaMemcpyHostToHost;
            assert_true(us_policy_native_by_kind(&c, &cfg));
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_each_switch_turns_off_its_own_rewrite_only),
        cmocka_unit_test(test_policy_switch_off_makes_the_kind_native),
        cmocka_unit_test(test_policy_thresholds_hold_at_their_exact_value),
        cmocka_unit_test(test_policy_host_to_host_is_native_by_kind),
    };
    return US_RUN_TESTS("test_policy_switches", tests, NULL, NULL);
}
