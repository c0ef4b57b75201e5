/* test_chain.c - the one path a copy takes (chain.c) over the fake runtime
 * table: classify, decide, pipeline or native, record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "summary.h"

#include "chain.h"
#include "device_state.h"
#include "fake_cuda.h"
#include "findings.h"
#include "hostpages.h"
#include "ptrtable.h"
#include "real.h"
#include "report.h"
#include "config.h"
#include "streams.h"
#include "spill.h"
#include "state.h"

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

/* A pageable H2D behind queued work that its slots cannot take whole: with
 * spill memory the caller is freed (fixed, no host wait); without it
 * (spill_max 0) the copy waits for its own chunks behind the queue, and the
 * finding says held: observed, not fixed. */
static void test_chain_copy_held_behind_queued_work_is_not_fixed(void **state)
{
    (void)state;
    const size_t bytes = 70 * SLOT; /* a claim takes at most 64 slots: it cycles */
    unsigned char *src = malloc(bytes), *dst = malloc(bytes);
    assert_non_null(src);
    assert_non_null(dst);
    us_ptrtable_insert((uintptr_t)dst, bytes, US_MEM_DEVICE, 0);
    cudaStream_t s = fake_cuda_user_stream(0);
    us_streams_note_created(s, 0, false);
    fake_cuda.streams_busy = true;
    for (int spill = 1; spill >= 0; spill--) {
        struct us_config cfg = *us_config();
        cfg.spill_max = spill ? (size_t)1 << 30 : 0;
        us_config_set(&cfg);
        us_findings_reset();
        fake_cuda_fill(src, bytes, 9 + spill);
        unsigned waits = fake_cuda_host_waits();
        struct us_copy c = {.api = US_API_MEMCPY_ASYNC, .dst = dst, .src = src, .bytes = bytes,
                            .kind = cudaMemcpyHostToDevice, .stream = s, .peer_dst_device = -1,
                            .peer_src_device = -1};
        assert_int_equal(us_copy_run(&c), cudaSuccess);
        assert_true(fake_cuda_check(dst, bytes, 9 + spill));
        struct us_report *r = us_findings_collect();
        assert_non_null(r);
        const struct us_report_row *row = row_of(r, US_RULE_pageable_h2d);
        assert_non_null(row);
        assert_int_equal(row->fixed, spill ? 1 : 0);
        assert_int_equal(row->observed, spill ? 0 : 1);
        assert_int_equal(fake_cuda_host_waits() - waits, spill ? 0 : 6);
        us_report_free(r);
    }
    us_spill_reset();
    us_streams_note_destroyed(s);
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

/* The native call of a runtime copy is made as the shim's own work: the
 * runtime's call into the driver below it (the driver layer, which wraps the
 * runtime's copy functions) then passes straight through, and the copy is
 * handled once, at the layer the program called. */
static bool passthrough_seen_by_native;
static cudaError_t (*memcpy_async_before)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);

static cudaError_t memcpy_async_noting(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                       cudaStream_t stream)
{
    passthrough_seen_by_native = us_passthrough();
    return memcpy_async_before(dst, src, count, kind, stream);
}

static void test_chain_native_call_passes_the_layer_below_through(void **state)
{
    (void)state;
    static char dst[4096], src[4096];
    us_ptrtable_insert((uintptr_t)dst, sizeof dst, US_MEM_DEVICE, 0);
    us_ptrtable_insert((uintptr_t)src, sizeof src, US_MEM_PINNED, -1);
    memcpy_async_before = with_attributes.cudaMemcpyAsync;
    with_attributes.cudaMemcpyAsync = memcpy_async_noting;
    passthrough_seen_by_native = false;
    struct us_copy c = {.api = US_API_MEMCPY_ASYNC, .dst = dst, .src = src, .bytes = 4096,
                        .kind = cudaMemcpyHostToDevice, .stream = fake_cuda_user_stream(0), .peer_dst_device = -1,
                        .peer_src_device = -1};
    assert_false(us_passthrough());
    assert_int_equal(us_copy_run(&c), cudaSuccess);
    assert_true(passthrough_seen_by_native);
    assert_false(us_passthrough()); /* and the mark is gone after */
    with_attributes.cudaMemcpyAsync = memcpy_async_before;
}

/* A copy that goes native whatever its memory (an H2D below h2d_min_bytes)
 * from memory the table does not know: the native call first, then the
 * runtime's pointer query and the finding, at the program's call; in strict
 * mode, which must refuse a finding before the call, the query comes first. */
static unsigned native_calls, native_calls_at_query;
static bool queried;

