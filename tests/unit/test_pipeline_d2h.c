/* test_pipeline_d2h.c - case C over the fake runtime table: data for every
 * size class, the default (host waits per chunk, `slots` chunks in flight,
 * returns with the data in place, for the asynchronous API too), declines
 * and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "summary.h"

#include "copy.h"
#include "fake_cuda.h"
#include "log.h"
#include "pipeline.h"
#include "grower.h"
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

/* src+3 (device 0) -> dst+5 (pageable), checked (fake_cuda_copy_checked). */
static bool d2h_checked(int api, size_t bytes, cudaStream_t stream, cudaError_t *result)
{
    return fake_cuda_copy_checked(us_pipeline_d2h, api, bytes, stream, 0, -1, result);
}

static void test_d2h_data_every_size_class(void **state)
{
    (void)state;
    const size_t sizes[] = {1, 4097, SLOT - 1, SLOT, SLOT + 1, 3 * SLOT + 17, 40 * SLOT + 5};
    cudaStream_t s = fake_cuda_user_stream(0);
    fake_cuda_config(SLOT, 4, 16 * SLOT);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cudaError_t result = cudaErrorUnknown;
        assert_true(d2h_checked(US_API_MEMCPY_ASYNC, sizes[i], s, &result));
        assert_int_equal(result, cudaSuccess);
    }
    assert_int_equal(fake_cuda_calls_not_relaxed(), 0);
}

static void test_d2h_default_waits_per_chunk_with_slots_in_flight(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(0);
    cudaError_t result;
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, 10 * SLOT, s, &result));
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 10);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventRecord), 10);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventSynchronize), 10); /* 3 calls per chunk */
    /* 4 chunks queued before the first wait; each later one after a wait */
    assert_true(fake_cuda_find(FAKE_cudaMemcpyAsync, 3) < fake_cuda_find(FAKE_cudaEventSynchronize, 0));
    assert_true(fake_cuda_find(FAKE_cudaMemcpyAsync, 4) > fake_cuda_find(FAKE_cudaEventSynchronize, 0));
    for (size_t i = 0; i < fake_cuda.ncalls; i++)
        if (fake_cuda.calls[i].fn == FAKE_cudaMemcpyAsync)
            assert_ptr_equal(fake_cuda.calls[i].stream, s);
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamSynchronize), 0); /* the copy, not the whole stream */
    assert_int_equal(fake_cuda_count(FAKE_cudaLaunchHostFunc), 0);
    /* the waits are on the shim's own events, one per chunk, never on the stream */
    assert_int_equal(fake_cuda_count(FAKE_cudaEventQuery), 0);
    /* the slots went back free: the next copy waits only for its own chunks */
    unsigned waits = fake_cuda_count(FAKE_cudaEventSynchronize);
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, 10 * SLOT, s, &result));
    assert_int_equal(fake_cuda_count(FAKE_cudaEventSynchronize), waits + 10);
}

/* In two steps (chain.c takes the call site between them): the start issues
 * the first chunks, one per slot, and waits for none; the finish waits,
 * issues the rest and returns with the data in place. A start that declines,
 * or whose first chunk is refused, leaves nothing issued and nothing held. */
static void test_d2h_start_issues_and_finish_waits(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(0);
    const size_t bytes = 10 * SLOT;
    unsigned char *src = malloc(bytes), *dst = calloc(1, bytes);
    assert_non_null(src);
    assert_non_null(dst);
    fake_cuda_fill(src, bytes, 3);
    struct us_copy c;
    fake_cuda_copy(&c, US_API_MEMCPY_ASYNC, dst, -1, src, 0, bytes, s);
    struct us_d2h_run run;
    assert_true(us_pipeline_d2h_start(&c, us_context_this(), &run));
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 4); /* the slots' worth */
    assert_int_equal(fake_cuda_host_waits(), 0);
    assert_int_equal(us_pipeline_d2h_finish(&run), cudaSuccess);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 10);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventSynchronize), 10);
    assert_true(fake_cuda_check(dst, bytes, 3));
    assert_int_equal(us_staging_pinned_bytes() > 0, true);

    fake_cuda_fail(FAKE_cudaMemcpyAsync, 1, 1, cudaErrorInvalidValue); /* the next start's first chunk */
    assert_false(us_pipeline_d2h_start(&c, us_context_this(), &run));
    fake_cuda.capture = cudaStreamCaptureStatusActive;
    assert_false(us_pipeline_d2h_start(&c, us_context_this(), &run));
    fake_cuda.capture = cudaStreamCaptureStatusNone;
    /* nothing held: a copy wanting every slot still gets them all */
    assert_true(us_pipeline_d2h_start(&c, us_context_this(), &run));
    assert_int_equal(run.s.n, 4);
    assert_int_equal(us_pipeline_d2h_finish(&run), cudaSuccess);
    free(src);
    free(dst);
}

