/* symbols.c - which libcuda function a pointer is, and its wrapper.
 *
 * One table: for each name the layer wraps, the wrapper and the real
 * function, resolved by name from the real libcuda (the first object named
 * libcuda.so* whose function reaches the layer). A pointer handed out by
 * dlsym or a resolver is compared with the real functions: equal to one, it
 * is that exported name, and the wrapper of that name is handed back. So a
 * caller gets exactly the ABI, version and per-thread variant it asked for;
 * a pointer the table does not hold (a function not wrapped, an older
 * version, a libcuda of another linker namespace) is handed back unchanged. */
#include "driver_layer.h"
#include "hot.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "resolve.h"

struct wrapped {
    const char *name;
    void *wrapper;
};

static const struct wrapped wrapped[US_DRV_FN_COUNT] = {
#define ROW_COPY(id, fn, sync, per_thread, shape) [US_DRV_FN_##fn] = {#fn, (void *)us_drv_wrap_##fn},
#define ROW_OTHER(fn) [US_DRV_FN_##fn] = {#fn, (void *)us_drv_wrap_##fn},
#define ROW_MAPPING(fn, params, args) [US_DRV_FN_##fn] = {#fn, (void *)us_drv_wrap_##fn},
    US_DRIVER_COPY_APIS(ROW_COPY) US_DRIVER_OTHER_FNS(ROW_OTHER) US_DRIVER_MAPPING_FNS(ROW_MAPPING)
#undef ROW_COPY
#undef ROW_OTHER
#undef ROW_MAPPING
};

static void *real_fns[US_DRV_FN_COUNT];  /* written once, before `identified` */
static void *libcuda_handle;
static char libcuda_path[4096];
static atomic_bool identified;
static pthread_mutex_t identify_lock = PTHREAD_MUTEX_INITIALIZER;

static bool identify(const void *p);

US_HOT void *us_drv_real(enum us_drv_fn fn)
{
    if (fn < 0 || fn >= US_DRV_FN_COUNT)
        return NULL;
    /* a direct call (exports.c) may come first: the next definition of its
     * name after the shim is libcuda's */
    if (!atomic_load_explicit(&identified, memory_order_acquire) &&
        !identify(us_drv_real_dlsym(RTLD_NEXT, wrapped[fn].name)))
        return NULL;
    return real_fns[fn];
}

const char *us_drv_libcuda_path(void)
{
    return atomic_load_explicit(&identified, memory_order_acquire) ? libcuda_path : "";
}

void *us_drv_lookup(const char *name)
{
    if (!atomic_load_explicit(&identified, memory_order_acquire))
        return NULL;
    return us_drv_real_dlsym(libcuda_handle, name);
}

/* The object p lies in, when that is a libcuda.so*; NULL otherwise. */
static struct link_map *libcuda_of(const void *p)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (dladdr1(p, &info, (void **)&map, RTLD_DL_LINKMAP) == 0 || map == NULL || map->l_name == NULL)
        return NULL;
    const char *slash = strrchr(map->l_name, '/');
    const char *base = slash != NULL ? slash + 1 : map->l_name;
    return strncmp(base, "libcuda.so", strlen("libcuda.so")) == 0 ? map : NULL;
}

/* Resolve the table from the libcuda that p lies in; once. */
static bool identify(const void *p)
{
    if (atomic_load_explicit(&identified, memory_order_acquire))
        return true;
    if (p == NULL)
        return false;
    struct link_map *map = libcuda_of(p);
    if (map == NULL)
        return false;
    pthread_mutex_lock(&identify_lock);
    if (!atomic_load_explicit(&identified, memory_order_relaxed)) {
        /* RTLD_NOLOAD: the handle of what is loaded; the reference is kept
         * (libcuda stays for the life of the process) */
        void *handle = us_resolve_loaded(map->l_name);
        if (handle != NULL) {
            for (int i = 0; i < US_DRV_FN_COUNT; i++)
                real_fns[i] = us_drv_real_dlsym(handle, wrapped[i].name);
            libcuda_handle = handle;
            snprintf(libcuda_path, sizeof libcuda_path, "%s", map->l_name);
            atomic_store_explicit(&identified, true, memory_order_release);
        }
    }
    pthread_mutex_unlock(&identify_lock);
    return atomic_load_explicit(&identified, memory_order_acquire);
}

/* The layer hands out wrappers only when it is on; a wrapper handed out
 * stays valid (it passes through once the shim steps aside). */
bool us_drv_layer_on(void)
{
    const struct us_config *cfg = us_config();
    return cfg->driver_layer && !cfg->disable;
}

void *us_drv_substitute(void *p)
{
    if (p == NULL || !us_drv_layer_on() || !identify(p))
        return p;
    for (int i = 0; i < US_DRV_FN_COUNT; i++)
        if (real_fns[i] == p)
            return wrapped[i].wrapper;
    return p;
}

void *us_drv_substitute_symbol(const char *name, void *sym)
{
    for (int i = 0; i < US_DRV_FN_COUNT; i++)
        if (strcmp(name, wrapped[i].name) == 0)
            return us_drv_substitute(sym);
    return sym;
}