static cudaError_t memcpy_async_counting(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                         cudaStream_t stream)
{
    native_calls++;
    return memcpy_async_before(dst, src, count, kind, stream);
}

static cudaError_t pointer_attributes_noting(struct cudaPointerAttributes *attr, const void *ptr)
{
    if (!queried)
        native_calls_at_query = native_calls;
    queried = true;
    return pointer_attributes(attr, ptr);
}

static void small_pageable_h2d(int mode, unsigned *calls_at_query)
{
    static char dst[4096];
    char *src = malloc(4096);
    assert_non_null(src);
    us_ptrtable_insert((uintptr_t)dst, sizeof dst, US_MEM_DEVICE, 0);
    struct us_config cfg = *us_config();
    cfg.h2d_min_bytes = 1u << 20;
    cfg.mode = mode;
    cfg.strict_severity = US_SEVERITY_HIGH; /* pageable_h2d (medium) is recorded, not refused */
    us_config_set(&cfg);
    memcpy_async_before = with_attributes.cudaMemcpyAsync;
    with_attributes.cudaMemcpyAsync = memcpy_async_counting;
    with_attributes.cudaPointerGetAttributes = pointer_attributes_noting;
    native_calls = 0;
    queried = false;
    struct us_copy c = {.api = US_API_MEMCPY_ASYNC, .dst = dst, .src = src, .bytes = 4096,
                        .kind = cudaMemcpyHostToDevice, .stream = fake_cuda_user_stream(0), .peer_dst_device = -1,
                        .peer_src_device = -1};
    assert_int_equal(us_copy_run(&c), cudaSuccess);
    assert_int_equal(native_calls, 1);
    assert_true(queried);
    *calls_at_query = native_calls_at_query;
    assert_int_equal(c.path, US_PATH_H2D_PAGEABLE);
    struct us_report *r = us_findings_collect();
    assert_non_null(r);
    const struct us_report_row *row = row_of(r, US_RULE_pageable_h2d);
    assert_non_null(row);
    assert_int_equal(row->observed, 1);
    assert_int_equal(row->fixed, 0);
    assert_true(row->site.depth > 0);
    us_report_free(r);
    with_attributes.cudaMemcpyAsync = memcpy_async_before;
    with_attributes.cudaPointerGetAttributes = pointer_attributes;
    free(src);
}

static void test_chain_small_pageable_h2d_native_first_then_classified(void **state)
{
    (void)state;
    unsigned at_query;
    small_pageable_h2d(US_MODE_REPORT, &at_query);
    assert_int_equal(at_query, 1); /* asked after the native call */
}

static void test_chain_strict_mode_classifies_before_the_call(void **state)
{
    (void)state;
    unsigned at_query;
    small_pageable_h2d(US_MODE_STRICT, &at_query);
    assert_int_equal(at_query, 0);
}

/* The first device allocation's warm-up (us_copy_warm) asks the runtime's
 * pointer query of host memory, whose first calls are slow, so that the
 * program's first copies do not. */
static unsigned pointer_queries;

static cudaError_t pointer_attributes_counting(struct cudaPointerAttributes *attr, const void *ptr)
{
    pointer_queries++;
    return pointer_attributes(attr, ptr);
}

static void test_chain_warm_asks_the_pointer_query(void **state)
{
    (void)state;
    with_attributes.cudaPointerGetAttributes = pointer_attributes_counting;
    pointer_queries = 0;
    us_copy_warm(NULL, 0);
    assert_true(pointer_queries >= 2); /* a heap and a stack address */
    with_attributes.cudaPointerGetAttributes = pointer_attributes;
}

/* Host pages the runtime called pageable are remembered (hostpages.h): a
 * second copy from the same buffer does not ask again, until memory is
 * mapped or registered; strict mode always asks. */
