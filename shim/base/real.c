/* real.c - resolve the native runtime functions (see real.h).
 *
 * Order: dlsym(RTLD_NEXT) finds the runtime that comes after the preload in
 * the global scope (a program linked against libcudart). A runtime loaded
 * RTLD_LOCAL by dlopen (Python extension modules) is not in that scope, so the
 * fallback asks the dynamic linker for an already loaded libcudart.so.13 by
 * soname (RTLD_NOLOAD: never loads one itself). Resolution is retried until
 * a runtime is found, then fixed for the life of the process. */
#include "real.h"
#include "hot.h"
#include "real_driver.h"
#include "resolve.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

static struct us_real_api resolved_api;
static const struct us_real_api missing_api;
static const struct us_real_api *_Atomic active_api;
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;

/* sonames tried for the fallback, newest first */
static const char *const runtime_sonames[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so" };

static void *runtime_handle(void)
{
    for (size_t i = 0; i < sizeof runtime_sonames / sizeof runtime_sonames[0]; i++) {
        void *h = us_resolve_loaded(runtime_sonames[i]);
        if (h != NULL)
            return h; /* the reference is kept: the runtime stays for the process */
    }
    return NULL;
}

static void *lookup(void *handle, const char *name)
{
    void *fn = us_resolve_next(name);
    if (fn == NULL && handle != NULL)
        fn = us_resolve_in(handle, name);
    return fn;
}

static bool resolve_all(struct us_real_api *api)
{
    void *handle = NULL;
    if (us_resolve_next("cudaGetDevice") == NULL)
        handle = runtime_handle();
#define US_REAL(ret, name, params, args, rewrite) *(void **)&api->name = lookup(handle, #name);
#include "real_api.def"
#undef US_REAL
    /* a runtime without cudaGetDevice is no runtime: try again later */
    return api->cudaGetDevice != NULL;
}

static const char *missing_for_rewrite(const struct us_real_api *api)
{
#define US_REAL(ret, name, params, args, rewrite) \
    if ((rewrite) && api->name == NULL)           \
        return #name;
#include "real_api.def"
#undef US_REAL
    return NULL;
}

/* Asked by every rewritten copy: the table last found complete, remembered
 * (a resolved table is not changed after; one that tests install is
 * checked again, us_real_install). */
static _Atomic(const struct us_real_api *) complete_api;

US_HOT const char *us_real_missing_for_rewrite(const struct us_real_api *api)
{
    if (api == atomic_load_explicit(&complete_api, memory_order_relaxed))
        return NULL;
    const char *missing = missing_for_rewrite(api);
    if (missing == NULL)
        atomic_store_explicit(&complete_api, api, memory_order_relaxed);
    return missing;
}

US_HOT const struct us_real_api *us_real(void)
{
    const struct us_real_api *api = atomic_load_explicit(&active_api, memory_order_acquire);
    if (api != NULL)
        return api;
    pthread_mutex_lock(&resolve_lock);
    api = atomic_load_explicit(&active_api, memory_order_acquire);
    if (api == NULL) {
        if (resolve_all(&resolved_api)) {
            atomic_store_explicit(&active_api, &resolved_api, memory_order_release);
            api = &resolved_api;
        } else {
            api = &missing_api; /* all NULL: callers return US_ERR_NO_REAL */
        }
    }
    pthread_mutex_unlock(&resolve_lock);
    return api;
}

void us_real_install(const struct us_real_api *api)
{
    atomic_store_explicit(&complete_api, NULL, memory_order_relaxed);
    atomic_store_explicit(&active_api, api, memory_order_release);
    /* a test's runtime: no driver route beside it unless the test installs one */
    if (api != NULL)
        us_real_driver_install(NULL);
    else
        us_real_driver_resolve();
}

const char *us_real_error_name(cudaError_t err)
{
    const struct us_real_api *api = us_real();
    if (api->cudaGetErrorName != NULL)
        return api->cudaGetErrorName(err);
    return "cudaError(unknown: no runtime)";
}
