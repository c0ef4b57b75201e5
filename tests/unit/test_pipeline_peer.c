/* test_pipeline_peer.c - case A over the fake runtime table: data for every
 * size class, what is issued where and in which order (GPU-side waits only,
 * the user stream ordered before the first chunk and waiting on the last),
 * calls per chunk, one lane per user stream, declines (capture, invalid
 * stream, no streams, no events, no pinned memory) and errors mid-pipeline. */
#include <pthread.h>
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
#include "lanes.h"
#include "log.h"
#include "pipeline.h"
#include "pipeline_common.h"
#include "staging.h"
#include "streams.h"

#define SLOT (64u << 10)
#define SLOTS 4

static int setup(void **state)
{
    (void)state;
    fake_cuda_reset();
    fake_cuda_config(SLOT, SLOTS, 64 * SLOT);
    us_staging_reset();
    us_lanes_reset();
    fake_cuda_log_capture();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    us_log_set_sink(NULL, NULL);
    return 0;
}

/* src+3 -> dst+5 across devices, checked (fake_cuda_copy_checked). */
static bool copy_checked(int api, size_t bytes, cudaStream_t stream, int src_dev, int dst_dev, cudaError_t *result)
{
    return fake_cuda_copy_checked(us_pipeline_peer, api, bytes, stream, src_dev, dst_dev, result);
}

static void test_peer_data_every_size_class(void **state)
{
    (void)state;
    const size_t sizes[] = {1, 4097, SLOT - 1, SLOT, SLOT + 1, 3 * SLOT + 17, 40 * SLOT + 5};
    cudaStream_t s = fake_cuda_user_stream(0);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cudaError_t result = cudaErrorUnknown;
        assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, sizes[i], s, 0, 1, &result));
        assert_int_equal(result, cudaSuccess);
        assert_true(copy_checked(US_API_MEMCPY_ASYNC, sizes[i], s, 1, 0, &result));
        assert_int_equal(result, cudaSuccess);
    }
    assert_int_equal(us_lanes_count(), 2); /* one per direction */
    assert_int_equal(fake_cuda_calls_not_relaxed(), 0);
}

/* Up to peer_idle_native_bytes on a stream with no work queued: native (the
 * pipeline declines before issuing anything); behind queued work, or larger:
 * rewritten. */
static void test_peer_idle_stream_native_up_to_the_option(void **state)
{
    (void)state;
    struct us_config cfg = *us_config();
    cfg.peer_idle_native_bytes = 4 * SLOT;
    us_config_set(&cfg);
    cudaStream_t s = fake_cuda_user_stream(0);
    us_streams_note_created(s, 0, false); /* a non-blocking stream the shim saw made: its idleness is known */
    cudaError_t result = cudaErrorUnknown;
    assert_false(copy_checked(US_API_MEMCPY_PEER_ASYNC, 4 * SLOT, s, 0, 1, &result));
    assert_int_equal(result, cudaErrorUnknown);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 0);
    assert_int_equal(fake_cuda_log_count("peer_idle_native_bytes"), 1);
    /* one query; the copy's stream was found not capturing once, by us_pipe_begin */
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamQuery), 1);
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamIsCapturing), 1);
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 4 * SLOT + 1, s, 0, 1, &result)); /* larger */
    assert_int_equal(result, cudaSuccess);
    fake_cuda.streams_busy = true; /* work queued: rewritten whatever its size */
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, SLOT, s, 0, 1, &result));
    assert_int_equal(result, cudaSuccess);
}

/* With libcuda's table the idle check asks the driver (no runtime call, so
 * the runtime's last error is left alone). For a blocking stream: the legacy
 * stream's capture check and query, whose answer covers the blocking
 * stream's own work (conformance legacy_query_includes_blocking), so the
 * stream itself is not queried; nor asked again whether it is capturing. */