static void test_chain_pageable_page_remembered_until_memory_is_mapped(void **state)
{
    (void)state;
    static char dst[4096];
    char *src = malloc(4096);
    assert_non_null(src);
    us_ptrtable_insert((uintptr_t)dst, sizeof dst, US_MEM_DEVICE, 0);
    with_attributes.cudaPointerGetAttributes = pointer_attributes_counting;
    us_hostpages_mapping_changed();
    struct us_config cfg = *us_config();
    cfg.h2d_min_bytes = 1u << 20; /* native, classified after the call */
    us_config_set(&cfg);
    struct us_copy c = {.api = US_API_MEMCPY_ASYNC, .dst = dst, .src = src, .bytes = 64,
                        .kind = cudaMemcpyHostToDevice, .stream = fake_cuda_user_stream(0), .peer_dst_device = -1,
                        .peer_src_device = -1};
    unsigned asked[4];
    for (int i = 0; i < 4; i++) {
        if (i == 2)
            us_hostpages_mapping_changed(); /* as a cudaHostAlloc does */
        if (i == 3) {
            cfg.mode = US_MODE_STRICT;
            cfg.strict_severity = US_SEVERITY_HIGH;
            us_config_set(&cfg);
        }
        pointer_queries = 0;
        assert_int_equal(us_copy_run(&c), cudaSuccess);
        assert_int_equal(c.path, US_PATH_H2D_PAGEABLE);
        asked[i] = pointer_queries;
    }
    assert_int_equal(asked[0], 1);
    assert_int_equal(asked[1], 0); /* remembered */
    assert_false(c.src_mem.remembered); /* strict mode asked */
    assert_int_equal(asked[2], 1); /* forgotten by the mapping */
    assert_int_equal(asked[3], 1); /* strict mode */
    with_attributes.cudaPointerGetAttributes = pointer_attributes;
    struct us_report *r = us_findings_collect();
    assert_non_null(r);
    uint64_t observed = 0; /* strict mode's call site is taken elsewhere: a row of its own */
    for (size_t i = 0; i < r->row_count; i++)
        if (r->rows[i].rule == US_RULE_pageable_h2d)
            observed += r->rows[i].observed + r->rows[i].fixed;
    assert_int_equal(observed, 4);
    us_report_free(r);
    free(src);
}

/* A page remembered as pageable that was pinned where the shim could not
 * see it: the D2H pipeline asks again while its first chunk is on the GPU,
 * and the copy goes native (asynchronous, as the program asked of pinned
 * memory), with the findings of the runtime's answer; the next copy asks. */
static const void *pinned_unseen;

static cudaError_t pointer_attributes_pinned_unseen(struct cudaPointerAttributes *attr, const void *ptr)
{
    pointer_queries++;
    pointer_attributes(attr, ptr);
    if (ptr == pinned_unseen)
        attr->type = cudaMemoryTypeHost;
    return cudaSuccess;
}

/* A 4 KiB D2H from `src` (device memory to the table) into malloc memory
 * on a user stream, with the runtime's answers of
 * pointer_attributes_pinned_unseen (nothing pinned unseen yet). */
static struct us_copy pinned_unseen_d2h(char *dst, char *src)
{
    us_ptrtable_insert((uintptr_t)src, 4096, US_MEM_DEVICE, 0);
    with_attributes.cudaPointerGetAttributes = pointer_attributes_pinned_unseen;
    us_hostpages_mapping_changed();
    pinned_unseen = NULL;
    return (struct us_copy){.api = US_API_MEMCPY_ASYNC, .dst = dst, .src = src, .bytes = 4096,
                            .kind = cudaMemcpyDeviceToHost, .stream = fake_cuda_user_stream(0),
                            .peer_dst_device = -1, .peer_src_device = -1};
}

static void test_chain_remembered_page_pinned_unseen_goes_native(void **state)
{
    (void)state;
    static char src[4096];
    char *dst = malloc(4096);
    assert_non_null(dst);
    memset(src, 7, sizeof src);
    struct us_copy c = pinned_unseen_d2h(dst, src);
    pointer_queries = 0;
    assert_int_equal(us_copy_run(&c), cudaSuccess); /* asked, pageable: rewritten */
    assert_int_equal(pointer_queries, 1);
    assert_int_equal(c.path, US_PATH_D2H_PAGEABLE);

    pinned_unseen = dst; /* registered by a call the shim did not see */
    memset(dst, 0, 4096);
    memset(src, 9, sizeof src);
    unsigned native_before = fake_cuda_count(FAKE_cudaMemcpyAsync);
    pointer_queries = 0;
    c.dst_mem.remembered = false;
    assert_int_equal(us_copy_run(&c), cudaSuccess);
    assert_int_equal(c.path, US_PATH_D2H_PINNED); /* the runtime's answer */
    assert_int_equal(pointer_queries, 2);        /* the confirmation, then the classification */
    /* the pipeline's first chunk, then the native copy of the whole */
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), native_before + 2);
    assert_int_equal(us_real()->cudaStreamSynchronize(fake_cuda_user_stream(0)), cudaSuccess);
    for (int i = 0; i < 4096; i++)
        assert_int_equal((unsigned char)dst[i], 9);

    pointer_queries = 0;
    assert_int_equal(us_copy_run(&c), cudaSuccess);
    assert_int_equal(pointer_queries, 1); /* forgotten: asked */
    assert_int_equal(c.path, US_PATH_D2H_PINNED);
    with_attributes.cudaPointerGetAttributes = pointer_attributes;

    struct us_report *r = us_findings_collect();
    assert_non_null(r);
    const struct us_report_row *row = row_of(r, US_RULE_pageable_d2h);
    assert_non_null(row);
    assert_int_equal(row->fixed + row->observed, 1); /* only the first copy's */
    assert_int_equal(row->fixed, 1);
    us_report_free(r);
    free(dst);
}

