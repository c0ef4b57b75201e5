/* test_pipeline_h2d.c - case B over the fake runtime table: data for every
 * size class, chunks on the user stream with no host wait while slots
 * suffice, own-slot reuse past the claim cap, synchronous semantics,
 * declines and errors mid-pipeline. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "summary.h"

#include "config.h"
#include "copy.h"
#include "fake_cuda.h"
#include "grower.h"
#include "log.h"
#include "pipeline.h"
#include "real.h"
#include "spill.h"
#include "staging.h"
#include "streams.h"

#define SLOT (64u << 10)

static int setup(void **state)
{
    (void)state;
    fake_cuda_begin(SLOT, 4, 128 * SLOT);
    return 0;
}

/* A pool of 64 slots already there: the chunking and call counts of a
 * process past its first copies (a cold pool grows one slot a copy). */
static int setup_warm(void **state)
{
    (void)state;
    fake_cuda_begin_warm(SLOT, 4, 128 * SLOT, 64);
    return 0;
}

/* src+3 (pageable) -> dst+5 (device 0), checked (fake_cuda_copy_checked). */
static bool h2d_checked(int api, size_t bytes, cudaStream_t stream, cudaError_t *result)
{
    return fake_cuda_copy_checked(us_pipeline_h2d, api, bytes, stream, -1, 0, result);
}

/* The same from a cold pool: a copy that finds too few slots and needs more
 * than it may pin inside the call goes native (false) while the grower
 * thread adds them (staging.h); once the grower is idle, it is rewritten. */
static bool h2d_checked_grown(int api, size_t bytes, cudaStream_t stream, cudaError_t *result)
{
    if (h2d_checked(api, bytes, stream, result))
        return true;
    us_grower_wait_idle();
    return h2d_checked(api, bytes, stream, result);
}

/* A slot registered in pieces (staging.h): its copy goes in parts that end
 * where a piece ends, since the driver refuses a copy across two
 * registrations; a part refused after another was queued leaves the slot
 * lost (the queued transfer has no event after it), one refused first does
 * not (nothing was queued). */
static void test_pieced_slot_copies_split_where_a_piece_ends(void **state)
{
    (void)state;
    const size_t piece = US_STAGING_PIN_PIECE;
    char *mem = aligned_alloc(piece, 2 * piece), *dev = malloc(piece);
    assert_non_null(mem);
    assert_non_null(dev);
    struct us_slot slot = {.ptr = mem + piece / 2, .bytes = piece, .pieced = true};
    struct us_pipe_slots s = {.n = 1, .slot = {&slot}, .pending = {-1}};
    struct us_pipe p = {.real = us_real(), .stream = fake_cuda_user_stream(0)};
    memset(slot.ptr, 7, piece);
    assert_int_equal(us_pipe_copy_chunk(&p, &s, 0, dev, slot.ptr, piece, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 2);
    const struct fake_cuda_call *first = &fake_cuda.calls[fake_cuda_find(FAKE_cudaMemcpyAsync, 0)];
    const struct fake_cuda_call *second = &fake_cuda.calls[fake_cuda_find(FAKE_cudaMemcpyAsync, 1)];
    assert_ptr_equal(first->src, slot.ptr);
    assert_int_equal(first->bytes, piece / 2);
    assert_ptr_equal(second->src, mem + piece);
    assert_ptr_equal(second->dst, dev + piece / 2);
    assert_int_equal(second->bytes, piece / 2);
    assert_int_equal(s.pending[0], -1);

    fake_cuda_fail(FAKE_cudaMemcpyAsync, 2, 1, cudaErrorLaunchFailure); /* the second part */
    assert_int_equal(us_pipe_copy_chunk(&p, &s, 0, dev, slot.ptr, piece, cudaMemcpyHostToDevice),
                     cudaErrorLaunchFailure);
    assert_int_equal(s.pending[0], US_STAGING_LOST);

    s.pending[0] = -1;
    fake_cuda_fail(FAKE_cudaMemcpyAsync, 1, 1, cudaErrorInvalidValue); /* the first part */
    assert_int_equal(us_pipe_copy_chunk(&p, &s, 0, dev, slot.ptr, piece, cudaMemcpyHostToDevice),
                     cudaErrorInvalidValue);
    assert_int_equal(s.pending[0], -1);

    slot.pieced = false; /* cudaHostAlloc's memory: one call */
    unsigned before = fake_cuda_count(FAKE_cudaMemcpyAsync);
    assert_int_equal(us_pipe_copy_chunk(&p, &s, 0, dev, slot.ptr, piece, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), before + 1);
    free(mem);
    free(dev);
}

static void test_h2d_data_every_size_class(void **state)
{
    (void)state;
    const size_t sizes[] = {1, 4097, SLOT - 1, SLOT, SLOT + 1, 3 * SLOT + 17, 40 * SLOT + 5};
    cudaStream_t s = fake_cuda_user_stream(0);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cudaError_t result = cudaErrorUnknown;
        assert_true(h2d_checked_grown(US_API_MEMCPY_ASYNC, sizes[i], s, &result));
        assert_int_equal(result, cudaSuccess);
    }
    assert_int_equal(fake_cuda_calls_not_relaxed(), 0);
}