static void test_peer_idle_check_through_the_driver(void **state)
{
    (void)state;
    struct us_config cfg = *us_config();
    cfg.peer_idle_native_bytes = 4 * SLOT;
    us_config_set(&cfg);
    fake_cuda_use_driver();
    cudaStream_t s = fake_cuda_user_stream(0);
    us_streams_note_created(s, 0, true); /* blocking: the legacy stream counts too */
    unsigned queries = fake_cuda_count(FAKE_cudaStreamQuery), captures = fake_cuda_count(FAKE_cudaStreamIsCapturing);
    cudaError_t result = cudaErrorUnknown;
    assert_false(copy_checked(US_API_MEMCPY_PEER_ASYNC, SLOT, s, 0, 1, &result));
    assert_int_equal(result, cudaErrorUnknown);
    assert_int_equal(fake_cuda_count(FAKE_cuStreamQuery), 1);
    assert_int_equal(fake_cuda_count(FAKE_cuStreamIsCapturing), 2);
    assert_ptr_equal(fake_cuda.calls[fake_cuda_find(FAKE_cuStreamQuery, 0)].stream, cudaStreamLegacy);
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamQuery), queries);
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamIsCapturing), captures);
    fake_cuda.streams_busy = true; /* work queued: rewritten */
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, SLOT, s, 0, 1, &result));
    assert_int_equal(result, cudaSuccess);
}

static void test_peer_async_path_is_gpu_ordered(void **state)
{
    (void)state;
    cudaStream_t user = fake_cuda_user_stream(0);
    cudaError_t result;
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 10 * SLOT, user, 0, 1, &result));
    assert_int_equal(result, cudaSuccess);

    /* the user stream: the start event first, then nothing until it waits on the end */
    int first_record = fake_cuda_find(FAKE_cudaEventRecord, 0);
    int first_copy = fake_cuda_find(FAKE_cudaMemcpyAsync, 0);
    assert_true(first_record >= 0 && first_record < first_copy);
    assert_ptr_equal(fake_cuda.calls[first_record].stream, user);
    cudaEvent_t start = fake_cuda.calls[first_record].event;
    int gate = fake_cuda_find(FAKE_cudaStreamWaitEvent, 0);
    assert_ptr_equal(fake_cuda.calls[gate].event, start);
    cudaStream_t d2h = fake_cuda.calls[gate].stream;
    assert_true(gate < first_copy);

    int last_copy = -1, user_wait = -1;
    for (size_t i = 0; i < fake_cuda.ncalls; i++) {
        const struct fake_cuda_call *call = &fake_cuda.calls[i];
        if (call->fn == FAKE_cudaMemcpyAsync) {
            last_copy = (int)i;
            assert_ptr_not_equal(call->stream, user);
            /* D2H on the source device's lane, H2D on the destination's */
            assert_int_equal(fake_cuda_stream_device(call->stream), call->stream == d2h ? 0 : 1);
        }
        if (call->stream == user && call->fn != FAKE_cudaStreamIsCapturing && call->fn != FAKE_cudaStreamGetDevice &&
            (int)i != first_record) {
            assert_int_equal(call->fn, FAKE_cudaStreamWaitEvent);
            user_wait = (int)i;
        }
    }
    assert_true(user_wait > last_copy);
    assert_int_equal(fake_cuda_event_device(fake_cuda.calls[user_wait].event), 1);
    /* the host never waits on the asynchronous path */
    assert_int_equal(fake_cuda_host_waits(), 0);
    /* the shim's streams and events */
    assert_true(fake_cuda.stream_flags & cudaStreamNonBlocking);
    assert_true(fake_cuda.event_flags & cudaEventDisableTiming);
    assert_int_equal(fake_cuda_calls_not_relaxed(), 0);
    assert_int_equal(fake_cuda_count(FAKE_cudaThreadExchangeStreamCaptureMode), 2); /* relaxed, restored */
}

static void test_peer_calls_per_chunk(void **state)
{
    (void)state;
    cudaStream_t user = fake_cuda_user_stream(0);
    cudaError_t result;
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 16 * SLOT, user, 0, 1, &result)); /* lane made */
    unsigned copies = fake_cuda_count(FAKE_cudaMemcpyAsync), records = fake_cuda_count(FAKE_cudaEventRecord),
             waits = fake_cuda_count(FAKE_cudaStreamWaitEvent), queries = fake_cuda_count(FAKE_cudaStreamQuery);
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 16 * SLOT, user, 0, 1, &result));
    /* 16 chunks through 4 slots: per chunk a D2H, a record, a wait, an H2D,
     * a record (not for the last 4) and, once the ring wraps, a wait */
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync) - copies, 32);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventRecord) - records, 1 + 16 + 12 + 1); /* start, filled, freed, done */
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamWaitEvent) - waits, 2 + 16 + 12 + 1); /* start, previous done, ..., user */
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamQuery) - queries, 2); /* an earlier async failure? */
}

