/* launch.c - work that runs code on a stream's worker: kernels (host
 * functions `void fn(void **args)`, see fakecuda.h), host functions and
 * stream callbacks. A running kernel keeps its device's compute engine busy
 * (case D in copy.c). */
#include "fc.h"

#include <stdlib.h>
#include <string.h>

#define FC_MAX_KERNEL_ARGS 32

struct fc_kernel_sig {
    const void *func;
    unsigned nargs;
    size_t sizes[FC_MAX_KERNEL_ARGS];
    struct fc_kernel_sig *next;
};

static struct fc_kernel_sig *sigs;
static pthread_mutex_t sigs_mu = PTHREAD_MUTEX_INITIALIZER;

int fakecuda_register_kernel(const void *func, unsigned nargs, const size_t *arg_sizes)
{
    if (func == NULL || nargs > FC_MAX_KERNEL_ARGS || (nargs > 0 && arg_sizes == NULL))
        return -1;
    pthread_mutex_lock(&sigs_mu);
    struct fc_kernel_sig *s = sigs;
    while (s != NULL && s->func != func)
        s = s->next;
    if (s == NULL && (s = calloc(1, sizeof *s)) != NULL) {
        s->func = func;
        s->next = sigs;
        sigs = s;
    }
    if (s != NULL) {
        s->nargs = nargs;
        if (nargs > 0)
            memcpy(s->sizes, arg_sizes, nargs * sizeof *arg_sizes);
    }
    pthread_mutex_unlock(&sigs_mu);
    return s != NULL ? 0 : -1;
}

/* Copies the argument values of a registered kernel into one block: the
 * pointer array, then the values. NULL when the kernel is not registered. */
void *fc_kernel_args_copy(const void *func, void **args)
{
    void *block = NULL;
    pthread_mutex_lock(&sigs_mu);
    const struct fc_kernel_sig *s = sigs;
    while (s != NULL && s->func != func)
        s = s->next;
    if (s != NULL && (s->nargs == 0 || args != NULL)) {
        size_t head = FC_MAX_KERNEL_ARGS * sizeof(void *), total = head;
        for (unsigned i = 0; i < s->nargs; i++)
            total += (s->sizes[i] + 15) & ~(size_t)15;
        block = malloc(total);
        if (block != NULL) {
            void **ptrs = block;
            char *at = (char *)block + head;
            for (unsigned i = 0; i < s->nargs; i++) {
                memcpy(at, args[i], s->sizes[i]);
                ptrs[i] = at;
                at += (s->sizes[i] + 15) & ~(size_t)15;
            }
        }
    }
    pthread_mutex_unlock(&sigs_mu);
    return block;
}

/* While it runs, a kernel holds its device's compute engine for its own
 * context (other contexts' copies wait a time slice), and when it occupies
 * every SM it leaves no room for its own context's copies until it ends:
 * what a same-device copy waits behind (case D, copy.c). */
static void kernel_occupy_locked(struct fc_op *op, int delta)
{
    struct fc_device *dev = &fc_g.dev[op->stream->device];
    int full = op->u.kernel.occupies_all ? delta : 0;
    dev->running_kernels += delta;
    dev->running_full_kernels += full;
    op->stream->ctx->running_kernels += delta;
    op->stream->ctx->running_full_kernels += full;
    op->u.kernel.holds_engine = delta > 0;
}

static void kernel_run(struct fc_op *op, cudaError_t status)
{
    (void)status;
    pthread_mutex_lock(&fc_g.mu);
    if (!op->u.kernel.holds_engine)
        kernel_occupy_locked(op, 1);
    pthread_mutex_unlock(&fc_g.mu);
    op->u.kernel.fn(op->u.kernel.args);
    pthread_mutex_lock(&fc_g.mu);
    kernel_occupy_locked(op, -1);
    pthread_cond_broadcast(&fc_g.done);
    pthread_mutex_unlock(&fc_g.mu);
}

static void kernel_complete(struct fc_op *op)
{
    free(op->u.kernel.owned);
}

struct fc_op *fc_kernel_op_new(void (*fn)(void **), void **args)
{
    struct fc_op *op = fc_op_new(kernel_run);
    op->complete = kernel_complete;
    op->counts_as_work = true;
    op->u.kernel.fn = fn;
    op->u.kernel.args = args; /* the graph's: not freed after the run */
    return op;
}

