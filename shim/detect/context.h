/* context.h - which CUDA context a call is issued from, for the rule that
 * depends on it (busy_engine_d2d, case D): a same-device copy runs
 * as a kernel, and when another context of the device holds the compute
 * engine it waits for a time slice (2 ms by default).
 *
 * Asks the driver (libcuda, loaded by the runtime; the shim neither loads
 * nor links it): the calling thread's current context, and the device's
 * primary context, remembered per device once it is active. A copy pays one
 * cuCtxGetCurrent. Anything unknown answers "does not compete". */
#ifndef UNSTALL_CONTEXT_H
#define UNSTALL_CONTEXT_H

#include <cuda.h>
#include <stdbool.h>

struct us_driver_api {
    CUresult (*cuCtxGetCurrent)(CUcontext *pctx);
    CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
    CUresult (*cuDevicePrimaryCtxGetState)(CUdevice dev, unsigned int *flags, int *active);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *pctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
    CUresult (*cuCtxPushCurrent)(CUcontext ctx);
    CUresult (*cuCtxPopCurrent)(CUcontext *pctx);
};

/* True when the calling thread's current context is not the primary context
 * of `device` (a runtime ordinal) while that primary context is active: two
 * contexts share the device's compute engine. *context receives the current
 * context (NULL when unknown). */
bool us_context_competes(int device, CUcontext *context);

/* True when the calling thread works in a context that is not a primary
 * context: one the program made (cuCtxCreate) and made current. The shim's
 * own streams, events and pinned slots belong to primary contexts, and a
 * stream of another context of the same device is an invalid handle there,
 * so the pipelines leave such copies to the driver (logged once). False
 * when the driver cannot be asked. One cuCtxGetCurrent, plus the runtime's
 * current device. */
bool us_context_foreign(void);

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

/* Replace the driver functions (tests); NULL: resolve from libcuda again.
 * Also forgets the primary contexts remembered. */
void us_context_install(const struct us_driver_api *api);

#endif