static void test_peer_chunk_size_bounds_the_chunk_count(void **state)
{
    (void)state;
    const size_t M = 1u << 20;
    assert_int_equal(us_pipe_peer_chunk(16 * M, 8 * M, 32 * M, 16), 8 * M);
    assert_int_equal(us_pipe_peer_chunk(128 * M, 8 * M, 32 * M, 16), 8 * M);
    assert_int_equal(us_pipe_peer_chunk(256 * M, 8 * M, 32 * M, 16), 16 * M);
    assert_int_equal(us_pipe_peer_chunk(1024 * M, 8 * M, 32 * M, 16), 16 * M); /* half the ring at most */
    assert_int_equal(us_pipe_peer_chunk(256 * M, 8 * M, 64 * M, 16), 16 * M);
    assert_int_equal(us_pipe_peer_chunk(200 * M + 1, 8 * M, 64 * M, 16), 12 * M + 512 * 1024 + 4096); /* 4 KiB multiple */
    assert_int_equal(us_pipe_peer_chunk(1, 8 * M, 32 * M, 16), 8 * M);
    assert_int_equal(us_pipe_chunks(0, 8), 0);
    assert_int_equal(us_pipe_chunks(8, 8), 1);
    assert_int_equal(us_pipe_chunks(9, 8), 2);
    assert_int_equal(us_pipe_chunk_len(9, 8, 1), 1);
    assert_int_equal(us_pipe_chunk_len(16, 8, 1), 8);
}

static void test_peer_one_lane_per_user_stream(void **state)
{
    (void)state;
    cudaStream_t a = fake_cuda_user_stream(0), b = fake_cuda_user_stream(0);
    cudaError_t result;
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 2 * SLOT, a, 0, 1, &result));
    int a_copy = fake_cuda_find(FAKE_cudaMemcpyAsync, 0);
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 2 * SLOT, b, 0, 1, &result));
    assert_int_equal(us_lanes_count(), 2);
    int b_copy = fake_cuda_find(FAKE_cudaMemcpyAsync, 4);
    assert_ptr_not_equal(fake_cuda.calls[a_copy].stream, fake_cuda.calls[b_copy].stream);

    /* the same stream again: its lane, after its previous copy */
    unsigned streams = fake_cuda_count(FAKE_cudaStreamCreateWithFlags);
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 2 * SLOT, a, 0, 1, &result));
    assert_int_equal(us_lanes_count(), 2);
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamCreateWithFlags), streams);
    int a_again = fake_cuda_find(FAKE_cudaMemcpyAsync, 8);
    assert_ptr_equal(fake_cuda.calls[a_again].stream, fake_cuda.calls[a_copy].stream);
}

/* Two threads alive at once (a thread id is reused after a join), using the
 * fake one after the other. */
static pthread_mutex_t turn_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cv = PTHREAD_COND_INITIALIZER;
static int turn;

static void *copy_on_per_thread_stream(void *arg)
{
    int me = (int)(intptr_t)arg;
    cudaError_t result = cudaErrorUnknown;
    pthread_mutex_lock(&turn_mu);
    while (turn != me)
        pthread_cond_wait(&turn_cv, &turn_mu);
    copy_checked(US_API_MEMCPY_ASYNC_PTSZ, SLOT, NULL, 0, 1, &result);
    turn++;
    pthread_cond_broadcast(&turn_cv);
    while (turn != 2) /* stay alive until both copied */
        pthread_cond_wait(&turn_cv, &turn_mu);
    pthread_mutex_unlock(&turn_mu);
    return (void *)(intptr_t)result;
}

static void test_peer_per_thread_streams_get_a_lane_per_thread(void **state)
{
    (void)state;
    pthread_t t[2];
    turn = 0;
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, copy_on_per_thread_stream, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        assert_int_equal((intptr_t)ret, cudaSuccess);
    }
    assert_int_equal(us_lanes_count(), 2);
}

static void assert_declined_without_work(int api, cudaStream_t stream)
{
    unsigned copies = fake_cuda_count(FAKE_cudaMemcpyAsync), waits = fake_cuda_count(FAKE_cudaStreamWaitEvent);
    cudaError_t result = cudaErrorUnknown;
    assert_false(copy_checked(api, 3 * SLOT, stream, 0, 1, &result));
    assert_int_equal(result, cudaErrorUnknown); /* untouched */
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), copies);
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamWaitEvent), waits);
}

