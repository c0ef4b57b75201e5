/* alloc.c - exported allocation functions. Each success teaches the pointer
 * table (core/ptrtable.c) a range, each release removes it; the calls that
 * synchronize the device are findings: cudaFree (device_alloc_sync),
 * cudaFreeHost and cudaHostUnregister (pinned_alloc_sync). */
#include <stdint.h>

#include "chain.h"
#include "export.h"
#include "hostpages.h"
#include "inflight.h"
#include "ptrtable.h"
#include "staging.h"

/* After an allocation (or registration): teach the table the range.
 * Allocations are not findings: cudaMalloc, and pinned allocation and
 * registration, did not wait for the device (measured, CUDA 13.0). */
static cudaError_t learn(cudaError_t err, const void *base, size_t size, enum us_mem_kind kind)
{
    if (err == cudaSuccess) /* the pages remembered as pageable may not be (hostpages.h) */
        us_hostpages_mapping_changed();
    if (err != cudaSuccess || base == NULL || !us_entry_acts(true))
        return err;
    us_ptrtable_insert((uintptr_t)base, size, kind, kind == US_MEM_DEVICE ? us_current_device() : -1);
    return err;
}

US_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    const struct us_real_api *real = us_real();
    if (real->cudaMalloc == NULL)
        return US_ERR_NO_REAL;
    cudaError_t err = real->cudaMalloc(devPtr, size);
    err = learn(err, err == cudaSuccess ? *devPtr : NULL, size, US_MEM_DEVICE);
    /* once: the first copy's one-time costs, paid here, the range known */
    if (err == cudaSuccess && us_entry_acts(true) && us_copy_warm(*devPtr, size))
        us_entry_rehearse_copies(*devPtr);
    return err;
}

US_EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    const struct us_real_api *real = us_real();
    if (real->cudaMallocHost == NULL)
        return US_ERR_NO_REAL;
    cudaError_t err = real->cudaMallocHost(ptr, size);
    return learn(err, err == cudaSuccess ? *ptr : NULL, size, US_MEM_PINNED);
}

US_EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    const struct us_real_api *real = us_real();
    if (real->cudaHostAlloc == NULL)
        return US_ERR_NO_REAL;
    cudaError_t err = real->cudaHostAlloc(pHost, size, flags);
    return learn(err, err == cudaSuccess ? *pHost : NULL, size, US_MEM_PINNED);
}

US_EXPORT cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    const struct us_real_api *real = us_real();
    if (real->cudaHostRegister == NULL)
        return US_ERR_NO_REAL;
    return learn(real->cudaHostRegister(ptr, size, flags), ptr, size, US_MEM_REGISTERED);
}

/* A release that waits for the device (cudaFree, cudaFreeHost,
 * cudaHostUnregister): a finding, and the range leaves the table. A NULL
 * pointer is not a finding: cudaFree(NULL) is the idiom that creates the
 * context. */
static cudaError_t release(enum us_rule_id rule, const char *api, cudaError_t (*real_fn)(void *), void *ptr)
{
    if (ptr == NULL || !us_entry_acts(real_fn != NULL))
        return real_fn != NULL ? real_fn(ptr) : US_ERR_NO_REAL;
    struct us_watch w;
    if (!us_watch_begin(&w, rule, api))
        return US_ERR_FORBIDDEN;
    /* out of the table before the memory is: once freed, another thread may
     * get the same address from an allocation and insert it */
    struct us_range gone;
    bool known = us_ptrtable_remove((uintptr_t)ptr, &gone);
    /* a copy the shim is still issuing chunks of would outlive the memory
     * (the native copy, one call, would be queued or done by now) */
    us_inflight_wait((uintptr_t)ptr, known ? gone.size : 0);
    cudaError_t err = real_fn(ptr);
    us_watch_end(&w, NULL, US_STREAM_USER, us_current_device(), 0);
    if (err != cudaSuccess && known) /* not freed after all */
        us_ptrtable_insert(gone.base, gone.size, gone.kind, gone.device);
    return err;
}

US_EXPORT cudaError_t cudaFree(void *devPtr)
{
    return release(US_RULE_device_alloc_sync, __func__, us_real()->cudaFree, devPtr);
}

US_EXPORT cudaError_t cudaFreeHost(void *ptr)
{
    return release(US_RULE_pinned_alloc_sync, __func__, us_real()->cudaFreeHost, ptr);
}

US_EXPORT cudaError_t cudaHostUnregister(void *ptr)
{
    return release(US_RULE_pinned_alloc_sync, __func__, us_real()->cudaHostUnregister, ptr);
}
