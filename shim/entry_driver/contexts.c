/* contexts.c - cuCtxDestroy[_v2]: the end of a context the program made.
 *
 * The shim's lanes, slot events and timing events of a context belong to it
 * (model/context.h). They are taken out of the lookups before the real
 * destroy, so that no copy (of a context made meanwhile, perhaps at the same
 * address) can find them, and forgotten after it without a call on any of
 * their handles: the destroy releases what lives in the context, and calling
 * cudaStreamDestroy/cudaEventDestroy first would only repeat that, with the
 * risk of a call into a context being torn down. Pinned memory the context
 * owned leaves the pool; the pool's other memory lives in primary contexts.
 * A program that calls cuCtxDestroy where this layer cannot see it (linked
 * with -lcuda) is covered at its next copy: an entry whose context id
 * (cuCtxGetId) changed is forgotten then. Runs even while the shim is at
 * work on this thread: the context is gone, whoever destroyed it. */
#include "driver_layer.h"

#include "context.h"

static CUresult destroy(enum us_drv_fn fn, CUcontext ctx)
{
    CUresult (*real)(CUcontext);
    *(void **)&real = us_drv_real(fn);
    if (real == NULL)
        return CUDA_ERROR_NOT_FOUND;
    struct us_ctx gone;
    bool known = ctx != NULL && us_context_retire(ctx, &gone);
    CUresult rc = real(ctx);
    /* also when it failed: the entry left the lookups, its resources are
     * never used again (a live context gets a new entry at its next copy) */
    if (known)
        us_context_forget_gone(&gone);
    return rc;
}

CUresult us_drv_wrap_cuCtxDestroy(CUcontext ctx)
{
    return destroy(US_DRV_FN_cuCtxDestroy, ctx);
}

CUresult us_drv_wrap_cuCtxDestroy_v2(CUcontext ctx)
{
    return destroy(US_DRV_FN_cuCtxDestroy_v2, ctx);
}