static void test_peer_capture_declines(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(0);
    fake_cuda.capture = cudaStreamCaptureStatusActive;
    assert_declined_without_work(US_API_MEMCPY_PEER_ASYNC, s);
    fake_cuda.capture = cudaStreamCaptureStatusInvalidated;
    assert_declined_without_work(US_API_MEMCPY_PEER_ASYNC, s);
    fake_cuda.capture = cudaStreamCaptureStatusNone;
    fake_cuda.capture_query_error = cudaErrorStreamCaptureImplicit;
    assert_declined_without_work(US_API_MEMCPY_PEER_ASYNC, s);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventRecord), 0);
    assert_int_equal(us_lanes_count(), 0);
    /* relaxed mode was entered and left each time */
    assert_int_equal(fake_cuda_count(FAKE_cudaThreadExchangeStreamCaptureMode), 6);
    assert_int_equal(fake_cuda_log_count("captured"), 1);
}

static void test_peer_invalid_stream_declines(void **state)
{
    (void)state;
    assert_declined_without_work(US_API_MEMCPY_PEER_ASYNC, (cudaStream_t)(uintptr_t)0x1234);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventRecord), 0);
}

static void test_peer_stream_create_failure_declines_once_logged(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(0);
    fake_cuda_fail(FAKE_cudaStreamCreateWithFlags, 2, 0, cudaErrorMemoryAllocation); /* the H2D stream */
    assert_declined_without_work(US_API_MEMCPY_PEER_ASYNC, s);
    assert_declined_without_work(US_API_MEMCPY_PEER_ASYNC, s);
    assert_int_equal(fake_cuda_log_count("cannot create the shim's streams"), 1);
    assert_int_equal(us_lanes_count(), 0);
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamDestroy), 1); /* the D2H stream made */
    int dev = -1;
    us_real()->cudaGetDevice(&dev);
    assert_int_equal(dev, 0);
}

static void test_peer_event_create_failure_declines(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(0);
    fake_cuda_fail(FAKE_cudaEventCreateWithFlags, 3, 1, cudaErrorMemoryAllocation);
    assert_declined_without_work(US_API_MEMCPY_PEER_ASYNC, s);
    assert_int_equal(fake_cuda_log_count("cannot create the shim's events"), 1);
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamDestroy), 2);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventDestroy), 2); /* the two made before */
    /* the failure was transient: the next copy makes its lane */
    cudaError_t result;
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, SLOT, s, 0, 1, &result));
    assert_int_equal(result, cudaSuccess);
}

static void test_peer_no_pinned_memory_declines(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, SLOTS, SLOT); /* a ring does not fit */
    cudaStream_t s = fake_cuda_user_stream(0);
    assert_declined_without_work(US_API_MEMCPY_PEER_ASYNC, s);
    assert_declined_without_work(US_API_MEMCPY_PEER_ASYNC, s);
    assert_int_equal(fake_cuda_log_count("pinned_max"), 1);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 0);
}

static void test_peer_idle_lane_taken_over_when_no_room(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, SLOTS, SLOTS * SLOT); /* one ring */
    cudaStream_t a = fake_cuda_user_stream(0), b = fake_cuda_user_stream(0), c = fake_cuda_user_stream(0);
    cudaError_t result;
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 5 * SLOT, a, 0, 1, &result));
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 5 * SLOT, b, 0, 1, &result)); /* a's lane is idle */
    assert_int_equal(result, cudaSuccess);
    assert_int_equal(us_lanes_count(), 1);
    fake_cuda.events_busy = true; /* b's copy still running: c cannot have it */
    assert_declined_without_work(US_API_MEMCPY_PEER_ASYNC, c);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
}

/* Past pinned_max: a copy on a new stream takes over an idle lane or goes
 * native, without making streams and events it then destroys (it made 2
 * streams and 12 events a copy before). */
static void test_peer_past_pinned_max_makes_nothing_it_destroys(void **state)
{
    (void)state;
    fake_cuda_config(SLOT, SLOTS, SLOTS * SLOT); /* one ring */
    cudaError_t result;
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 5 * SLOT, fake_cuda_user_stream(0), 0, 1, &result));
    unsigned streams = fake_cuda_count(FAKE_cudaStreamCreateWithFlags);
    unsigned events = fake_cuda_count(FAKE_cudaEventCreateWithFlags);
    assert_int_equal(streams, 2);
    for (int i = 0; i < 8; i++) {
        fake_cuda.events_busy = i % 2 == 1; /* the lane busy: native; idle: taken over */
        cudaStream_t s = fake_cuda_user_stream(0);
        if (fake_cuda.events_busy) {
            assert_declined_without_work(US_API_MEMCPY_PEER_ASYNC, s);
        } else {
            assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 5 * SLOT, s, 0, 1, &result));
            assert_int_equal(result, cudaSuccess);
        }
    }
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamCreateWithFlags), streams);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventCreateWithFlags), events);
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamDestroy), 0);
    assert_int_equal(fake_cuda_count(FAKE_cudaEventDestroy), 0);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), 1);
    assert_int_equal(us_lanes_count(), 1);
}

