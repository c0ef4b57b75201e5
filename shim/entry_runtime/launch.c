/* launch.c - exported kernel launches and host functions. A launch on the
 * legacy default stream of a device with blocking streams is a finding
 * (legacy_stream); everything else passes straight through, published to
 * the hang explainer when it is on (a kernel's first launch may wait to
 * load its module; a host function is named when it runs too long), on the
 * stream legacy_stream moves legacy-stream work to when it is set. */
#include "export.h"
#include "hang.h"
#include "legacy_stream.h"

typedef cudaError_t (*launch_fn)(const void *, dim3, dim3, void **, size_t, cudaStream_t);

/* The kernel is passed through as it came: a host function's address
 * (cudaLaunchKernel) or a cudaKernel_t (__cudaLaunchKernel, what nvcc's
 * <<<>>> calls since CUDA 13); both are pointers. */
static cudaError_t launch(launch_fn real_fn, const char *api, bool per_thread, const void *func, dim3 grid,
                          dim3 block, void **args, size_t shared_mem, cudaStream_t stream)
{
    if (!us_entry_acts(real_fn != NULL))
        return real_fn != NULL ? real_fn(func, grid, block, args, shared_mem, stream) : US_ERR_NO_REAL;
    struct us_legacy_move move;
    stream = us_legacy_move_begin(stream, per_thread, false, &move);
    enum us_stream_kind kind = us_stream_kind_of(stream, per_thread);
    cudaError_t err;
    if (!us_legacy_contended(kind)) {
        struct us_hang_mark hang;
        us_hang_enter(&hang, api, stream, kind == US_STREAM_LEGACY);
        err = real_fn(func, grid, block, args, shared_mem, stream);
        us_hang_leave(&hang);
    } else {
        struct us_watch w;
        if (!us_watch_begin(&w, US_RULE_legacy_stream, api))
            return US_ERR_FORBIDDEN;
        err = real_fn(func, grid, block, args, shared_mem, stream);
        us_watch_end(&w, stream, kind, us_current_device(), 0);
    }
    us_legacy_move_end(&move, err == cudaSuccess);
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

US_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                         size_t sharedMem, cudaStream_t stream)
{
    launch_fn real_fn;
    *(void **)&real_fn = (void *)us_real()->__cudaLaunchKernel;
    return launch(real_fn, __func__, false, (const void *)kernel, gridDim, blockDim, args, sharedMem, stream);
}

US_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                              size_t sharedMem, cudaStream_t stream)
{
    launch_fn real_fn;
    *(void **)&real_fn = (void *)us_real()->__cudaLaunchKernel_ptsz;
    return launch(real_fn, __func__, true, (const void *)kernel, gridDim, blockDim, args, sharedMem, stream);
}

typedef cudaError_t (*host_fn_launch)(cudaStream_t, cudaHostFn_t, void *);

static cudaError_t launch_host_fn(host_fn_launch real_fn, bool per_thread, cudaStream_t stream, cudaHostFn_t fn,
                                  void *data)
{
    if (real_fn == NULL)
        return US_ERR_NO_REAL;
    if (!us_entry_acts(true))
        return real_fn(stream, fn, data);
    struct us_legacy_move move;
    stream = us_legacy_move_begin(stream, per_thread, false, &move);
    cudaHostFn_t wrapped_fn = fn;
    void *wrapped_data = data;
    bool wrapped = us_hang_wrap_host_fn(fn, data, stream, &wrapped_fn, &wrapped_data);
    cudaError_t err = real_fn(stream, wrapped_fn, wrapped_data);
    if (err != cudaSuccess && wrapped)
        us_hang_unwrap_host_fn(wrapped_data);
    us_legacy_move_end(&move, err == cudaSuccess);
    return err;
}

US_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    return launch_host_fn(us_real()->cudaLaunchHostFunc, false, stream, fn, userData);
}

US_EXPORT cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    return launch_host_fn(us_real()->cudaLaunchHostFunc_ptsz, true, stream, fn, userData);
}
