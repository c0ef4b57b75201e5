/* context_driver.h - what the driver says of contexts: the calling thread's
 * current context, the device's primary context, a push and pop around the
 * shim's own work in it, and whether the caller's context competes with the
 * primary one for the compute engine (the rule busy_engine_d2d, case D: a
 * same-device copy runs as a kernel, and when another context of the device
 * holds the compute engine it waits for a time slice, 2 ms by default).
 *
 * Asks the driver (libcuda, loaded by the runtime; the shim neither loads
 * nor links it; resolve.h finds its functions): the primary context is
 * remembered per device once it is active. Anything unknown answers "does
 * not compete". */
#ifndef UNSTALL_CONTEXT_DRIVER_H
#define UNSTALL_CONTEXT_DRIVER_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

struct us_driver_api {
    CUresult (*cuCtxGetCurrent)(CUcontext *pctx);
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuCtxGetId)(CUcontext ctx, unsigned long long *id);
    CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
    CUresult (*cuDevicePrimaryCtxGetState)(CUdevice dev, unsigned int *flags, int *active);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *pctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
    CUresult (*cuCtxPushCurrent)(CUcontext ctx);
    CUresult (*cuCtxPopCurrent)(CUcontext *pctx);
    CUresult (*cuDeviceGetCount)(int *count);
};

/* True when the calling thread's current context is not the primary context
 * of `device` (a runtime ordinal) while that primary context is active: two
 * contexts share the device's compute engine. *context receives the current
 * context (NULL when unknown). */
bool us_context_competes(int device, CUcontext *context);

/* The calling thread's current context; NULL when none or unknown. One
 * cuCtxGetCurrent. */
CUcontext us_context_current(void);

/* Makes the primary context of `device` current on the calling thread until
 * us_context_leave_primary, when it is active: what the shim allocates
 * there lives as long as the runtime, while a context the program created
 * may be destroyed, and what was allocated in it with it. *pushed: whether
 * a push happened (false when it was current already). false: the primary
 * context is not active, or the driver cannot be asked; nothing pushed. */
bool us_context_enter_primary(int device, bool *pushed);
void us_context_leave_primary(bool pushed);

/* Makes `ctx` current until us_context_leave_primary(*pushed) (the same
 * pop); *pushed false when it was current already. false: not pushed. */
bool us_context_push(CUcontext ctx, bool *pushed);

/* The driver functions in use (resolved on first use, or installed). */
const struct us_driver_api *us_context_driver(void);

/* `device`'s primary context when it is active, remembered once seen; NULL
 * when not active or unknown. Asked in relaxed capture mode. */
CUcontext us_context_primary_handle(const struct us_driver_api *api, int device);

/* Forget the primary context remembered for `device` (cudaDeviceReset: it may
 * come back at another address). */
void us_context_forget_primary_handle(int device);

/* Replace the driver functions (tests; NULL: libcuda's) and forget the
 * primary contexts remembered (us_context_install does both). */
void us_context_driver_install(const struct us_driver_api *api);

#endif