static cudaError_t launch_kernel(const void *func, dim3 grid, dim3 block, void **args, cudaStream_t stream,
                                 bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (func == NULL)
        return fc_ret(cudaErrorInvalidDeviceFunction);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0 ||
        (unsigned long long)block.x * block.y * block.z > 1024)
        return fc_ret(cudaErrorInvalidConfiguration);
    void *owned = fc_kernel_args_copy(func, args);
    fc_api_touch(); /* a launch waits while a pageable D2H holds the API lock (case C) */
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    cudaError_t err = fc_stream_get(stream, per_thread, &s);
    if (err == cudaSuccess && s->capture != NULL) {
        /* a kernel node keeps the argument values (an unregistered kernel:
         * the caller's pointer, which must outlive the graph) */
        struct fc_node node = {.kind = FC_NODE_KERNEL};
        node.u.kernel.fn = (void (*)(void **))func;
        node.u.kernel.args = owned != NULL ? owned : args;
        node.u.kernel.owned = owned;
        fc_capture_add_node_locked(s, &node);
    } else if (err == cudaSuccess) {
        struct fc_op *op = fc_op_new(kernel_run);
        op->complete = kernel_complete;
        op->counts_as_work = true;
        op->u.kernel.fn = (void (*)(void **))func;
        op->u.kernel.args = owned != NULL ? owned : args;
        op->u.kernel.owned = owned;
        op->u.kernel.occupies_all = (unsigned long long)grid.x * grid.y * grid.z >= FC_SM_COUNT;
        fc_submit_locked(s, op);
        /* the GPU starts it within microseconds, not when the stream's
         * thread is scheduled: work issued next on other streams sees it */
        if (fc_op_startable_locked(op))
            kernel_occupy_locked(op, 1);
        fc_stat_add(kernels, 1);
    } else {
        free(owned);
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shared_mem,
                             cudaStream_t stream)
{
    (void)shared_mem;
    return launch_kernel(func, grid, block, args, stream, false);
}

/* What nvcc's <<<>>> calls since CUDA 13 (crt/device_functions.h), with the
 * kernel handle __cudaGetKernel gave: here the handle is the function. */
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shared_mem,
                               cudaStream_t stream)
{
    (void)shared_mem;
    return launch_kernel((const void *)kernel, grid, block, args, stream, false);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shared_mem,
                                    cudaStream_t stream)
{
    (void)shared_mem;
    return launch_kernel((const void *)kernel, grid, block, args, stream, true);
}

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args, size_t shared_mem,
                                  cudaStream_t stream)
{
    (void)shared_mem;
    return launch_kernel(func, grid, block, args, stream, true);
}

/* --- host functions and callbacks ------------------------------------------------------- */

static void host_run(struct fc_op *op, cudaError_t status)
{
    if (op->u.host.fn != NULL)
        op->u.host.fn(op->u.host.data);
    else
        op->u.host.cb(op->u.host.handle, status, op->u.host.data);
}

struct fc_op *fc_host_op_new(const struct fc_host_op *host)
{
    struct fc_op *op = fc_op_new(host_run);
    op->counts_as_work = true;
    op->runs_after_error = host->cb != NULL;
    op->u.host = *host;
    return op;
}

/* cudaLaunchHostFunc (h->fn) and cudaStreamAddCallback (h->cb). */
static cudaError_t enqueue_host(cudaStream_t stream, bool per_thread, const struct fc_host_op *h, unsigned flags)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if ((h->fn == NULL && h->cb == NULL) || flags != 0)
        return fc_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    cudaError_t err = fc_stream_get(stream, per_thread, &s);
    if (err == cudaSuccess && s->capture != NULL) {
        struct fc_node node = {.kind = FC_NODE_HOST, .u.host = *h};
        fc_capture_add_node_locked(s, &node);
    } else if (err == cudaSuccess) {
        struct fc_op *op = fc_op_new(host_run);
        op->counts_as_work = true;
        op->runs_after_error = h->cb != NULL; /* callbacks learn the error; host functions are skipped */
        op->u.host = *h;
        fc_submit_locked(s, op);
        fc_stat_add(host_funcs, 1);
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *data)
{
    return enqueue_host(stream, false, &(struct fc_host_op){.fn = fn, .data = data}, 0);
}

cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *data)
{
    return enqueue_host(stream, true, &(struct fc_host_op){.fn = fn, .data = data}, 0);
}

cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t cb, void *data, unsigned int flags)
{
    return enqueue_host(stream, false, &(struct fc_host_op){.cb = cb, .handle = stream, .data = data}, flags);
}

cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t cb, void *data, unsigned int flags)
{
    return enqueue_host(stream, true, &(struct fc_host_op){.cb = cb, .handle = stream, .data = data}, flags);
}