/* A rewritten copy is on the report's timeline once: a span named after
 * its rule, on the source's device, over the same interval as its finding
 * (one pair of clock reads serves both). A copy its pipeline declined after
 * starting (the page pinned unseen) leaves no span. */
static void test_chain_rewritten_copy_span_is_its_finding_interval(void **state)
{
    (void)state;
    static char src[4096];
    char *dst = malloc(4096);
    assert_non_null(dst);
    struct us_copy c = pinned_unseen_d2h(dst, src);
    assert_int_equal(us_copy_run(&c), cudaSuccess); /* rewritten */
    pinned_unseen = dst;
    c.dst_mem.remembered = false;
    assert_int_equal(us_copy_run(&c), cudaSuccess); /* started, refuted, native */
    assert_int_equal(us_real()->cudaStreamSynchronize(fake_cuda_user_stream(0)), cudaSuccess);
    with_attributes.cudaPointerGetAttributes = pointer_attributes;

    struct us_report *r = us_findings_collect();
    assert_non_null(r);
    assert_int_equal(r->span_count, 1);
    const struct us_report_span *span = &r->spans[0];
    assert_string_equal(span->name, "pageable_d2h");
    assert_int_equal(span->device, 0);
    assert_int_equal(span->bytes, 4096);
    const struct us_report_event *fixed = NULL;
    for (size_t i = 0; i < r->event_count; i++)
        if (r->events[i].rule == US_RULE_pageable_d2h && r->events[i].fixed)
            fixed = &r->events[i];
    assert_non_null(fixed);
    assert_int_equal(span->start_ns, fixed->start_ns);
    assert_int_equal(span->end_ns, fixed->start_ns + fixed->held_ns);
    us_report_free(r);
    free(dst);
}

/* A driver copy's native call goes to the function the driver layer
 * identified, with the driver's arguments. */
static CUdeviceptr driver_dst;
static const void *driver_src;
static size_t driver_bytes;
static CUstream driver_stream;

static CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream)
{
    driver_dst = dst;
    driver_src = src;
    driver_bytes = bytes;
    driver_stream = stream;
    return CUDA_ERROR_INVALID_HANDLE;
}

static void test_chain_driver_copy_native_call(void **state)
{
    (void)state;
    static char dst[100], src[100];
    CUstream stream = (CUstream)0x1234;
    struct us_copy c = {.api = US_API_CU_HTOD_ASYNC_PTSZ, .dst = dst, .src = src, .bytes = sizeof dst,
                        .kind = cudaMemcpyHostToDevice, .stream = (cudaStream_t)stream, .peer_dst_device = -1,
                        .peer_src_device = -1, .driver_fn = (const void *)fake_cuMemcpyHtoDAsync};
    /* unknown memory: native, and the driver's error comes back as it is */
    assert_int_equal(us_copy_run(&c), cudaErrorInvalidResourceHandle);
    assert_true(driver_dst == (CUdeviceptr)(uintptr_t)dst);
    assert_ptr_equal(driver_src, src);
    assert_int_equal(driver_bytes, sizeof dst);
    assert_ptr_equal(driver_stream, stream);
    assert_string_equal(us_copy_api_name(c.api), "cuMemcpyHtoDAsync_v2_ptsz");
    assert_true(us_copy_is_per_thread(&c));
    assert_false(us_copy_is_sync(&c));
    c.driver_fn = NULL; /* never called through NULL */
    assert_int_equal(us_copy_native(&c), US_ERR_NO_REAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_chain_legacy_stream_finding_is_never_fixed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_copy_held_behind_queued_work_is_not_fixed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_pinned_copy_is_native_and_unrecorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_native_call_passes_the_layer_below_through, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_driver_copy_native_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_small_pageable_h2d_native_first_then_classified, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_warm_asks_the_pointer_query, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_pageable_page_remembered_until_memory_is_mapped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_remembered_page_pinned_unseen_goes_native, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_rewritten_copy_span_is_its_finding_interval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_strict_mode_classifies_before_the_call, setup, teardown),
    };
    return US_RUN_TESTS("test_chain", tests, NULL, NULL);
}