static void test_h2d_chunks_on_the_user_stream_without_host_wait(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(0);
    cudaError_t result;
    assert_true(h2d_checked(US_API_MEMCPY_ASYNC, 10 * SLOT, s, &result));
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 10);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventRecord), 10); /* 2 calls per chunk */
    for (size_t i = 0; i < fake_cuda.ncalls; i++)
        if (fake_cuda.calls[i].fn == FAKE_cudaMemcpyAsync || fake_cuda.calls[i].fn == FAKE_cudaEventRecord)
            assert_ptr_equal(fake_cuda.calls[i].stream, s);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventQuery), 0);
    assert_int_equal(fake_cuda_host_waits(), 0); /* returned before its chunks would have landed */
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 0);

    /* its slots are pending: the next copy takes free ones first, without a
     * query; once the free ones are gone it queries the pending ones, and
     * reuses them, still without an allocation */
    assert_true(h2d_checked(US_API_MEMCPY_ASYNC, 10 * SLOT, s, &result));
    assert_int_equal(fake_cuda_count(FAKE_cudaEventQuery), 0);
    for (int i = 0; i < 6; i++)
        assert_true(h2d_checked(US_API_MEMCPY_ASYNC, 10 * SLOT, s, &result));
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 0);
    assert_true(fake_cuda_count(FAKE_cudaEventQuery) >= 10);
}

static void test_h2d_events_on_the_streams_device(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(1); /* device 0 is current */
    cudaError_t result;
    assert_true(h2d_checked_grown(US_API_MEMCPY_ASYNC, 2 * SLOT, s, &result));
    assert_int_equal(result, cudaSuccess);
    int rec = fake_cuda_find(FAKE_cudaEventRecord, 0);
    assert_int_equal(fake_cuda_event_device(fake_cuda.calls[rec].event), 1);
}

/* A non-blocking stream the shim saw made: one whose idleness it can tell. */
static cudaStream_t known_stream(void)
{
    cudaStream_t s = fake_cuda_user_stream(0);
    us_streams_note_created(s, 0, false);
    return s;
}

static void test_h2d_larger_than_its_slots_waits_for_its_own_chunks(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 2, 8 * SLOT); /* a copy claims at most 4 slots */
    cudaStream_t s = known_stream(); /* idle: waiting for its own chunks waits for nothing else */
    cudaError_t result;
    assert_true(h2d_checked(US_API_MEMCPY_ASYNC, 10 * SLOT, s, &result));
    assert_int_equal(result, cudaSuccess);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventSynchronize), 6);
    /* each wait is for an event this copy recorded on this stream */
    for (unsigned i = 0; i < 6; i++) {
        int w = fake_cuda_find(FAKE_cudaEventSynchronize, i);
        int rec = fake_cuda_find(FAKE_cudaEventRecord, i);
        assert_true(rec < w);
        assert_ptr_equal(fake_cuda.calls[rec].event, fake_cuda.calls[w].event);
    }
}

static bool last_held;

/* us_pipeline_h2d_held, its answer kept in last_held (the checked copy takes
 * the pipelines' common signature) */
static bool h2d_telling(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result)
{
    return us_pipeline_h2d_held(c, home, result, &last_held);
}

