/* alloc_record.c - a preload that records who pins memory, for the first-use
 * tests (tests/pipelines/run.sh builds it as alloc_record.so).
 *
 * Preloaded after the shim (LD_PRELOAD="libunstall.so alloc_record.so"), its
 * cudaHostAlloc and cudaHostRegister are the ones the shim finds with
 * dlsym(RTLD_NEXT): each notes the size and the calling thread, then calls
 * the simulated runtime's. A test asks
 * for the allocations made on its own thread (the shim's growth inside a
 * copy) and for the number of allocations finished anywhere. Looked
 * up with dlsym by the test, so that the test program also runs without it. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

typedef cudaError_t (*host_alloc_fn)(void **, size_t, unsigned int);
typedef cudaError_t (*host_register_fn)(void *, size_t, unsigned int);

static _Thread_local size_t largest_on_thread, total_on_thread;
static atomic_ulong allocs_done;

static void *next_fn(_Atomic(void *) *slot, const char *name)
{
    void *fn = atomic_load(slot);
    if (fn == NULL) {
        fn = dlsym(RTLD_NEXT, name);
        atomic_store(slot, fn);
    }
    return fn;
}

static void note(size_t size)
{
    if (size > largest_on_thread)
        largest_on_thread = size;
    total_on_thread += size;
}

__attribute__((visibility("default"))) cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    static _Atomic(void *) next;
    host_alloc_fn fn = (host_alloc_fn)next_fn(&next, "cudaHostAlloc");
    if (fn == NULL)
        return cudaErrorInitializationError;
    note(size);
    cudaError_t err = fn(ptr, size, flags);
    atomic_fetch_add(&allocs_done, 1);
    return err;
}

__attribute__((visibility("default"))) cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    static _Atomic(void *) next;
    host_register_fn fn = (host_register_fn)next_fn(&next, "cudaHostRegister");
    if (fn == NULL)
        return cudaErrorInitializationError;
    note(size);
    cudaError_t err = fn(ptr, size, flags);
    atomic_fetch_add(&allocs_done, 1);
    return err;
}

/* The largest pinning (cudaHostAlloc or cudaHostRegister) made on the calling thread since its last
 * reset, and all of them together. */
__attribute__((visibility("default"))) size_t alloc_record_largest_here(void)
{
    return largest_on_thread;
}

__attribute__((visibility("default"))) size_t alloc_record_total_here(void)
{
    return total_on_thread;
}

__attribute__((visibility("default"))) void alloc_record_reset_here(void)
{
    largest_on_thread = total_on_thread = 0;
}

/* Pinning calls that returned, on any thread. */
__attribute__((visibility("default"))) unsigned long alloc_record_done(void)
{
    return atomic_load(&allocs_done);
}
