/* real_driver.c - see real_driver.h. */
#include "real_driver.h"
#include "hot.h"
#include "resolve.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

static struct us_real_driver resolved;
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;
/* settled: `active` is the answer (resolved, found missing, or installed) */
static atomic_bool settled;
static const struct us_real_driver *_Atomic active;

/* As real.c finds the runtime's: what comes after the shim in the global
 * scope first (a program linked against libcuda, or a library preloaded
 * after the shim that wraps these functions, as tests/faults does), then
 * libcuda's own. */
static void *lookup(void *driver, const char *name)
{
    void *fn = us_resolve_next(name);
    return fn != NULL ? fn : us_resolve_in(driver, name);
}

/* Under resolve_lock. Settles only once libcuda is loaded: before that there
 * is no copy to rewrite. */
static void resolve_locked(void)
{
    void *driver = us_resolve_loaded("libcuda.so.1");
    if (driver == NULL || us_resolve_libc_dlsym() == NULL)
        return;
    bool complete = true;
#define US_REAL_DRV(name, params, args)                                  \
    *(void **)&resolved.name = lookup(driver, #name);              \
    complete = complete && resolved.name != NULL;
#include "real_driver.def"
#undef US_REAL_DRV
    atomic_store_explicit(&active, complete ? &resolved : NULL, memory_order_relaxed);
    atomic_store_explicit(&settled, true, memory_order_release);
}

US_HOT const struct us_real_driver *us_real_driver(void)
{
    if (atomic_load_explicit(&settled, memory_order_acquire))
        return atomic_load_explicit(&active, memory_order_relaxed);
    pthread_mutex_lock(&resolve_lock);
    if (!atomic_load_explicit(&settled, memory_order_relaxed))
        resolve_locked();
    pthread_mutex_unlock(&resolve_lock);
    return atomic_load_explicit(&active, memory_order_relaxed);
}

void us_real_driver_install(const struct us_real_driver *drv)
{
    pthread_mutex_lock(&resolve_lock);
    atomic_store_explicit(&active, drv, memory_order_relaxed);
    atomic_store_explicit(&settled, true, memory_order_release);
    pthread_mutex_unlock(&resolve_lock);
}

void us_real_driver_resolve(void)
{
    pthread_mutex_lock(&resolve_lock);
    atomic_store_explicit(&active, NULL, memory_order_relaxed);
    atomic_store_explicit(&settled, false, memory_order_release);
    pthread_mutex_unlock(&resolve_lock);
}
