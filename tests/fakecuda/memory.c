/* memory.c - device memory (host memory from posix_memalign, tagged with its
 * device), pinned allocations and registered ranges, in one registry sorted
 * by address. Anything the registry does not hold is pageable host memory.
 * cudaFree, cudaFreeHost and cudaHostUnregister synchronize the device; the
 * allocating calls do not (measured on CUDA 13.0, probe/probe_sync.c). */
#include "fc.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct fc_alloc {
    uintptr_t base;
    size_t size;
    enum fc_mem kind;
    int device;
    const struct fc_ctx *ctx; /* pinned/registered: the created context current then; NULL: a primary one */
};

static struct fc_alloc *allocs; /* sorted by base, no overlaps */
static size_t nallocs, capallocs;
static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;

/* Index of the last allocation with base <= p, or -1. Under reg_lock. */
static long find_le(uintptr_t p)
{
    long lo = 0, hi = (long)nallocs - 1, found = -1;
    while (lo <= hi) {
        long mid = lo + (hi - lo) / 2;
        if (allocs[mid].base <= p) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found;
}

static void remove_at(size_t i)
{
    memmove(&allocs[i], &allocs[i + 1], (nallocs - i - 1) * sizeof *allocs);
    nallocs--;
}

/* Whether any entry overlaps [base, base+size). Under reg_lock. */
static long first_overlap(uintptr_t base, size_t size)
{
    long i = find_le(base + size - 1);
    if (i >= 0 && allocs[i].base + allocs[i].size > base)
        return i;
    return -1;
}

/* Adds a range. A fresh allocation (`fresh`) drops registered ranges it
 * overlaps: their memory was freed without cudaHostUnregister. Returns false
 * when a registration overlaps (cudaErrorHostMemoryAlreadyRegistered) or
 * memory is short. */
static bool reg_insert(struct fc_alloc a, bool fresh)
{
    bool ok = false;
    pthread_rwlock_wrlock(&reg_lock);
    long i;
    while ((i = first_overlap(a.base, a.size)) >= 0 && fresh && allocs[i].kind == FC_MEM_REGISTERED)
        remove_at((size_t)i);
    if (i >= 0)
        goto out;
    if (nallocs == capallocs) {
        size_t cap = capallocs ? 2 * capallocs : 256;
        struct fc_alloc *n = realloc(allocs, cap * sizeof *n);
        if (n == NULL)
            goto out;
        allocs = n;
        capallocs = cap;
    }
    size_t at = (size_t)(find_le(a.base) + 1);
    memmove(&allocs[at + 1], &allocs[at], (nallocs - at) * sizeof *allocs);
    allocs[at] = a;
    nallocs++;
    ok = true;
out:
    pthread_rwlock_unlock(&reg_lock);
    return ok;
}

/* Finds the entry that starts exactly at p and has kind `kind`. */
static bool reg_find_base(const void *p, enum fc_mem kind, struct fc_alloc *out)
{
    pthread_rwlock_rdlock(&reg_lock);
    long i = find_le((uintptr_t)p);
    bool found = i >= 0 && allocs[i].base == (uintptr_t)p && allocs[i].kind == kind;
    if (found)
        *out = allocs[i];
    pthread_rwlock_unlock(&reg_lock);
    return found;
}

static void reg_remove_base(const void *p)
{
    pthread_rwlock_wrlock(&reg_lock);
    long i = find_le((uintptr_t)p);
    if (i >= 0 && allocs[i].base == (uintptr_t)p)
        remove_at((size_t)i);
    pthread_rwlock_unlock(&reg_lock);
}

void fc_mem_lookup(const void *p, struct fc_mem_info *out)
{
    *out = (struct fc_mem_info){.kind = FC_MEM_PAGEABLE, .device = -1};
    pthread_rwlock_rdlock(&reg_lock);
    long i = find_le((uintptr_t)p);
    if (i >= 0 && (uintptr_t)p - allocs[i].base < allocs[i].size)
        *out = (struct fc_mem_info){allocs[i].kind, allocs[i].device, allocs[i].base, allocs[i].size};
    pthread_rwlock_unlock(&reg_lock);
}

bool fc_mem_covers(const struct fc_mem_info *m, const void *p, size_t bytes)
{
    uintptr_t off = (uintptr_t)p - m->base;
    return m->kind != FC_MEM_PAGEABLE && off <= m->size && bytes <= m->size - off;
}

/* --- backing memory ---------------------------------------------------------------------- */

/* Device and pinned memory are backed by populated pages, as on a real
 * device and as pinned memory is: a copy into fresh memory must not pay for
 * page faults the model does not know about. Large blocks are mapped with
 * MAP_POPULATE, small ones come from posix_memalign and are touched. */
#define FC_MAP_MIN (64u << 10)

static void *backing_alloc(size_t size, size_t align)
{
    if (size >= FC_MAP_MIN) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    void *p;
    if (posix_memalign(&p, align, size) != 0)
        return NULL;
    memset(p, 0, size);
    return p;
}

static void backing_free(void *p, size_t size)
{
    if (size >= FC_MAP_MIN)
        munmap(p, size);
    else
        free(p);
}

void fc_mem_reset_device(int device)
{
    /* what the device's context owned: its device memory, and the pinned
     * memory allocated while it was current (portable or not: the context
     * that allocated it frees it). Registered ranges stay: the memory is
     * the program's. */
    for (;;) {
        struct fc_alloc a = {0};
        bool found = false;
        pthread_rwlock_wrlock(&reg_lock);
        for (size_t i = 0; i < nallocs && !found; i++)
            if (allocs[i].device == device && (allocs[i].kind == FC_MEM_DEVICE || allocs[i].kind == FC_MEM_PINNED)) {
                a = allocs[i];
                remove_at(i);
                found = true;
            }
        pthread_rwlock_unlock(&reg_lock);
        if (!found)
            return;
        backing_free((void *)a.base, a.size);
    }
}

unsigned fc_mem_release_ctx(const struct fc_ctx *ctx)
{
    unsigned released = 0;
    for (;;) {
        struct fc_alloc a = {0};
        bool found = false;
        pthread_rwlock_wrlock(&reg_lock);
        for (size_t i = 0; i < nallocs && !found; i++)
            if (allocs[i].ctx == ctx && (allocs[i].kind == FC_MEM_PINNED || allocs[i].kind == FC_MEM_REGISTERED)) {
                a = allocs[i];
                remove_at(i);
                found = true;
            }
        pthread_rwlock_unlock(&reg_lock);
        if (!found)
            return released;
        released++;
        if (a.kind == FC_MEM_PINNED) /* unmapped: a stale pointer faults */
            backing_free((void *)a.base, a.size);
    }
}

/* The created context current now, for what it pins; NULL in a primary one. */
static const struct fc_ctx *pinning_ctx(void)
{
    const struct fc_ctx *ctx = fc_current_ctx();
    return ctx->primary ? NULL : ctx;
}

/* --- device memory ------------------------------------------------------------------------ */

cudaError_t fc_device_alloc(size_t size, int device, void **out)
{
    void *p = backing_alloc(size, 256);
    if (p == NULL)
        return cudaErrorMemoryAllocation;
    if (!reg_insert((struct fc_alloc){(uintptr_t)p, size, FC_MEM_DEVICE, device, NULL}, true)) {
        backing_free(p, size);
        return cudaErrorMemoryAllocation;
    }
    *out = p;
    return cudaSuccess;
}

bool fc_device_release(void *ptr)
{
    struct fc_alloc a;
    if (!reg_find_base(ptr, FC_MEM_DEVICE, &a))
        return false;
    reg_remove_base(ptr);
    backing_free(ptr, a.size);
    return true;
}

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (ptr == NULL)
        return fc_ret(cudaErrorInvalidValue);
    cudaError_t err = fc_capture_check();
    if (err == cudaSuccess)
        err = fc_fault(FAKECUDA_FAULT_MALLOC);
    if (err != cudaSuccess)
        return fc_ret(err);
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    return fc_ret(fc_device_alloc(size, fc_current_device(), ptr));
}

