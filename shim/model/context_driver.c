/* context_driver.c - see context_driver.h. */
#include "context_driver.h"
#include "hot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "device_state.h"
#include "log.h"
#include "real.h"
#include "resolve.h"

static struct us_driver_api resolved;
static const struct us_driver_api *_Atomic active_api;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;
/* the primary context of each device, once seen active; never released by
 * us (retain and release are paired at lookup) */
static _Atomic(CUcontext) primary[US_MAX_DEVICES];

static void resolve(void)
{
    /* RTLD_NOLOAD: the runtime loaded the driver; never load it ourselves */
    void *driver = us_resolve_loaded("libcuda.so.1");
    if (driver != NULL) {
        *(void **)&resolved.cuCtxGetCurrent = us_resolve_in(driver, "cuCtxGetCurrent");
        *(void **)&resolved.cuCtxSetCurrent = us_resolve_in(driver, "cuCtxSetCurrent");
        *(void **)&resolved.cuCtxGetId = us_resolve_in(driver, "cuCtxGetId");
        *(void **)&resolved.cuDeviceGet = us_resolve_in(driver, "cuDeviceGet");
        *(void **)&resolved.cuDevicePrimaryCtxGetState = us_resolve_in(driver, "cuDevicePrimaryCtxGetState");
        *(void **)&resolved.cuDevicePrimaryCtxRetain = us_resolve_in(driver, "cuDevicePrimaryCtxRetain");
        *(void **)&resolved.cuDevicePrimaryCtxRelease = us_resolve_in(driver, "cuDevicePrimaryCtxRelease_v2");
        *(void **)&resolved.cuCtxPushCurrent = us_resolve_in(driver, "cuCtxPushCurrent_v2");
        *(void **)&resolved.cuCtxPopCurrent = us_resolve_in(driver, "cuCtxPopCurrent_v2");
        *(void **)&resolved.cuDeviceGetCount = us_resolve_in(driver, "cuDeviceGetCount");
    }
    const struct us_driver_api *expected = NULL;
    atomic_compare_exchange_strong(&active_api, &expected, &resolved);
}

const struct us_driver_api *us_context_driver(void)
{
    const struct us_driver_api *api = atomic_load_explicit(&active_api, memory_order_acquire);
    if (api != NULL)
        return api;
    pthread_once(&resolve_once, resolve);
    return atomic_load_explicit(&active_api, memory_order_acquire);
}

/* The device's primary context if it is active (retained and released at
 * once: an active primary context stays while the runtime holds it). The
 * driver is asked in relaxed capture mode: another thread may be capturing
 * a graph in global mode (contract.md §7); this runs once per device. */
static CUcontext lookup_primary(const struct us_driver_api *api, int device);

CUcontext us_context_primary_handle(const struct us_driver_api *api, int device)
{
    CUcontext known = atomic_load_explicit(&primary[device], memory_order_relaxed);
    if (known != NULL)
        return known;
    const struct us_real_api *real = us_real();
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    bool exchanged = real->cudaThreadExchangeStreamCaptureMode != NULL &&
                     real->cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
    CUcontext ctx = lookup_primary(api, device);
    if (exchanged)
        real->cudaThreadExchangeStreamCaptureMode(&mode);
    return ctx;
}

static CUcontext lookup_primary(const struct us_driver_api *api, int device)
{
    CUdevice dev;
    unsigned flags;
    int active = 0;
    CUcontext ctx = NULL;
    if (api->cuDeviceGet == NULL || api->cuDevicePrimaryCtxGetState == NULL || api->cuDevicePrimaryCtxRetain == NULL ||
        api->cuDevicePrimaryCtxRelease == NULL || api->cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
        api->cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active)
        return NULL;
    if (api->cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
        return NULL;
    api->cuDevicePrimaryCtxRelease(dev);
    atomic_store_explicit(&primary[device], ctx, memory_order_relaxed);
    return ctx;
}

bool us_context_competes(int device, CUcontext *context)
{
    *context = NULL;
    const struct us_driver_api *api = us_context_driver();
    if (device < 0 || device >= US_MAX_DEVICES || api->cuCtxGetCurrent == NULL ||
        api->cuCtxGetCurrent(context) != CUDA_SUCCESS || *context == NULL)
        return false;
    CUcontext primary_ctx = us_context_primary_handle(api, device);
    return primary_ctx != NULL && primary_ctx != *context;
}

bool us_context_enter_primary(int device, bool *pushed)
{
    *pushed = false;
    const struct us_driver_api *api = us_context_driver();
    CUcontext current = NULL;
    if (device < 0 || device >= US_MAX_DEVICES || api->cuCtxGetCurrent == NULL ||
        api->cuCtxGetCurrent(&current) != CUDA_SUCCESS)
        return false;
    CUcontext primary_ctx = us_context_primary_handle(api, device);
    if (primary_ctx == NULL)
        return false;
    if (primary_ctx == current)
        return true;
    if (api->cuCtxPushCurrent == NULL || api->cuCtxPopCurrent == NULL ||
        api->cuCtxPushCurrent(primary_ctx) != CUDA_SUCCESS)
        return false;
    *pushed = true;
    return true;
}

bool us_context_push(CUcontext ctx, bool *pushed)
{
    *pushed = false;
    const struct us_driver_api *api = us_context_driver();
    CUcontext current = NULL;
    if (api->cuCtxGetCurrent == NULL || api->cuCtxGetCurrent(&current) != CUDA_SUCCESS)
        return false;
    if (current == ctx)
        return true;
    if (api->cuCtxPushCurrent == NULL || api->cuCtxPopCurrent == NULL || api->cuCtxPushCurrent(ctx) != CUDA_SUCCESS)
        return false;
    *pushed = true;
    return true;
}

void us_context_leave_primary(bool pushed)
{
    const struct us_driver_api *api = us_context_driver();
    CUcontext popped;
    if (pushed)
        api->cuCtxPopCurrent(&popped);
}

CUcontext us_context_current(void)
{
    const struct us_driver_api *api = us_context_driver();
    CUcontext ctx = NULL;
    if (api->cuCtxGetCurrent == NULL || api->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS)
        return NULL;
    return ctx;
}

void us_context_forget_primary_handle(int device)
{
    if (device >= 0 && device < US_MAX_DEVICES)
        atomic_store(&primary[device], NULL);
}

void us_context_driver_install(const struct us_driver_api *api)
{
    pthread_once(&resolve_once, resolve); /* so that a later resolve does not undo this */
    atomic_store(&active_api, api != NULL ? api : &resolved);
    for (int d = 0; d < US_MAX_DEVICES; d++)
        atomic_store(&primary[d], NULL);
}