static bool h2d_checked_telling(int api, size_t bytes, cudaStream_t stream, cudaError_t *result)
{
    last_held = true;
    return fake_cuda_copy_checked(h2d_telling, api, bytes, stream, -1, 0, result);
}

/* Behind queued work, a copy larger than its slots returns without waiting:
 * the bytes past the slots' first round are spilled, and a host function
 * before each further chunk's transfer moves them into its slot. */
static void test_h2d_behind_queued_work_spills_and_returns_without_waiting(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 2, 8 * SLOT); /* a copy claims at most 4 slots */
    cudaStream_t s = known_stream();
    fake_cuda.streams_busy = true;
    cudaError_t result = cudaErrorUnknown;
    assert_true(h2d_checked_telling(US_API_MEMCPY_ASYNC, 10 * SLOT + 7, s, &result)); /* data checked */
    assert_int_equal(result, cudaSuccess);
    assert_false(last_held);
    assert_int_equal(fake_cuda_host_waits(), 0);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 11);
    assert_int_equal(fake_cuda_count(FAKE_cudaLaunchHostFunc), 7); /* chunks 4..10 */
    /* each fed chunk: its host function on the user stream, then its transfer */
    for (unsigned i = 0; i < 7; i++) {
        int hf = fake_cuda_find(FAKE_cudaLaunchHostFunc, i);
        int copy = fake_cuda_find(FAKE_cudaMemcpyAsync, 4 + i);
        assert_true(hf < copy);
        assert_true(fake_cuda_find(FAKE_cudaMemcpyAsync, 3 + i) < hf);
        assert_ptr_equal(fake_cuda.calls[hf].stream, s);
    }
    assert_int_equal(us_spill_taken_bytes(), 0); /* every host function ran: the spill is back */
    assert_true(us_spill_carved_bytes() >= 6 * SLOT + 7);
    us_spill_reset();
}

/* The same copy synchronous (it waits for the stream all the same), on an
 * idle stream, or with spill_max 0: it cycles through its slots; only the
 * last one, behind queued work, held its caller. */
static void test_h2d_cycles_where_spilling_frees_nobody_or_is_off(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 2, 8 * SLOT);
    cudaStream_t s = known_stream();
    cudaError_t result;
    assert_true(h2d_checked_telling(US_API_MEMCPY_ASYNC, 10 * SLOT, s, &result)); /* idle */
    assert_false(last_held);
    fake_cuda.streams_busy = true;
    assert_true(h2d_checked_telling(US_API_MEMCPY, 10 * SLOT, NULL, &result));
    assert_false(last_held);
    assert_int_equal(fake_cuda_count(FAKE_cudaLaunchHostFunc), 0);
    struct us_config cfg = *us_config();
    cfg.spill_max = 0;
    us_config_set(&cfg);
    unsigned waits = fake_cuda_host_waits();
    assert_true(h2d_checked_telling(US_API_MEMCPY_ASYNC, 10 * SLOT, s, &result));
    assert_int_equal(result, cudaSuccess);
    assert_true(last_held);
    assert_int_equal(fake_cuda_host_waits(), waits + 6);
    assert_int_equal(fake_cuda_count(FAKE_cudaLaunchHostFunc), 0);
    assert_int_equal(us_spill_carved_bytes(), 0);
}

/* A host function the stream refused: the copy returns the error, and the
 * spill goes back once the host functions enqueued before it have run. */
static void test_h2d_refused_host_function_returns_error_and_the_spill(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 2, 8 * SLOT);
    cudaStream_t s = known_stream();
    fake_cuda.streams_busy = true;
    fake_cuda_fail(FAKE_cudaLaunchHostFunc, 2, 1, cudaErrorLaunchOutOfResources);
    cudaError_t result = cudaSuccess;
    assert_true(h2d_checked_telling(US_API_MEMCPY_ASYNC, 10 * SLOT, s, &result));
    assert_int_equal(result, cudaErrorLaunchOutOfResources);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 5); /* no transfer after the refused one */
    assert_int_equal(us_spill_taken_bytes(), 0);
    us_spill_reset();
}