cudaError_t cudaFree(void *ptr)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (ptr == NULL)
        return cudaSuccess;
    cudaError_t err = fc_capture_check();
    if (err != cudaSuccess)
        return fc_ret(err);
    struct fc_alloc a;
    if (!reg_find_base(ptr, FC_MEM_DEVICE, &a))
        return fc_ret(cudaErrorInvalidValue);
    fc_device_sync_implicit(a.device); /* no queued work may still use it */
    if (fc_graph_mem_release(ptr)) /* a graph's allocation: the graph keeps the memory */
        return cudaSuccess;
    reg_remove_base(ptr);
    backing_free(ptr, a.size);
    return cudaSuccess;
}

/* --- pinned and registered host memory --------------------------------------------------- */

/* Pinning in progress on any thread. The real driver crashes a thread that
 * is inside cudaHostRegister while the process exits and the driver tears
 * down (seen on an H100: a program that returned from main while another
 * thread registered memory ended in a segmentation fault); the simulated one
 * aborts with a message when it unloads while pinning is in progress. */
static _Atomic int pinning_in_progress;

__attribute__((destructor)) static void unload_driver(void)
{
    if (atomic_load(&pinning_in_progress) > 0) {
        fprintf(stderr, "fakecuda: the driver unloads at exit while another thread pins host memory "
                        "(cudaHostRegister/cudaHostAlloc in progress): the real driver crashes here\n");
        abort();
    }
}

/* Pinning holds the driver's lock for `us_per_mib` per MiB (scaled): other
 * threads' calls wait, as measured (docs/fakecuda.md). */