/* A slot larger than the copy's own (the pool's first slots are pinned
 * before any copy, us_staging_warm) carries the copy's own chunk, not one as
 * long as the slot: a D2H of 4 slots is cut in halves (us_staging_pieces)
 * so that the copy-out of one overlaps the next one's transfer. Before, one
 * 16-slot block took it in one chunk: no overlap, and on an H100 the 1-4
 * MiB D2H medians were 15-70% slower with such slots than with their own. */
static void test_d2h_larger_slot_carries_the_copys_own_pieces(void **state)
{
    (void)state;
    fake_cuda_begin_warm(16 * SLOT, 4, 128 * SLOT, 4);
    cudaStream_t s = fake_cuda_user_stream(0);
    cudaError_t result;
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, 4 * SLOT, s, &result));
    assert_int_equal(result, cudaSuccess);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 2);
    assert_int_equal(fake_cuda.calls[fake_cuda_find(FAKE_cudaMemcpyAsync, 0)].bytes, 2 * SLOT);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 0); /* the pool's slots, none pinned */
}

static void test_d2h_capture_and_invalid_stream_decline(void **state)
{
    (void)state;
    cudaError_t result = cudaErrorUnknown;
    fake_cuda.capture = cudaStreamCaptureStatusActive;
    assert_false(d2h_checked(US_API_MEMCPY_ASYNC, SLOT, fake_cuda_user_stream(0), &result));
    fake_cuda.capture = cudaStreamCaptureStatusNone;
    assert_false(d2h_checked(US_API_MEMCPY_ASYNC, SLOT, (cudaStream_t)(uintptr_t)0x4321, &result));
    assert_int_equal(result, cudaErrorUnknown);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 0);
}

static void test_d2h_no_pinned_memory_declines(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, 4, 0);
    cudaError_t result;
    assert_false(d2h_checked(US_API_MEMCPY_ASYNC, SLOT, fake_cuda_user_stream(0), &result));
    assert_false(d2h_checked(US_API_MEMCPY_ASYNC, SLOT, fake_cuda_user_stream(0), &result));
    assert_int_equal(fake_cuda_log_count("pinned_max (0 bytes) reached"), 1);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 0);
}

static void test_d2h_errors(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(0);
    cudaError_t result;
    /* a chunk queued later fails: its error is the call's */
    fake_cuda_fail(FAKE_cudaMemcpyAsync, 6, 1, cudaErrorIllegalAddress);
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, 10 * SLOT, s, &result));
    assert_int_equal(result, cudaErrorIllegalAddress);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 6);
    /* the stream failed asynchronously: the wait says so */
    fake_cuda.stream_error = cudaErrorLaunchFailure;
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, 2 * SLOT, s, &result));
    assert_int_equal(result, cudaErrorLaunchFailure);
    fake_cuda.stream_error = cudaSuccess;
    /* the first chunk refused: native answers */
    fake_cuda_fail(FAKE_cudaMemcpyAsync, 1, 1, cudaErrorInvalidValue);
    assert_false(d2h_checked(US_API_MEMCPY_ASYNC, 2 * SLOT, s, &result));
}

/* With libcuda's table (real_driver.h): the capture mode, the capture check,
 * each chunk's copy, record and wait go through the driver, and the runtime
 * makes none of them; a stream of another device (not in the current
 * context) gets the runtime's calls. */
static void test_d2h_driver_calls_where_the_stream_is_current(void **state)
{
    (void)state;
    fake_cuda_use_driver();
    unsigned unrelaxed = fake_cuda_calls_not_relaxed(); /* the pool's warming */
    cudaStream_t s = fake_cuda_user_stream(0);
    cudaError_t result = cudaErrorUnknown;
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, 10 * SLOT, s, &result));
    assert_int_equal(result, cudaSuccess);
    assert_int_equal(fake_cuda_count(FAKE_cuMemcpyDtoHAsync_v2), 10);
    assert_int_equal(fake_cuda_count(FAKE_cuEventRecord), 10);
    assert_int_equal(fake_cuda_count(FAKE_cuEventSynchronize), 10);
    assert_int_equal(fake_cuda_count(FAKE_cuStreamIsCapturing), 1);
    assert_int_equal(fake_cuda_count(FAKE_cuThreadExchangeStreamCaptureMode), 2); /* relaxed, then restored */
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync) + fake_cuda_count(FAKE_cudaEventRecord) +
                         fake_cuda_count(FAKE_cudaEventSynchronize) + fake_cuda_count(FAKE_cudaStreamIsCapturing) +
                         fake_cuda_count(FAKE_cudaThreadExchangeStreamCaptureMode),
                     0);
    assert_int_equal(fake_cuda_calls_not_relaxed(), unrelaxed);
    for (size_t i = 0; i < fake_cuda.ncalls; i++)
        if (fake_cuda.calls[i].fn == FAKE_cuMemcpyDtoHAsync_v2)
            assert_ptr_equal(fake_cuda.calls[i].stream, s);

    unsigned before = fake_cuda_count(FAKE_cuMemcpyDtoHAsync_v2);
    cudaStream_t other = fake_cuda_user_stream(1);
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, 2 * SLOT, other, &result));
    assert_int_equal(result, cudaSuccess);
    assert_int_equal(fake_cuda_count(FAKE_cuMemcpyDtoHAsync_v2), before);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 2);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventSynchronize), 2);
}

