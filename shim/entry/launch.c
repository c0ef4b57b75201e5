/* launch.c - exported kernel launches. A launch on the legacy default
 * stream of a device with blocking streams is a finding (legacy_stream);
 * everything else passes straight through. */
#include "export.h"

typedef cudaError_t (*launch_fn)(const void *, dim3, dim3, void **, size_t, cudaStream_t);

static cudaError_t launch(launch_fn real_fn, const char *api, bool per_thread, const void *func, dim3 grid,
                          dim3 block, void **args, size_t shared_mem, cudaStream_t stream)
{
    if (!us_entry_acts(real_fn != NULL))
        return real_fn != NULL ? real_fn(func, grid, block, args, shared_mem, stream) : US_ERR_NO_REAL;
    enum us_stream_kind kind = us_stream_kind_of(stream, per_thread);
    if (!us_legacy_contended(kind))
        return real_fn(func, grid, block, args, shared_mem, stream);
    struct us_watch w;
    if (!us_watch_begin(&w, US_RULE_legacy_stream, api))
        return US_ERR_FORBIDDEN;
    cudaError_t err = real_fn(func, grid, block, args, shared_mem, stream);
    us_watch_end(&w, stream, kind, us_current_device(), 0);
    return err;
}

US_EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                       cudaStream_t stream)
{
    return launch(us_real()->cudaLaunchKernel, __func__, false, func, gridDim, blockDim, args, sharedMem,
                  stream);
}

US_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                            size_t sharedMem, cudaStream_t stream)
{
    return launch(us_real()->cudaLaunchKernel_ptsz, __func__, true, func, gridDim, blockDim, args,
                  sharedMem, stream);
}
