/* alloc.c - exported allocation functions. Each success teaches the pointer
 * table (core/ptrtable.c) a range, each release removes it; the calls that
 * synchronize the device are findings (device_alloc_sync, pinned_alloc_sync). */
#include <stdint.h>

#include "export.h"
#include "ptrtable.h"

/* Runs `call` under a watch for `rule`; shared by every allocation entry. */
#define WATCHED(rule, api, call, bytes)                                      \
    ({                                                                        \
        struct us_watch w_;                                                   \
        cudaError_t e_ = US_ERR_FORBIDDEN;                                    \
        if (us_watch_begin(&w_, (rule), (api))) {                             \
            e_ = (call);                                                      \
            us_watch_end(&w_, NULL, US_STREAM_USER, us_current_device(), (bytes)); \
        }                                                                     \
        e_;                                                                   \
    })

US_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    const struct us_real_api *real = us_real();
    if (real->cudaMalloc == NULL)
        return US_ERR_NO_REAL;
    cudaError_t err = real->cudaMalloc(devPtr, size);
    if (err == cudaSuccess && !us_passthrough() && devPtr != NULL && *devPtr != NULL) {
        us_state_note_call();
        us_ptrtable_insert((uintptr_t)*devPtr, size, US_MEM_DEVICE, us_current_device());
    }
    return err;
}

US_EXPORT cudaError_t cudaFree(void *devPtr)
{
    const struct us_real_api *real = us_real();
    if (real->cudaFree == NULL)
        return US_ERR_NO_REAL;
    /* cudaFree(NULL) is the idiom that creates the context: not a finding */
    if (devPtr == NULL || us_passthrough())
        return real->cudaFree(devPtr);
    us_state_note_call();
    cudaError_t err = WATCHED(US_RULE_device_alloc_sync, "cudaFree", real->cudaFree(devPtr), 0);
    if (err == cudaSuccess)
        us_ptrtable_remove((uintptr_t)devPtr, NULL);
    return err;
}

static cudaError_t host_alloc(const char *api, void **ptr, size_t size, unsigned flags, bool with_flags)
{
    const struct us_real_api *real = us_real();
    if ((with_flags ? (void *)real->cudaHostAlloc : (void *)real->cudaMallocHost) == NULL)
        return US_ERR_NO_REAL;
    if (us_passthrough())
        return with_flags ? real->cudaHostAlloc(ptr, size, flags) : real->cudaMallocHost(ptr, size);
    us_state_note_call();
    cudaError_t err = WATCHED(US_RULE_pinned_alloc_sync, api,
                              with_flags ? real->cudaHostAlloc(ptr, size, flags) : real->cudaMallocHost(ptr, size),
                              size);
    if (err == cudaSuccess && ptr != NULL && *ptr != NULL)
        us_ptrtable_insert((uintptr_t)*ptr, size, US_MEM_PINNED, -1);
    return err;
}

US_EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return host_alloc("cudaMallocHost", ptr, size, 0, false);
}

US_EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    return host_alloc("cudaHostAlloc", pHost, size, flags, true);
}

/* Release of a host range (cudaFreeHost, cudaHostUnregister). */
static cudaError_t host_release(const char *api, cudaError_t (*real_fn)(void *), void *ptr)
{
    if (real_fn == NULL)
        return US_ERR_NO_REAL;
    if (ptr == NULL || us_passthrough())
        return real_fn(ptr);
    us_state_note_call();
    cudaError_t err = WATCHED(US_RULE_pinned_alloc_sync, api, real_fn(ptr), 0);
    if (err == cudaSuccess)
        us_ptrtable_remove((uintptr_t)ptr, NULL);
    return err;
}

US_EXPORT cudaError_t cudaFreeHost(void *ptr)
{
    return host_release("cudaFreeHost", us_real()->cudaFreeHost, ptr);
}

US_EXPORT cudaError_t cudaHostUnregister(void *ptr)
{
    return host_release("cudaHostUnregister", us_real()->cudaHostUnregister, ptr);
}

US_EXPORT cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    const struct us_real_api *real = us_real();
    if (real->cudaHostRegister == NULL)
        return US_ERR_NO_REAL;
    if (us_passthrough())
        return real->cudaHostRegister(ptr, size, flags);
    us_state_note_call();
    cudaError_t err =
        WATCHED(US_RULE_pinned_alloc_sync, "cudaHostRegister", real->cudaHostRegister(ptr, size, flags), size);
    if (err == cudaSuccess)
        us_ptrtable_insert((uintptr_t)ptr, size, US_MEM_REGISTERED, -1);
    return err;
}
