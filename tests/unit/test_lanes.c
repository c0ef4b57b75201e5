/* test_lanes.c - the shim's lanes for staged peer copies (lanes.h) over the
 * fake runtime: one lane per (user stream, devices), its streams and events
 * on the right devices with the caller's device left current, a failed
 * stream declines without a half-made lane, a device reset forgets the lanes
 * on that device only, and a lane left broken is not handed out again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "summary.h"

#include "fake_cuda.h"
#include "lanes.h"
#include "log.h"
#include "real.h"
#include "staging.h"

#define SLOT (64u << 10)
#define SLOTS 4

static int setup(void **state)
{
    (void)state;
    fake_cuda_begin(SLOT, SLOTS, 64 * SLOT);
    us_lanes_reset();
    return 0;
}

static int current_device(void)
{
    int d = -1;
    us_real()->cudaGetDevice(&d);
    return d;
}

/* The context copies are issued in: without a driver to ask (these tests),
 * the current device's primary context, made current here. */
static const struct us_ctx *home_on(int device)
{
    us_real()->cudaSetDevice(device);
    return us_context_this();
}

static void test_lanes_one_per_stream_and_devices(void **state)
{
    (void)state;
    cudaStream_t a = fake_cuda_user_stream(0), b = fake_cuda_user_stream(0);
    struct us_lane *l = us_lane_peer(a, 0, 0, 1, home_on(0));
    assert_non_null(l);
    assert_ptr_equal(us_lane_peer(a, 0, 0, 1, home_on(0)), l);      /* found again */
    assert_ptr_not_equal(us_lane_peer(b, 0, 0, 1, home_on(0)), l);  /* another user stream */
    assert_ptr_not_equal(us_lane_peer(a, 0, 1, 0, home_on(0)), l);  /* the other direction */
    assert_int_equal(us_lanes_count(), 3);
}

static void test_lanes_streams_and_events_on_their_devices(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(1);
    struct us_lane *l = us_lane_peer(s, 1, 0, 1, home_on(1));
    assert_non_null(l);
    assert_int_equal(fake_cuda_stream_device(l->d2h), 0); /* the source's */
    assert_int_equal(fake_cuda_stream_device(l->h2d), 1); /* the destination's */
    assert_int_equal(fake_cuda_event_device(l->start), 1); /* the user stream's */
    assert_int_equal(fake_cuda_event_device(l->done), 1);
    assert_int_equal(l->nslots, SLOTS);
    for (unsigned i = 0; i < l->nslots; i++) {
        assert_int_equal(fake_cuda_event_device(l->filled[i]), 0);
        assert_int_equal(fake_cuda_event_device(l->freed[i]), 1);
    }
    assert_non_null(l->ring);
    assert_int_equal(l->ring_bytes, (size_t)SLOTS * SLOT);
    assert_true(fake_cuda.stream_flags & cudaStreamNonBlocking);
    assert_true(fake_cuda.event_flags & cudaEventDisableTiming);
    assert_int_equal(current_device(), 1); /* the caller's device is current again */
}

static void test_lanes_failed_stream_declines(void **state)
{
    (void)state;
    fake_cuda_fail(FAKE_cudaStreamCreateWithFlags, 2, 1, cudaErrorMemoryAllocation); /* the H2D stream */
    cudaStream_t s = fake_cuda_user_stream(0);
    assert_null(us_lane_peer(s, 0, 0, 1, home_on(0)));
    assert_int_equal(us_lanes_count(), 0);
    /* the D2H stream made before was destroyed, not left behind */
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamDestroy), 1);
    /* the next copy makes the lane, on the ring already pinned */
    unsigned pinned = fake_cuda_count(FAKE_cudaHostAlloc);
    assert_non_null(us_lane_peer(s, 0, 0, 1, home_on(0)));
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), pinned);
    assert_int_equal(us_lanes_count(), 1);
}

