/* test_policy.c - which rules a classified copy triggers and which pipeline
 * rewrites it, for every path, threshold and fix switch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "summary.h"

#include <string.h>

#include "policy.h"

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
    return c;
}

static void test_policy_pageable_h2d_rewritten_above_threshold(void **state)
{
    (void)state;
    struct us_config cfg = default_config();
    struct us_copy c = copy_of(US_PATH_H2D_PAGEABLE, US_API_MEMCPY_ASYNC, cfg.h2d_min_bytes);
    struct us_decision d;
    us_policy_decide(&c, &cfg, &no_facts, &d);
    assert_int_equal(d.action, US_ACT_H2D);
    assert_int_equal(d.rule_count, 1);
    assert_int_equal(d.rules[0], US_RULE_pageable_h2d);

    c.bytes = cfg.h2d_min_bytes - 1;
    us_policy_decide(&c, &cfg, &no_facts, &d);
    assert_int_equal(d.action, US_ACT_NATIVE);
    assert_int_equal(d.rules[0], US_RULE_pageable_h2d); /* still a finding below the threshold */
}

static void test_policy_each_path_maps_to_its_rule_and_pipeline(void **state)
{
    (void)state;
    struct us_config cfg = default_config();
    const struct {
        enum us_copy_path path;
        enum us_action action;
        int rule; /* -1: none */
    } rows[] = {
        { US_PATH_D2H_PAGEABLE, US_ACT_D2H, US_RULE_pageable_d2h },
        { US_PATH_D2D_STAGED, US_ACT_PEER, US_RULE_staged_peer },
        { US_PATH_H2D_PINNED, US_ACT_NATIVE, -1 },
        { US_PATH_D2H_PINNED, US_ACT_NATIVE, -1 },
        { US_PATH_D2D_SAME, US_ACT_NATIVE, -1 },
        { US_PATH_D2D_PEER, US_ACT_NATIVE, -1 },
        { US_PATH_UNKNOWN, US_ACT_NATIVE, -1 },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct us_copy c = copy_of(rows[i].path, US_API_MEMCPY_ASYNC, 64u << 20);
        struct us_decision d;
        us_policy_decide(&c, &cfg, &no_facts, &d);
        assert_int_equal(d.action, rows[i].action);
        assert_int_equal(d.rule_count, rows[i].rule < 0 ? 0 : 1);
        if (rows[i].rule >= 0)
            assert_int_equal(d.rules[0], rows[i].rule);
    }
}

static void test_policy_sync_copy_of_pinned_memory_is_sync_memcpy(void **state)
{
    (void)state;
    struct us_config cfg = default_config();
    struct us_copy c = copy_of(US_PATH_H2D_PINNED, US_API_MEMCPY, 4096);
    struct us_decision d;
    us_policy_decide(&c, &cfg, &no_facts, &d);
    assert_int_equal(d.rule_count, 1);
    assert_int_equal(d.rules[0], US_RULE_sync_memcpy);
    c.path = US_PATH_D2D_SAME; /* device to device: cudaMemcpy does not hold the host */
    us_policy_decide(&c, &cfg, &no_facts, &d);
    assert_int_equal(d.rule_count, 0);
}

static void test_policy_legacy_stream_adds_a_rule(void **state)
{
    (void)state;
    struct us_config cfg = default_config();
    struct us_copy c = copy_of(US_PATH_D2H_PAGEABLE, US_API_MEMCPY_ASYNC, 1u << 20);
    struct us_decision d;
    us_policy_decide(&c, &cfg, &(struct us_call_facts){ .legacy_with_blocking = true }, &d);
    assert_int_equal(d.rule_count, 2);
    assert_int_equal(d.rules[0], US_RULE_pageable_d2h);
    assert_int_equal(d.rules[1], US_RULE_legacy_stream);
}