static void hold_driver_while_pinning(double us_per_mib, size_t size)
{
    double cost_us = us_per_mib * ((double)size / (1 << 20)) * fc_cfg()->time_scale;
    if (cost_us > 0) {
        atomic_fetch_add(&pinning_in_progress, 1);
        fc_api_lock();
        fc_sleep_until_us(fc_now_us() + cost_us);
        fc_api_unlock();
        atomic_fetch_sub(&pinning_in_progress, 1);
    }
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (ptr == NULL || (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined)))
        return fc_ret(cudaErrorInvalidValue);
    cudaError_t err = fc_capture_check();
    if (err == cudaSuccess)
        err = fc_fault(FAKECUDA_FAULT_HOST_ALLOC);
    if (err != cudaSuccess)
        return fc_ret(err);
    int dev = fc_current_device();
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    /* Pinning pages holds the driver: other threads' launches wait for it
     * (FAKECUDA_HOST_ALLOC_US_PER_MIB, 0 by default; docs/fakecuda.md). */
    hold_driver_while_pinning(fc_cfg()->host_alloc_us_per_mib, size);
    void *p = backing_alloc(size, 4096);
    if (p == NULL)
        return fc_ret(cudaErrorMemoryAllocation);
    if (!reg_insert((struct fc_alloc){(uintptr_t)p, size, FC_MEM_PINNED, dev, pinning_ctx()}, true)) {
        backing_free(p, size);
        return fc_ret(cudaErrorMemoryAllocation);
    }
    fc_stat_add(pinned_allocs, 1);
    if (!fc_current_ctx()->primary)
        fc_stat_add(pinned_allocs_created_ctx, 1);
    fc_stat_max(pinned_alloc_max_bytes, (unsigned long long)size);
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void *ptr)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (ptr == NULL)
        return cudaSuccess;
    cudaError_t err = fc_capture_check();
    if (err != cudaSuccess)
        return fc_ret(err);
    struct fc_alloc a;
    if (!reg_find_base(ptr, FC_MEM_PINNED, &a))
        return fc_ret(cudaErrorInvalidValue);
    fc_device_sync_implicit(fc_current_device());
    reg_remove_base(ptr);
    backing_free(ptr, a.size);
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (ptr == NULL || size == 0 ||
        (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory |
                             cudaHostRegisterReadOnly)))
        return fc_ret(cudaErrorInvalidValue);
    cudaError_t err = fc_capture_check();
    if (err == cudaSuccess)
        err = fc_fault(FAKECUDA_FAULT_HOST_REGISTER);
    if (err != cudaSuccess)
        return fc_ret(err);
    if (!reg_insert((struct fc_alloc){(uintptr_t)ptr, size, FC_MEM_REGISTERED, fc_current_device(), pinning_ctx()}, false))
        return fc_ret(cudaErrorHostMemoryAlreadyRegistered);
    hold_driver_while_pinning(fc_cfg()->host_register_us_per_mib, size);
    fc_stat_add(host_registers, 1);
    fc_stat_max(host_register_max_bytes, (unsigned long long)size);
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *ptr)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    cudaError_t err = fc_capture_check();
    if (err != cudaSuccess)
        return fc_ret(err);
    struct fc_alloc a;
    if (ptr == NULL || !reg_find_base(ptr, FC_MEM_REGISTERED, &a))
        return fc_ret(cudaErrorHostMemoryNotRegistered);
    fc_device_sync_implicit(fc_current_device());
    reg_remove_base(ptr);
    return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **dev_ptr, void *host_ptr, unsigned int flags)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    struct fc_mem_info m;
    fc_mem_lookup(host_ptr, &m);
    if (dev_ptr == NULL || flags != 0 || host_ptr == NULL || (m.kind != FC_MEM_PINNED && m.kind != FC_MEM_REGISTERED))
        return fc_ret(cudaErrorInvalidValue);
    *dev_ptr = host_ptr; /* mapped at the same address (UVA) */
    return cudaSuccess;
}

/* What CUDA 13.0 answers (probe/probe_real.c on an H100, driver 580): device
 * memory {Device, its device, ptr, NULL}; pinned or registered {Host, device
 * current at allocation, ptr, ptr}; anything else, NULL included, succeeds as
 * {Unregistered, -2 (cudaInvalidDeviceId), NULL, ptr}. */
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (attr == NULL)
        return fc_ret(cudaErrorInvalidValue);
    struct fc_mem_info m;
    fc_mem_lookup(ptr, &m);
    memset(attr, 0, sizeof *attr);
    switch (m.kind) {
    case FC_MEM_DEVICE:
        attr->type = cudaMemoryTypeDevice;
        attr->device = m.device;
        attr->devicePointer = (void *)ptr;
        break;
    case FC_MEM_PINNED:
    case FC_MEM_REGISTERED:
        attr->type = cudaMemoryTypeHost;
        attr->device = m.device;
        attr->devicePointer = (void *)ptr;
        attr->hostPointer = (void *)ptr;
        break;
    case FC_MEM_PAGEABLE:
        attr->type = cudaMemoryTypeUnregistered;
        attr->device = cudaInvalidDeviceId;
        attr->hostPointer = (void *)ptr;
        break;
    }
    return cudaSuccess;
}