static void test_h2d_sync_api_returns_when_done(void **state)
{
    (void)state;
    cudaError_t result;
    assert_true(h2d_checked(US_API_MEMCPY, 3 * SLOT, NULL, &result));
    assert_int_equal(result, cudaSuccess);
    int last = fake_cuda_find(FAKE_cudaEventSynchronize, 0);
    assert_true(last > fake_cuda_find(FAKE_cudaMemcpyAsync, 2));
    assert_ptr_equal(fake_cuda.calls[fake_cuda_find(FAKE_cudaMemcpyAsync, 0)].stream, cudaStreamLegacy);
    /* an asynchronous failure shows in the result */
    fake_cuda.stream_error = cudaErrorLaunchFailure;
    assert_true(h2d_checked(US_API_MEMCPY_PTDS, 3 * SLOT, NULL, &result));
    assert_int_equal(result, cudaErrorLaunchFailure);
    assert_ptr_equal(fake_cuda.calls[fake_cuda_find(FAKE_cudaMemcpyAsync, 3)].stream, cudaStreamPerThread);
}

static void test_h2d_no_free_slot_declines(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 2, 2 * SLOT);
    cudaStream_t s = fake_cuda_user_stream(0);
    cudaError_t result = cudaErrorUnknown;
    assert_true(h2d_checked(US_API_MEMCPY_ASYNC, SLOT, s, &result)); /* grows one of the two */
    fake_cuda.events_busy = true; /* its slot still read by the GPU */
    assert_true(h2d_checked(US_API_MEMCPY_ASYNC, SLOT, s, &result)); /* grows the other one */
    unsigned copies = fake_cuda_count(FAKE_cudaMemcpyAsync);
    result = cudaErrorUnknown;
    assert_false(h2d_checked(US_API_MEMCPY_ASYNC, SLOT, s, &result));
    assert_int_equal(result, cudaErrorUnknown);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), copies);
    assert_int_equal(fake_cuda_host_waits(), 0); /* declined at once: nobody waited for the busy slots */
}

static void test_h2d_capture_declines(void **state)
{
    (void)state;
    fake_cuda.capture = cudaStreamCaptureStatusActive;
    cudaError_t result = cudaErrorUnknown;
    assert_false(h2d_checked(US_API_MEMCPY_ASYNC, SLOT, fake_cuda_user_stream(0), &result));
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 0);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 0);
}

static void test_h2d_no_pinned_memory_declines_once_logged(void **state)
{
    (void)state;
    fake_cuda_fail(FAKE_cudaHostAlloc, 1, 0, cudaErrorMemoryAllocation);
    cudaError_t result;
    cudaStream_t s = fake_cuda_user_stream(0);
    assert_false(h2d_checked(US_API_MEMCPY_ASYNC, SLOT, s, &result));
    assert_false(h2d_checked(US_API_MEMCPY_ASYNC, SLOT, s, &result));
    assert_int_equal(fake_cuda_log_count("cudaHostAlloc"), 1);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 0);
}

static void test_h2d_no_events_declines(void **state)
{
    (void)state;
    fake_cuda_fail(FAKE_cudaEventCreateWithFlags, 1, 0, cudaErrorMemoryAllocation);
    cudaError_t result;
    assert_false(h2d_checked(US_API_MEMCPY_ASYNC, SLOT, fake_cuda_user_stream(0), &result));
    assert_int_equal(fake_cuda_log_count("cannot create the shim's events"), 1);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 0);
    /* the slots went back free */
    fake_cuda_fail(FAKE_cudaEventCreateWithFlags, 0, 0, cudaSuccess);
    assert_true(h2d_checked(US_API_MEMCPY_ASYNC, SLOT, fake_cuda_user_stream(0), &result));
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
}

/* Every row of real_api.def with rewrite 1 is needed: a runtime that lacks
 * the wait (cudaEventSynchronize, the one a synchronous copy ends with)
 * gets no rewrite at all, not even of an asynchronous copy. */
static void test_h2d_runtime_without_a_rewrite_function_declines(void **state)
{
    (void)state;
    const struct us_real_api *fake = us_real();
    assert_null(us_real_missing_for_rewrite(fake)); /* the fake has every one */
    struct us_real_api without = *fake;
    without.cudaEventSynchronize = NULL;
    us_real_install(&without);
    assert_string_equal(us_real_missing_for_rewrite(&without), "cudaEventSynchronize");
    cudaError_t result;
    assert_false(h2d_checked(US_API_MEMCPY_ASYNC, SLOT, fake_cuda_user_stream(0), &result));
    assert_int_equal(fake_cuda_log_count("the runtime lacks cudaEventSynchronize"), 1);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 0);
}