static void test_policy_fix_switches_turn_rewrites_off(void **state)
{
    (void)state;
    struct us_config cfg = default_config();
    struct us_copy peer = copy_of(US_PATH_D2D_STAGED, US_API_MEMCPY_PEER_ASYNC, 64u << 20);
    struct us_copy d2h = copy_of(US_PATH_D2H_PAGEABLE, US_API_MEMCPY_ASYNC, 64u << 20);
    struct us_decision d;

    cfg.fix_peer = false;
    us_policy_decide(&peer, &cfg, &no_facts, &d);
    assert_int_equal(d.action, US_ACT_NATIVE);
    us_policy_decide(&d2h, &cfg, &no_facts, &d);
    assert_int_equal(d.action, US_ACT_D2H);

    cfg = default_config();
    cfg.fix = false;
    us_policy_decide(&d2h, &cfg, &no_facts, &d);
    assert_int_equal(d.action, US_ACT_NATIVE);
    assert_int_equal(d.rule_count, 1); /* observed, not fixed */

    cfg = default_config();
    cfg.peer_min_bytes = (64u << 20) + 1;
    us_policy_decide(&peer, &cfg, &no_facts, &d);
    assert_int_equal(d.action, US_ACT_NATIVE);
}

/* busy_engine_d2d is measured (detect/engine_late.c), never decided from
 * the context: a same-device copy fires nothing here, in any context */
static void test_policy_same_device_copy_fires_nothing_at_decision(void **state)
{
    (void)state;
    struct us_config cfg = default_config();
    struct us_copy c = copy_of(US_PATH_D2D_SAME, US_API_MEMCPY_ASYNC, 1u << 20);
    struct us_decision d;
    us_policy_decide(&c, &cfg, &(struct us_call_facts){0}, &d);
    assert_int_equal(d.action, US_ACT_NATIVE);
    assert_int_equal(d.rule_count, 0);
}

/* us_policy_native_by_kind says "native" only where us_policy_decide's
 * action is native for every path classification can give a copy of that
 * kind (classify.c path_of: a host-to-device kind gives a host-to-device path
 * or none), at every size around the thresholds and under every fix switch:
 * the chain then makes the native call before it classifies. */
static void test_policy_native_by_kind_only_where_every_path_is_native(void **state)
{
    (void)state;
    static const struct {
        enum cudaMemcpyKind kind;
        enum us_copy_path paths[3];
    } kinds[] = {
        {cudaMemcpyHostToDevice, {US_PATH_H2D_PAGEABLE, US_PATH_H2D_PINNED, US_PATH_UNKNOWN}},
        {cudaMemcpyDeviceToHost, {US_PATH_D2H_PAGEABLE, US_PATH_D2H_PINNED, US_PATH_UNKNOWN}},
        {cudaMemcpyHostToHost, {US_PATH_H2H, US_PATH_UNKNOWN, US_PATH_UNKNOWN}},
    };
    for (int variant = 0; variant < 6; variant++) {
        struct us_config cfg = default_config();
        switch (variant) {
        case 1: cfg.fix = false; break;
        case 2: cfg.fix_h2d = false; break;
        case 3: cfg.fix_d2h = false; break;
        case 4: cfg.d2h_min_bytes = 1u << 20; break;
        case 5: cfg.h2d_min_bytes = 0; break;
        default: break;
        }
        const size_t sizes[] = {0, 1, 4096, cfg.h2d_min_bytes - 1, cfg.h2d_min_bytes, cfg.h2d_min_bytes + 1,
                                cfg.h2d_idle_native_bytes, cfg.h2d_idle_native_bytes + 1, cfg.d2h_min_bytes,
                                cfg.d2h_min_bytes + 1, (size_t)1 << 30};
        bool some_native = false, some_not = false;
        static const enum us_copy_api apis[] = {US_API_MEMCPY_ASYNC, US_API_MEMCPY};
        for (size_t a = 0; a < sizeof apis / sizeof apis[0]; a++)
            for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
                for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
                    struct us_copy c = copy_of(US_PATH_UNKNOWN, apis[a], sizes[z]);
                    c.kind = kinds[k].kind;
                    bool native = us_policy_native_by_kind(&c, &cfg);
                    some_native |= native;
                    for (int p = 0; p < 3; p++) {
                        c.path = kinds[k].paths[p];
                        struct us_decision d;
                        us_policy_decide(&c, &cfg, &no_facts, &d);
                        if (native)
                            assert_int_equal(d.action, US_ACT_NATIVE);
                        else if (d.action != US_ACT_NATIVE)
                            some_not = true;
                    }
                }
        assert_true(some_native);
        assert_true(variant == 1 || some_not); /* not "native" where a path is rewritten */
    }
    /* a kind that leaves the direction open, device-to-device, a peer copy: classified first */
    struct us_config cfg = default_config();
    struct us_copy c = copy_of(US_PATH_UNKNOWN, US_API_MEMCPY_ASYNC, 4);
    c.kind = cudaMemcpyDefault;
    assert_false(us_policy_native_by_kind(&c, &cfg));
    c.kind = cudaMemcpyDeviceToDevice;
    assert_false(us_policy_native_by_kind(&c, &cfg));
    c = copy_of(US_PATH_UNKNOWN, US_API_MEMCPY_PEER_ASYNC, 4);
    c.kind = cudaMemcpyHostToDevice;
    c.peer_src_device = 0;
    c.peer_dst_device = 1;
    assert_false(us_policy_native_by_kind(&c, &cfg));
}

