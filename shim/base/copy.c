/* copy.c - one intercepted copy: its API's name and its native call, both
 * from the table of copy APIs (copy.h). */
#include "copy.h"
#include "probe.h"
#include "hot.h"

#include "real.h"
#include "state.h"

US_HOT const char *us_copy_api_name(enum us_copy_api api)
{
    switch (api) {
#define API_NAME(id, fn, sync, per_thread, args) case id: return #fn;
    US_COPY_APIS(API_NAME)
    US_DRIVER_COPY_APIS(API_NAME)
#undef API_NAME
    default: return "cudaMemcpy?";
    }
}

const char *us_copy_path_name(enum us_copy_path path)
{
    switch (path) {
    case US_PATH_H2H: return "H2H";
    case US_PATH_H2D_PINNED: return "H2D pinned";
    case US_PATH_H2D_PAGEABLE: return "H2D pageable";
    case US_PATH_D2H_PINNED: return "D2H pinned";
    case US_PATH_D2H_PAGEABLE: return "D2H pageable";
    case US_PATH_D2D_SAME: return "D2D";
    case US_PATH_D2D_PEER: return "D2D peer";
    case US_PATH_D2D_STAGED: return "D2D staged";
    default: return "unknown";
    }
}

static cudaError_t native_call(const struct us_copy *c)
{
    const struct us_real_api *real = us_real();
    switch (c->api) {
#define NATIVE_CALL(id, fn, sync, per_thread, args) \
    case id: return real->fn != NULL ? real->fn args : US_ERR_NO_REAL;
    US_COPY_APIS(NATIVE_CALL)
#undef NATIVE_CALL
    /* the driver's codes are the runtime's numbers for every code a copy returns */
#define DRIVER_CALL(id, fn, sync, per_thread, shape) \
    case id: return c->driver_fn != NULL ? (cudaError_t)((us_drv_##shape##_fn)c->driver_fn) US_DRV_ARGS_##shape : US_ERR_NO_REAL;
    US_DRIVER_COPY_APIS(DRIVER_CALL)
#undef DRIVER_CALL
    default: return cudaErrorInvalidValue;
    }
}

/* Calls through a NULL entry are answered US_ERR_NO_REAL, never made. The
 * call is made as the shim's own work (us_state_enter): a runtime copy
 * reaches the driver layer below it (the runtime takes its copy functions
 * from cuGetProcAddress, shim/entry_driver), which must pass it straight
 * through so that each copy is handled once, at the layer the program
 * called. */
US_HOT cudaError_t us_copy_native(const struct us_copy *c)
{
    if (c->rehearsal) /* the first copies' rehearsal (chain.h) issues nothing */
        return cudaSuccess;
    us_state_enter();
    US_PROBE_STAMP(native_begun);
    cudaError_t err = native_call(c);
    us_state_leave();
    return err;
}