/* A driver call that fails is made again through the runtime, whose answer
 * the copy returns: the error a program sees is the runtime's. */
static void test_d2h_driver_failure_answered_by_the_runtime(void **state)
{
    (void)state;
    fake_cuda_use_driver();
    unsigned unrelaxed = fake_cuda_calls_not_relaxed(); /* the pool's warming */
    cudaStream_t s = fake_cuda_user_stream(0);
    cudaError_t result;
    /* the driver refuses a later chunk, the runtime takes it: the copy completes */
    fake_cuda_fail(FAKE_cuMemcpyDtoHAsync_v2, 3, 1, cudaErrorUnknown);
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, 6 * SLOT, s, &result));
    assert_int_equal(result, cudaSuccess);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 1);
    /* the stream failed asynchronously: both waits say so, the runtime's error is the call's */
    fake_cuda.stream_error = cudaErrorLaunchFailure;
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, 2 * SLOT, s, &result));
    assert_int_equal(result, cudaErrorLaunchFailure);
    assert_true(fake_cuda_count(FAKE_cudaEventSynchronize) >= 1);
    fake_cuda.stream_error = cudaSuccess;
    /* the driver's exchange fails: the runtime's sets the mode and restores it */
    unsigned exchanges = fake_cuda_count(FAKE_cudaThreadExchangeStreamCaptureMode);
    fake_cuda_fail(FAKE_cuThreadExchangeStreamCaptureMode, 1, 0, cudaErrorUnknown);
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, 2 * SLOT, s, &result));
    assert_int_equal(result, cudaSuccess);
    assert_int_equal(fake_cuda_count(FAKE_cudaThreadExchangeStreamCaptureMode), exchanges + 2);
    assert_int_equal(fake_cuda_calls_not_relaxed(), unrelaxed);
}

/* No slot ready (a cold pool): on an idle non-blocking stream the copy goes
 * native, pinning nothing in the call, and the grower pins the slots for
 * the next copies; behind queued work it pins one slot in the call and is
 * rewritten (a native D2H there could wait for another thread: the
 * stream-0 D2H deadlock). */
static void test_d2h_no_slot_ready_native_when_stream_idle(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(0);
    us_streams_note_created(s, 0, false);
    cudaError_t result = cudaErrorUnknown;
    assert_false(d2h_checked(US_API_MEMCPY_ASYNC, 2 * SLOT, s, &result));
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 0);
    assert_true(fake_cuda_count(FAKE_cudaStreamQuery) >= 1);
    us_grower_wait_idle();
    assert_true(us_staging_pinned_bytes() > 0); /* the grower's, off the copy's thread */
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, 2 * SLOT, s, &result));
    assert_int_equal(result, cudaSuccess);
    us_streams_reset();
}

static void test_d2h_no_slot_ready_pinned_in_call_behind_queued_work(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(0);
    us_streams_note_created(s, 0, false);
    fake_cuda.streams_busy = true;
    cudaError_t result = cudaErrorUnknown;
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, SLOT, s, &result));
    assert_int_equal(result, cudaSuccess);
    assert_int_equal(us_staging_pinned_bytes(), SLOT); /* one slot, in the call */
    fake_cuda.streams_busy = false;
    us_streams_reset();
}

/* The legacy stream waits for the device's blocking streams: a busy one
 * keeps the copy off the native call; unknown streams' (a copy through the
 * driver layer) keep it off too. */
static void test_d2h_no_slot_ready_legacy_stream_waits_for_blocking_streams(void **state)
{
    (void)state;
    cudaStream_t blocking = fake_cuda_user_stream(0);
    us_streams_note_created(blocking, 0, true);
    fake_cuda.streams_busy = true;
    cudaError_t result = cudaErrorUnknown;
    assert_true(d2h_checked(US_API_MEMCPY_ASYNC, SLOT, cudaStreamLegacy, &result));
    assert_int_equal(result, cudaSuccess);
    assert_true(us_staging_pinned_bytes() > 0);
    us_streams_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_d2h_data_every_size_class, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_d2h_default_waits_per_chunk_with_slots_in_flight, setup_warm, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_d2h_start_issues_and_finish_waits, setup_warm, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_d2h_larger_slot_carries_the_copys_own_pieces, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_d2h_capture_and_invalid_stream_decline, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_d2h_no_pinned_memory_declines, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_d2h_errors, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_d2h_driver_calls_where_the_stream_is_current, setup_warm, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_d2h_driver_failure_answered_by_the_runtime, setup_warm, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_d2h_no_slot_ready_native_when_stream_idle, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_d2h_no_slot_ready_pinned_in_call_behind_queued_work, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_d2h_no_slot_ready_legacy_stream_waits_for_blocking_streams, setup, fake_cuda_teardown),
    };
    return US_RUN_TESTS("test_pipeline_d2h", tests, NULL, NULL);
}