/* From h2d_min_bytes up to h2d_idle_native_bytes a synchronous pageable H2D
 * (cudaMemcpy) stays native whatever its stream: rewritten it would wait for
 * the stream's earlier work all the same. An asynchronous one is rewritten
 * here (the pipeline sends it native on an idle stream), and above the size
 * both are. */
static void test_policy_sync_h2d_native_up_to_idle_native_bytes(void **state)
{
    (void)state;
    struct us_config cfg = default_config();
    cfg.h2d_idle_native_bytes = 2 * cfg.h2d_min_bytes; /* 0 by default: every one rewritten */
    struct us_decision d;
    struct us_copy c = copy_of(US_PATH_H2D_PAGEABLE, US_API_MEMCPY, cfg.h2d_min_bytes);
    us_policy_decide(&c, &cfg, &no_facts, &d);
    assert_int_equal(d.action, US_ACT_NATIVE);
    assert_int_equal(d.rules[0], US_RULE_pageable_h2d);
    c.bytes = cfg.h2d_idle_native_bytes;
    us_policy_decide(&c, &cfg, &no_facts, &d);
    assert_int_equal(d.action, US_ACT_NATIVE);
    c.bytes = cfg.h2d_idle_native_bytes + 1;
    us_policy_decide(&c, &cfg, &no_facts, &d);
    assert_int_equal(d.action, US_ACT_H2D);
    c = copy_of(US_PATH_H2D_PAGEABLE, US_API_MEMCPY_ASYNC, cfg.h2d_min_bytes);
    us_policy_decide(&c, &cfg, &no_facts, &d);
    assert_int_equal(d.action, US_ACT_H2D);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_pageable_h2d_rewritten_above_threshold),
        cmocka_unit_test(test_policy_native_by_kind_only_where_every_path_is_native),
        cmocka_unit_test(test_policy_sync_h2d_native_up_to_idle_native_bytes),
        cmocka_unit_test(test_policy_each_path_maps_to_its_rule_and_pipeline),
        cmocka_unit_test(test_policy_sync_copy_of_pinned_memory_is_sync_memcpy),
        cmocka_unit_test(test_policy_legacy_stream_adds_a_rule),
        cmocka_unit_test(test_policy_fix_switches_turn_rewrites_off),
        cmocka_unit_test(test_policy_same_device_copy_fires_nothing_at_decision),
    };
    return US_RUN_TESTS("test_policy", tests, NULL, NULL);
}