static void test_peer_error_mid_pipeline_is_returned(void **state)
{
    (void)state;
    cudaStream_t user = fake_cuda_user_stream(0);
    fake_cuda_fail(FAKE_cudaMemcpyAsync, 5, 1, cudaErrorIllegalAddress); /* chunk 2's D2H */
    cudaError_t result = cudaSuccess;
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 8 * SLOT, user, 0, 1, &result));
    assert_int_equal(result, cudaErrorIllegalAddress);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), 5); /* nothing after the failure */
    /* the user stream waits on nothing; the lane records where its work ends */
    for (size_t i = 0; i < fake_cuda.ncalls; i++)
        if (fake_cuda.calls[i].fn == FAKE_cudaStreamWaitEvent)
            assert_ptr_not_equal(fake_cuda.calls[i].stream, user);
    int last_record = fake_cuda_find(FAKE_cudaEventRecord, fake_cuda_count(FAKE_cudaEventRecord) - 1);
    assert_int_equal(fake_cuda_stream_device(fake_cuda.calls[last_record].stream), 1);

    /* the lane goes on: the next copy is whole */
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 8 * SLOT, user, 0, 1, &result));
    assert_int_equal(result, cudaSuccess);
}

static void test_peer_refused_first_chunk_declines(void **state)
{
    (void)state;
    cudaStream_t user = fake_cuda_user_stream(0);
    fake_cuda_fail(FAKE_cudaMemcpyAsync, 1, 1, cudaErrorInvalidValue);
    cudaError_t result = cudaErrorUnknown;
    assert_false(copy_checked(US_API_MEMCPY_PEER_ASYNC, 2 * SLOT, user, 0, 1, &result));
    for (size_t i = 0; i < fake_cuda.ncalls; i++)
        if (fake_cuda.calls[i].fn == FAKE_cudaStreamWaitEvent)
            assert_ptr_not_equal(fake_cuda.calls[i].stream, user);
}

static void test_peer_earlier_async_failure_is_reported(void **state)
{
    (void)state;
    cudaStream_t user = fake_cuda_user_stream(0);
    cudaError_t result;
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 2 * SLOT, user, 0, 1, &result));
    fake_cuda.stream_error = cudaErrorLaunchFailure; /* the lane's streams failed */
    unsigned copies = fake_cuda_count(FAKE_cudaMemcpyAsync);
    assert_true(copy_checked(US_API_MEMCPY_PEER_ASYNC, 2 * SLOT, user, 0, 1, &result));
    assert_int_equal(result, cudaErrorLaunchFailure);
    assert_int_equal(fake_cuda_count(FAKE_cudaMemcpyAsync), copies);
}

/* Index of the last cudaStreamWaitEvent on the legacy stream of `device`, or -1. */
static int legacy_wait_on_device(int device)
{
    int found = -1;
    for (size_t i = 0; i < fake_cuda.ncalls; i++)
        if (fake_cuda.calls[i].fn == FAKE_cudaStreamWaitEvent && fake_cuda.calls[i].stream == cudaStreamLegacy &&
            fake_cuda.calls[i].device == device)
            found = (int)i;
    return found;
}