/* Up to h2d_idle_native_bytes, a copy whose stream has no work queued goes
 * native (the stall it is rewritten for is the wait for that work), once
 * logged; behind queued work, or above the size, it is rewritten. (A
 * synchronous one of that size goes native whatever its stream: policy.c,
 * test_policy.) */
static void test_h2d_idle_stream_native_up_to_the_option(void **state)
{
    (void)state;
    struct us_config cfg = *us_config();
    cfg.h2d_idle_native_bytes = 4 * SLOT;
    us_config_set(&cfg);
    cudaStream_t s = fake_cuda_user_stream(0);
    us_streams_note_created(s, 0, false);
    cudaError_t result = cudaErrorUnknown;
    assert_false(h2d_checked(US_API_MEMCPY_ASYNC, 4 * SLOT, s, &result));
    assert_false(h2d_checked(US_API_MEMCPY, SLOT, s, &result));
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 0);
    assert_true(fake_cuda_count(FAKE_cudaStreamQuery) >= 1);
    assert_int_equal(fake_cuda_log_count("on a stream with no work queued went native"), 1);
    assert_true(h2d_checked(US_API_MEMCPY_ASYNC, 4 * SLOT + 1, s, &result)); /* above: rewritten */
    assert_int_equal(result, cudaSuccess);
    fake_cuda.streams_busy = true; /* behind queued work: rewritten */
    assert_true(h2d_checked(US_API_MEMCPY_ASYNC, SLOT, s, &result));
    assert_int_equal(result, cudaSuccess);
    fake_cuda.streams_busy = false;
    us_streams_reset();
}

static void test_h2d_error_mid_pipeline_is_returned(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(0);
    fake_cuda_fail(FAKE_cudaMemcpyAsync, 4, 1, cudaErrorIllegalAddress);
    cudaError_t result = cudaSuccess;
    assert_true(h2d_checked_grown(US_API_MEMCPY_ASYNC, 8 * SLOT, s, &result));
    assert_int_equal(result, cudaErrorIllegalAddress);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 4);
    /* the first chunk refused: native answers */
    fake_cuda_fail(FAKE_cudaMemcpyAsync, 1, 1, cudaErrorInvalidValue);
    assert_false(h2d_checked(US_API_MEMCPY_ASYNC, 8 * SLOT, s, &result));
    /* a record that fails after its copy was issued: the slot is never reused */
    fake_cuda_config(SLOT, 2, 2 * SLOT);
    us_staging_reset();
    fake_cuda_fail(FAKE_cudaEventRecord, 1, 1, cudaErrorLaunchFailure);
    assert_true(h2d_checked(US_API_MEMCPY_ASYNC, SLOT, s, &result));
    assert_int_equal(result, cudaErrorLaunchFailure);
    struct us_slot *slots[2];
    assert_int_equal(us_staging_claim(2, 2 * SLOT, slots), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pieced_slot_copies_split_where_a_piece_ends, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_data_every_size_class, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_idle_stream_native_up_to_the_option, setup_warm, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_chunks_on_the_user_stream_without_host_wait, setup_warm, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_events_on_the_streams_device, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_larger_than_its_slots_waits_for_its_own_chunks, setup_warm, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_behind_queued_work_spills_and_returns_without_waiting, setup_warm,
                                        fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_cycles_where_spilling_frees_nobody_or_is_off, setup_warm,
                                        fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_refused_host_function_returns_error_and_the_spill, setup_warm,
                                        fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_sync_api_returns_when_done, setup_warm, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_no_free_slot_declines, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_capture_declines, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_no_pinned_memory_declines_once_logged, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_no_events_declines, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_runtime_without_a_rewrite_function_declines, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_h2d_error_mid_pipeline_is_returned, setup, fake_cuda_teardown),
    };
    return US_RUN_TESTS("test_pipeline_h2d", tests, NULL, NULL);
}
