/* inject.c - libfaultinject.so: fails the nth call the shim makes to one
 * runtime or driver function. Preloaded after the shim (LD_PRELOAD="libunstall.so
 * libfaultinject.so"), it is what the shim's dlsym(RTLD_NEXT) finds: every
 * function of shim/base/real_api.def and real_driver.def is wrapped here,
 * from those files. Only
 * calls whose return address lies in libunstall.so count and can fail; the
 * program's own calls pass straight through.
 *
 * Environment:
 *   FAULT_FN     the function to fail (a name of real_api.def or real_driver.def)
 *   FAULT_NTH    the shim's call of it that fails first (1 = the first)
 *   FAULT_COUNT  how many calls fail from there (default 1; 0 = all later ones)
 *   FAULT_ERR    the error returned (default cudaErrorMemoryAllocation)
 *   FAULT_COUNTS a file that gets "name calls" for every function the shim
 *                called, at exit */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

enum fn_id {
#define US_REAL(ret, name, params, args, rewrite) FN_##name,
#include "real_api.def"
#undef US_REAL
#define US_REAL_DRV(name, params, args) FN_##name,
#include "real_driver.def"
#undef US_REAL_DRV
    FN_COUNT
};

static const char *const fn_names[] = {
#define US_REAL(ret, name, params, args, rewrite) #name,
#include "real_api.def"
#undef US_REAL
#define US_REAL_DRV(name, params, args) #name,
#include "real_driver.def"
#undef US_REAL_DRV
};

static atomic_ulong calls[FN_COUNT];
static int target = -1;
static unsigned long nth, count = 1;
static cudaError_t err = cudaErrorMemoryAllocation;
static atomic_ulong injected;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
    const char *fn = getenv("FAULT_FN");
    for (int i = 0; fn != NULL && i < FN_COUNT; i++)
        if (strcmp(fn, fn_names[i]) == 0)
            target = i;
    /* only functions that return a cudaError_t can fail */
    if (target == FN_cudaGetErrorName || target == FN_cudaGetLastError)
        target = -1;
    if (getenv("FAULT_NTH") != NULL)
        nth = strtoul(getenv("FAULT_NTH"), NULL, 0);
    if (getenv("FAULT_COUNT") != NULL)
        count = strtoul(getenv("FAULT_COUNT"), NULL, 0);
    if (getenv("FAULT_ERR") != NULL)
        err = (cudaError_t)strtol(getenv("FAULT_ERR"), NULL, 0);
}

/* true when the call comes from libunstall.so */
static bool from_shim(void *ret)
{
    Dl_info info;
    if (dladdr(ret, &info) == 0 || info.dli_fname == NULL)
        return false;
    const char *base = strrchr(info.dli_fname, '/');
    return strcmp(base != NULL ? base + 1 : info.dli_fname, "libunstall.so") == 0;
}

/* Counts a shim call of fn; true when it is to fail. */
static bool should_fail(int fn, void *ret)
{
    pthread_once(&once, init);
    if (!from_shim(ret))
        return false;
    unsigned long n = atomic_fetch_add(&calls[fn], 1) + 1;
    if (fn != target || nth == 0 || n < nth || (count != 0 && n >= nth + count))
        return false;
    atomic_fetch_add(&injected, 1);
    return true;
}

/* After this library; for a driver function libcuda's own, which a runtime
 * may have loaded out of the global scope (the simulated one does), looked
 * up with the C library's dlsym: the shim's hands out its wrappers. */
static void *real_fn(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    void *driver = p == NULL && strncmp(name, "cu", 2) == 0 && strncmp(name, "cuda", 4) != 0
                       ? dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)
                       : NULL;
    if (driver != NULL) {
        void *(*libc_dlsym)(void *, const char *) = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (libc_dlsym == NULL)
            libc_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        p = libc_dlsym != NULL ? libc_dlsym(driver, name) : NULL;
    }
    if (p == NULL) {
        fprintf(stderr, "faultinject: %s not found after this library\n", name);
        abort();
    }
    return p;
}

#define US_REAL(ret, name, params, args, rewrite)                                                   \
    __attribute__((visibility("default"))) ret name params                                \
    {                                                                                      \
        static ret(*_Atomic real) params;                                                  \
        if (real == NULL)                                                                  \
            real = (ret(*) params)real_fn(#name);                                          \
        if (should_fail(FN_##name, __builtin_return_address(0)))                        \
            return (ret)(uintptr_t)err;                                                    \
        return real args;                                                                  \
    }
#include "real_api.def"
/* the driver's: the error's code is the same CUresult (2: out of memory) */
#define US_REAL_DRV(name, params, args) US_REAL(CUresult, name, params, args, 1)
#include "real_driver.def"
#undef US_REAL_DRV
#undef US_REAL

__attribute__((destructor)) static void write_counts(void)
{
    const char *path = getenv("FAULT_COUNTS");
    if (path == NULL)
        return;
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return;
    for (int i = 0; i < FN_COUNT; i++)
        if (atomic_load(&calls[i]) > 0)
            fprintf(f, "%s %lu\n", fn_names[i], atomic_load(&calls[i]));
    fprintf(f, "injected %lu\n", atomic_load(&injected));
    fclose(f);
}