static void test_lanes_reset_forgets_the_device_only(void **state)
{
    (void)state;
    fake_cuda.devices = 3;
    cudaStream_t s = fake_cuda_user_stream(0);
    assert_non_null(us_lane_peer(s, 0, 0, 1, home_on(0)));
    assert_non_null(us_lane_peer(s, 0, 0, 2, home_on(0)));
    assert_int_equal(us_lanes_count(), 2);
    unsigned destroyed = fake_cuda_count(FAKE_cudaStreamDestroy) + fake_cuda_count(FAKE_cudaEventDestroy);
    us_lanes_forget_device(2);
    assert_int_equal(us_lanes_count(), 1);
    /* the reset destroyed them: they are not destroyed again */
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamDestroy) + fake_cuda_count(FAKE_cudaEventDestroy), destroyed);
    struct us_lane *again = us_lane_peer(s, 0, 0, 2, home_on(0));
    assert_non_null(again);
    assert_int_equal(fake_cuda_stream_device(again->h2d), 2);
    assert_int_equal(us_lanes_count(), 2);
}

/* A lane belongs to the context it was made in: another context (a created
 * one, or one made later at the same address: another id) gets its own;
 * when the context is gone its lanes are forgotten, none of their handles
 * destroyed (they went with it), and the ring it did not own is kept. */
static void test_lanes_per_context_and_forgotten_with_it(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(0);
    struct us_lane *primary = us_lane_peer(s, 0, 0, 1, home_on(0));
    struct us_ctx created = {.handle = (CUcontext)0x5000, .id = 1000, .index = 7, .device = 0, .primary = false};
    struct us_lane *mine = us_lane_peer(s, 0, 0, 1, &created);
    assert_non_null(primary);
    assert_non_null(mine);
    assert_ptr_not_equal(mine, primary);
    assert_int_equal(us_lanes_count(), 2);
    assert_int_equal(current_device(), 0);
    unsigned destroyed = fake_cuda_count(FAKE_cudaStreamDestroy) + fake_cuda_count(FAKE_cudaEventDestroy);
    unsigned pinned = fake_cuda_count(FAKE_cudaHostAlloc);
    us_lanes_forget_context(&created);
    assert_int_equal(us_lanes_count(), 1);
    assert_int_equal(fake_cuda_count(FAKE_cudaStreamDestroy) + fake_cuda_count(FAKE_cudaEventDestroy), destroyed);
    assert_ptr_equal(us_lane_peer(s, 0, 0, 1, home_on(0)), primary); /* untouched */
    /* the same address again, another context: a new lane, on the kept ring */
    struct us_ctx again = created;
    again.id = 1001;
    struct us_lane *fresh = us_lane_peer(s, 0, 0, 1, &again);
    assert_non_null(fresh);
    assert_int_equal(fake_cuda_count(FAKE_cudaHostAlloc), pinned);
    assert_int_equal(us_lanes_count(), 2);
}

static void test_lanes_broken_lane_is_replaced(void **state)
{
    (void)state;
    cudaStream_t s = fake_cuda_user_stream(0);
    struct us_lane *l = us_lane_peer(s, 0, 0, 1, home_on(0));
    assert_non_null(l);
    l->broken = true;
    struct us_lane *next = us_lane_peer(s, 0, 0, 1, home_on(0));
    assert_non_null(next);
    assert_ptr_not_equal(next, l);
    assert_false(next->broken);
    assert_int_equal(us_lanes_count(), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lanes_one_per_stream_and_devices, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_lanes_streams_and_events_on_their_devices, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_lanes_failed_stream_declines, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_lanes_reset_forgets_the_device_only, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_lanes_per_context_and_forgotten_with_it, setup, fake_cuda_teardown),
        cmocka_unit_test_setup_teardown(test_lanes_broken_lane_is_replaced, setup, fake_cuda_teardown),
    };
    return US_RUN_TESTS("test_lanes", tests, NULL, NULL);
}
