/* test_context.c - whether a call comes from a context that competes with
 * the device's primary context (case D), over a scripted driver. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "summary.h"

#include "context.h"
#include "fake_cuda.h"
#include "real.h"

/* the scripted driver: one current context, device 0's primary context */
static struct {
    CUcontext current;
    CUcontext primary;
    int primary_active;
    CUcontext saved; /* under a push */
    int pushes, pops;
    int retains, releases, state_queries;
    enum cudaStreamCaptureMode retain_mode; /* the thread's capture mode at the retain */
} drv;

static enum cudaStreamCaptureMode capture_mode_now(void)
{
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    us_real()->cudaThreadExchangeStreamCaptureMode(&mode);
    enum cudaStreamCaptureMode now = mode;
    us_real()->cudaThreadExchangeStreamCaptureMode(&mode);
    return now;
}

static CUresult get_current(CUcontext *pctx) { *pctx = drv.current; return CUDA_SUCCESS; }
static CUresult device_get(CUdevice *dev, int ordinal)
{
    *dev = ordinal;
    return ordinal < 2 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
static CUresult primary_state(CUdevice dev, unsigned *flags, int *active)
{
    (void)dev;
    drv.state_queries++;
    *flags = 0;
    *active = drv.primary_active;
    return CUDA_SUCCESS;
}
static CUresult primary_retain(CUcontext *pctx, CUdevice dev)
{
    (void)dev;
    drv.retains++;
    drv.retain_mode = capture_mode_now();
    *pctx = drv.primary;
    return CUDA_SUCCESS;
}
static CUresult primary_release(CUdevice dev)
{
    (void)dev;
    drv.releases++;
    return CUDA_SUCCESS;
}

static CUresult push_current(CUcontext ctx)
{
    drv.pushes++;
    drv.saved = drv.current;
    drv.current = ctx;
    return CUDA_SUCCESS;
}
static CUresult pop_current(CUcontext *pctx)
{
    drv.pops++;
    *pctx = drv.current;
    drv.current = drv.saved;
    return CUDA_SUCCESS;
}

static const struct us_driver_api scripted = {
    .cuCtxGetCurrent = get_current,
    .cuDeviceGet = device_get,
    .cuDevicePrimaryCtxGetState = primary_state,
    .cuDevicePrimaryCtxRetain = primary_retain,
    .cuDevicePrimaryCtxRelease = primary_release,
    .cuCtxPushCurrent = push_current,
    .cuCtxPopCurrent = pop_current,
};

static int setup(void **state)
{
    (void)state;
    drv.current = (CUcontext)0x1000;
    drv.primary = (CUcontext)0x1000;
    drv.primary_active = 1;
    drv.retains = drv.releases = drv.state_queries = drv.pushes = drv.pops = 0;
    drv.retain_mode = cudaStreamCaptureModeGlobal;
    fake_cuda_reset(); /* the runtime table: capture mode per thread */
    us_context_install(&scripted);
    return 0;
}

static void test_context_primary_does_not_compete(void **state)
{
    (void)state;
    CUcontext ctx;
    assert_false(us_context_competes(0, &ctx));
    assert_ptr_equal(ctx, drv.current);
}

static void test_context_secondary_competes_with_active_primary(void **state)
{
    (void)state;
    CUcontext ctx;
    drv.current = (CUcontext)0x2000; /* cuCtxCreate'd, as in case D's created context */
    assert_true(us_context_competes(0, &ctx));
    assert_ptr_equal(ctx, (CUcontext)0x2000);
    /* the primary context is remembered: no more driver look-ups */
    assert_true(us_context_competes(0, &ctx));
    assert_int_equal(drv.retains, 1);
    assert_int_equal(drv.releases, 1); /* every retain released */
    assert_int_equal(drv.state_queries, 1);
}

/* The primary-context look-up (a driver call outside any pipeline) runs in
 * relaxed capture mode, and the program's mode is restored: a graph capture
 * in global mode on another thread must not be invalidated by it
 * (contract.md §7). */
static void test_context_lookup_in_relaxed_mode(void **state)
{
    (void)state;
    CUcontext ctx;
    drv.current = (CUcontext)0x2000;
    assert_int_equal(capture_mode_now(), cudaStreamCaptureModeGlobal);
    assert_true(us_context_competes(0, &ctx));
    assert_int_equal(drv.retains, 1);
    assert_int_equal(drv.retain_mode, cudaStreamCaptureModeRelaxed);
    assert_int_equal(capture_mode_now(), cudaStreamCaptureModeGlobal);
}

static void test_context_secondary_alone_does_not_compete(void **state)
{
    (void)state;
    CUcontext ctx;
    drv.current = (CUcontext)0x2000;
    drv.primary_active = 0; /* case D's created context with no other context */
    assert_false(us_context_competes(0, &ctx));
    assert_int_equal(drv.retains, 0); /* an inactive primary context is never created */
    drv.primary_active = 1;           /* it starts later: seen at the next copy */
    assert_true(us_context_competes(0, &ctx));
}

static void test_context_unknown_answers_no(void **state)
{
    (void)state;
    CUcontext ctx;
    drv.current = (CUcontext)0x2000;
    assert_false(us_context_competes(-1, &ctx));
    assert_false(us_context_competes(5, &ctx)); /* the driver does not know the device */
    drv.current = NULL;                         /* no context on this thread */
    assert_false(us_context_competes(0, &ctx));
    static const struct us_driver_api none;     /* no driver loaded (the simulated runtime) */
    us_context_install(&none);
    drv.current = (CUcontext)0x2000;
    assert_false(us_context_competes(0, &ctx));
    assert_null(ctx);
}

/* What the shim allocates for a created context's copies (fix_busy_d2d's
 * buffer) is allocated in the primary context: made current for the
 * moment, and the program's context current again after. */
static void test_context_enter_primary(void **state)
{
    (void)state;
    bool pushed;
    assert_true(us_context_enter_primary(0, &pushed)); /* the primary is current: nothing to do */
    assert_false(pushed);
    assert_int_equal(drv.pushes, 0);
    drv.current = (CUcontext)0x2000; /* cuCtxCreate'd */
    assert_true(us_context_enter_primary(0, &pushed));
    assert_true(pushed);
    assert_ptr_equal(drv.current, drv.primary);
    us_context_leave_primary(pushed);
    assert_ptr_equal(drv.current, (CUcontext)0x2000);
    assert_int_equal(drv.pops, 1);
    drv.primary_active = 0; /* none to allocate in: declined, nothing pushed */
    us_context_install(&scripted);
    assert_false(us_context_enter_primary(0, &pushed));
    assert_false(pushed);
    assert_false(us_context_enter_primary(-1, &pushed));
    assert_int_equal(drv.pushes, 1);
}

static CUresult get_id(CUcontext ctx, unsigned long long *id)
{
    CUcontext of = ctx != NULL ? ctx : drv.current;
    if (of == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    *id = (unsigned long long)(uintptr_t)of; /* one id per context: none is destroyed here */
    return CUDA_SUCCESS;
}

/* The current device is the current context's: the runtime is asked once
 * per context, not at every call (cudaGetDevice cost 2 us after an idle
 * moment on an H200 host), and a context of another device answers its own
 * device. With no context current, no driver to ask, or a driver without
 * cuCtxGetId (a context destroyed unseen could not be told from a new one at
 * its address), cudaGetDevice answers. */
static void test_context_current_device_asks_once_per_context(void **state)
{
    (void)state;
    struct us_driver_api with_id = scripted;
    with_id.cuCtxGetId = get_id;
    us_context_install(&with_id);
    fake_cuda_reset();
    us_real()->cudaSetDevice(1);
    drv.current = (CUcontext)0x3000; /* a context of device 1 */
    unsigned asked = fake_cuda_count(FAKE_cudaGetDevice);
    assert_int_equal(us_current_device(), 1);
    assert_int_equal(us_current_device(), 1);
    assert_int_equal(us_current_device(), 1);
    assert_int_equal(fake_cuda_count(FAKE_cudaGetDevice) - asked, 1);

    us_real()->cudaSetDevice(0);
    drv.current = drv.primary; /* device 0's */
    assert_int_equal(us_current_device(), 0);
    drv.current = (CUcontext)0x3000; /* back to the context of device 1, known */
    assert_int_equal(us_current_device(), 1);

    drv.current = NULL; /* none current: the runtime answers */
    asked = fake_cuda_count(FAKE_cudaGetDevice);
    assert_int_equal(us_current_device(), 0);
    assert_int_equal(fake_cuda_count(FAKE_cudaGetDevice) - asked, 1);

    static const struct us_driver_api none; /* no driver loaded */
    us_context_install(&none);
    us_real()->cudaSetDevice(1);
    assert_int_equal(us_current_device(), 1);
    us_real()->cudaSetDevice(0);
    assert_int_equal(us_current_device(), 0);

    us_context_install(&scripted); /* no cuCtxGetId: the runtime at every call */
    drv.current = (CUcontext)0x3000;
    us_real()->cudaSetDevice(1);
    asked = fake_cuda_count(FAKE_cudaGetDevice);
    assert_int_equal(us_current_device(), 1);
    assert_int_equal(us_current_device(), 1);
    assert_int_equal(fake_cuda_count(FAKE_cudaGetDevice) - asked, 2);
}

/* A process that sees one device: its current device is 0 without a driver
 * call (the two the table needs were the largest step of a small
 * pass-through copy after an idle moment). The count is asked once; before
 * cuInit it is asked again later; with more devices, or none to tell, the
 * table answers as before. */
static int device_count, count_queries;
static CUresult count_result;

static CUresult get_count(int *count)
{
    count_queries++;
    *count = device_count;
    return count_result;
}

static int current_queries;

static CUresult get_current_counting(CUcontext *pctx)
{
    current_queries++;
    return get_current(pctx);
}

static void test_context_one_device_needs_no_driver_call(void **state)
{
    (void)state;
    struct us_driver_api counted = scripted;
    counted.cuCtxGetId = get_id;
    counted.cuCtxGetCurrent = get_current_counting;
    counted.cuDeviceGetCount = get_count;
    fake_cuda_reset();

    device_count = 1;
    count_result = CUDA_ERROR_NOT_INITIALIZED; /* before cuInit: asked again, the table answers */
    us_context_install(&counted);
    count_queries = current_queries = 0;
    drv.current = (CUcontext)0x3000;
    us_real()->cudaSetDevice(1); /* what the table would answer */
    assert_int_equal(us_current_device(), 1);
    assert_int_equal(current_queries, 1);
    count_result = CUDA_SUCCESS;
    us_real()->cudaSetDevice(0);
    drv.current = drv.primary;
    for (int i = 0; i < 3; i++)
        assert_int_equal(us_current_device(), 0);
    assert_int_equal(count_queries, 2);
    assert_int_equal(current_queries, 1); /* none since the count said one */
    drv.current = NULL;
    assert_int_equal(us_current_device(), 0);
    assert_int_equal(current_queries, 1);

    device_count = 2; /* two devices: the current context's, from the table */
    us_context_install(&counted);
    count_queries = current_queries = 0;
    drv.current = (CUcontext)0x3000;
    us_real()->cudaSetDevice(1);
    assert_int_equal(us_current_device(), 1);
    assert_int_equal(us_current_device(), 1);
    assert_int_equal(count_queries, 1);
    assert_int_equal(current_queries, 2);

    device_count = 1; /* the count unknown: the table */
    count_result = CUDA_ERROR_UNKNOWN;
    us_context_install(&counted);
    count_queries = current_queries = 0;
    assert_int_equal(us_current_device(), 1);
    assert_int_equal(us_current_device(), 1);
    assert_int_equal(count_queries, 1);
    assert_int_equal(current_queries, 2);
    us_real()->cudaSetDevice(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_context_primary_does_not_compete, setup),
        cmocka_unit_test_setup(test_context_secondary_competes_with_active_primary, setup),
        cmocka_unit_test_setup(test_context_lookup_in_relaxed_mode, setup),
        cmocka_unit_test_setup(test_context_secondary_alone_does_not_compete, setup),
        cmocka_unit_test_setup(test_context_unknown_answers_no, setup),
        cmocka_unit_test_setup(test_context_enter_primary, setup),
        cmocka_unit_test_setup(test_context_current_device_asks_once_per_context, setup),
        cmocka_unit_test_setup(test_context_one_device_needs_no_driver_call, setup),
    };
    return US_RUN_TESTS("test_context", tests, NULL, NULL);
}
