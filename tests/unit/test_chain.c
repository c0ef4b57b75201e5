/* test_chain.c - the one path a copy takes (chain.c) over the fake runtime
 * table: classify, decide, pipeline or native, record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "chain.h"
#include "device_state.h"
#include "fake_cuda.h"
#include "findings.h"
#include "ptrtable.h"
#include "real.h"
#include "report.h"

#define SLOT (64u << 10)

/* The fake's device memory is host memory: a range is device memory when the
 * pointer table says so; anything else is pageable to the runtime. */
static cudaError_t pointer_attributes(struct cudaPointerAttributes *attr, const void *ptr)
{
    (void)ptr;
    memset(attr, 0, sizeof *attr);
    attr->type = cudaMemoryTypeUnregistered;
    return cudaSuccess;
}

static struct us_real_api with_attributes;

static int setup(void **state)
{
    (void)state;
    fake_cuda_begin_warm(SLOT, 4, 128 * SLOT, 64);
    with_attributes = *us_real();
    with_attributes.cudaPointerGetAttributes = pointer_attributes;
    us_real_install(&with_attributes);
    us_ptrtable_clear();
    us_device_state_reset();
    us_findings_reset();
    return 0;
}

static int teardown(void **state)
{
    us_ptrtable_clear();
    us_device_state_reset();
    us_findings_reset();
    return fake_cuda_teardown(state);
}

static const struct us_report_row *row_of(const struct us_report *r, enum us_rule_id rule)
{
    for (size_t i = 0; i < r->row_count; i++)
        if (r->rows[i].rule == rule)
            return &r->rows[i];
    return NULL;
}

/* A pageable H2D on the legacy stream while a blocking stream exists fires
 * pageable_h2d and legacy_stream. The pipeline rewrites the copy: the
 * pageable_h2d finding is fixed, but the legacy_stream one is not (the copy
 * still runs on the legacy stream, which still serializes with the blocking
 * stream). */
static void test_chain_legacy_stream_finding_is_never_fixed(void **state)
{
    (void)state;
    const size_t bytes = 3 * SLOT + 17;
    unsigned char *src = malloc(bytes), *dst = malloc(bytes);
    assert_non_null(src);
    assert_non_null(dst);
    us_ptrtable_insert((uintptr_t)dst, bytes, US_MEM_DEVICE, 0);
    fake_cuda_fill(src, bytes, 7);
    us_device_note_stream_created(0, true);

    struct us_copy c = {.api = US_API_MEMCPY_ASYNC, .dst = dst, .src = src, .bytes = bytes,
                        .kind = cudaMemcpyHostToDevice, .stream = NULL, .peer_dst_device = -1,
                        .peer_src_device = -1};
    assert_int_equal(us_copy_run(&c), cudaSuccess);
    assert_int_equal(c.path, US_PATH_H2D_PAGEABLE);
    assert_true(fake_cuda_check(dst, bytes, 7)); /* the fake copies at once */
    assert_true(fake_cuda_count(FAKE_cudaMemcpyAsync) > 1); /* chunked: rewritten */

    struct us_report *r = us_findings_collect();
    assert_non_null(r);
    const struct us_report_row *pageable = row_of(r, US_RULE_pageable_h2d);
    const struct us_report_row *legacy = row_of(r, US_RULE_legacy_stream);
    assert_non_null(pageable);
    assert_non_null(legacy);
    assert_int_equal(pageable->fixed, 1); /* the rewrite happened */
    assert_int_equal(pageable->observed, 0);
    assert_int_equal(legacy->fixed, 0);
    assert_int_equal(legacy->observed, 1);
    us_report_free(r);
    us_device_note_stream_destroyed(0, true);
    free(dst);
    free(src);
}

/* With no rule fired and nothing to rewrite the chain is the native call. */
static void test_chain_pinned_copy_is_native_and_unrecorded(void **state)
{
    (void)state;
    static char dst[4096], src[4096];
    us_ptrtable_insert((uintptr_t)dst, sizeof dst, US_MEM_DEVICE, 0);
    us_ptrtable_insert((uintptr_t)src, sizeof src, US_MEM_PINNED, -1);
    cudaStream_t s = fake_cuda_user_stream(0);
    unsigned before = fake_cuda_count(FAKE_cudaMemcpyAsync);
    struct us_copy c = {.api = US_API_MEMCPY_ASYNC, .dst = dst, .src = src, .bytes = 4096,
                        .kind = cudaMemcpyHostToDevice, .stream = s, .peer_dst_device = -1,
                        .peer_src_device = -1};
    assert_int_equal(us_copy_run(&c), cudaSuccess);
    assert_int_equal(c.path, US_PATH_H2D_PINNED);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), before + 1);
    struct us_report *r = us_findings_collect();
    assert_non_null(r);
    assert_int_equal(r->row_count, 0);
    us_report_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_chain_legacy_stream_finding_is_never_fixed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_pinned_copy_is_native_and_unrecorded, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