static void test_peer_sync_api_waits_and_gates_on_legacy_streams(void **state)
{
    (void)state;
    cudaError_t result;
    /* cudaMemcpyPeer from device 1 to 0 while 0 is current */
    assert_true(copy_checked(US_API_MEMCPY_PEER, 3 * SLOT, NULL, 1, 0, &result));
    assert_int_equal(result, cudaSuccess);
    int gate = -1;
    for (size_t i = 0; i < fake_cuda.ncalls; i++)
        if (fake_cuda.calls[i].fn == FAKE_cudaEventRecord && fake_cuda.calls[i].stream == cudaStreamLegacy &&
            fake_cuda.calls[i].device == 1)
            gate = (int)i;
    assert_true(gate >= 0 && gate < fake_cuda_find(FAKE_cudaMemcpyAsync, 0)); /* device 1's legacy stream */
    int sync = fake_cuda_find(FAKE_cudaStreamSynchronize, 0);
    assert_true(sync > fake_cuda_find(FAKE_cudaMemcpyAsync, 5));
    assert_ptr_equal(fake_cuda.calls[sync].stream, cudaStreamLegacy);
    int dev = -1;
    us_real()->cudaGetDevice(&dev);
    assert_int_equal(dev, 0);

    /* device 1's legacy stream waits for the copy before its later work */
    int follows = legacy_wait_on_device(1);
    assert_true(follows > fake_cuda_find(FAKE_cudaMemcpyAsync, 5));
    assert_int_equal(fake_cuda_event_device(fake_cuda.calls[follows].event), 0); /* done, on the destination */

    /* cudaMemcpy across devices: the same; an asynchronous failure shows in its result */
    fake_cuda_fail(FAKE_cudaStreamSynchronize, 1, 1, cudaErrorLaunchFailure);
    unsigned char src[100], dst[100];
    struct us_copy c;
    fake_cuda_copy(&c, US_API_MEMCPY, dst, 1, src, 0, sizeof src, NULL);
    assert_true(us_pipeline_peer(&c, us_context_this(), &result));
    assert_int_equal(result, cudaErrorLaunchFailure);
}

/* cudaMemcpy / cudaMemcpyAsync on the legacy stream with the destination's
 * device current: the source device's legacy stream gates the D2H stream and
 * waits for the copy; a user stream or the per-thread stream orders with
 * nothing on the other device. */
static void test_peer_legacy_stream_orders_with_the_other_device(void **state)
{
    (void)state;
    cudaError_t result;
    us_real()->cudaSetDevice(1);
    cudaStream_t legacy_handles[] = {NULL, cudaStreamLegacy};
    for (int i = 0; i < 2; i++) {
        fake_cuda.ncalls = 0;
        assert_true(copy_checked(US_API_MEMCPY_ASYNC, 3 * SLOT, legacy_handles[i], 0, 1, &result));
        assert_int_equal(result, cudaSuccess);
        int gate = -1;
        for (size_t k = 0; k < fake_cuda.ncalls; k++)
            if (fake_cuda.calls[k].fn == FAKE_cudaEventRecord && fake_cuda.calls[k].stream == cudaStreamLegacy &&
                fake_cuda.calls[k].device == 0)
                gate = (int)k;
        assert_true(gate >= 0 && gate < fake_cuda_find(FAKE_cudaMemcpyAsync, 0));
        assert_true(legacy_wait_on_device(0) > fake_cuda_find(FAKE_cudaMemcpyAsync, 5));
        unsigned waits_on_user_stream = 0; /* device 1's legacy stream is the user stream: one wait, for done */
        for (size_t k = 0; k < fake_cuda.ncalls; k++)
            waits_on_user_stream += fake_cuda.calls[k].fn == FAKE_cudaStreamWaitEvent &&
                                    fake_cuda.calls[k].stream == cudaStreamLegacy && fake_cuda.calls[k].device == 1;
        assert_int_equal(waits_on_user_stream, 1);
        int dev = -1;
        us_real()->cudaGetDevice(&dev);
        assert_int_equal(dev, 1);
    }
    cudaStream_t others[] = {fake_cuda_user_stream(1), cudaStreamPerThread};
    for (int i = 0; i < 2; i++) {
        fake_cuda.ncalls = 0;
        assert_true(copy_checked(US_API_MEMCPY_ASYNC, 3 * SLOT, others[i], 0, 1, &result));
        assert_int_equal(result, cudaSuccess);
        for (size_t k = 0; k < fake_cuda.ncalls; k++)
            assert_ptr_not_equal(fake_cuda.calls[k].stream, cudaStreamLegacy);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_peer_data_every_size_class, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_idle_stream_native_up_to_the_option, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_idle_check_through_the_driver, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_async_path_is_gpu_ordered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_calls_per_chunk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_chunk_size_bounds_the_chunk_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_one_lane_per_user_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_per_thread_streams_get_a_lane_per_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_capture_declines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_invalid_stream_declines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_stream_create_failure_declines_once_logged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_event_create_failure_declines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_no_pinned_memory_declines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_idle_lane_taken_over_when_no_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_past_pinned_max_makes_nothing_it_destroys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_error_mid_pipeline_is_returned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_refused_first_chunk_declines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_earlier_async_failure_is_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_sync_api_waits_and_gates_on_legacy_streams, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_legacy_stream_orders_with_the_other_device, setup, teardown),
    };
    return US_RUN_TESTS("test_pipeline_peer", tests, NULL, NULL);
}
