/* runtime.c - a CUDA runtime for the shim's own work in a program that
 * brings none.
 *
 * Classification (cudaPointerGetAttributes), capture checks and the
 * pipelines' streams, events and pinned slots are runtime calls (real.h). A
 * program built with the static runtime, or written against the driver API,
 * has no dynamic libcudart for them: on its first copy through the driver
 * layer the shim loads one, RTLD_LOCAL (the program's symbols stay its own),
 * and real.c finds it by soname. The runtime and the program's calls meet in
 * the driver: a stream or event handle is the driver's, and the runtime works
 * in the devices' primary contexts, as the static runtime does. Its own calls
 * into the driver come back through the layer while the shim is at work and
 * pass straight through. Where none can be loaded, the driver layer's copies
 * go native (logged once). */
#include "driver_layer.h"
#include "hot.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "real.h"
#include "resolve.h"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static atomic_bool ready;

static bool runtime_present(void)
{
    return us_real()->cudaGetDevice != NULL;
}

static bool try_load(const char *path)
{
    if (path == NULL || path[0] == '\0')
        return false;
    if (us_resolve_load(path) == NULL) {
        us_log(US_LOG_DEBUG, "driver layer: %s: %s", path, dlerror());
        return false;
    }
    if (!runtime_present())
        return false;
    us_log(US_LOG_INFO, "driver layer: the program brings no dynamic CUDA runtime; loaded %s for the shim's own work",
           path);
    return true;
}

static void load(void)
{
    if (runtime_present()) {
        atomic_store(&ready, true);
        return;
    }
    const char *configured = us_config()->driver_runtime;
    bool ok = false;
    if (configured[0] != '\0') {
        ok = try_load(configured);
    } else {
        char beside[4096 + 32] = "";
        const char *libcuda = us_drv_libcuda_path();
        const char *slash = strrchr(libcuda, '/');
        if (slash != NULL)
            snprintf(beside, sizeof beside, "%.*s/libcudart.so.13", (int)(slash - libcuda), libcuda);
        /* beside libcuda first: a runtime shipped with that driver (and the
         * simulated pair in tests) */
        const char *candidates[] = { beside, "libcudart.so.13", "libcudart.so.12",
                                     "/usr/local/cuda/lib64/libcudart.so.13" };
        for (size_t i = 0; i < sizeof candidates / sizeof candidates[0] && !ok; i++)
            ok = try_load(candidates[i]);
    }
    if (!ok)
        us_log(US_LOG_WARN, "driver layer: the program brings no dynamic CUDA runtime and none could be loaded (%s): "
                            "its copies through libcuda go native, unseen (set UNSTALL_DRIVER_RUNTIME to a libcudart)",
               configured[0] != '\0' ? configured : "beside libcuda, libcudart.so.13, .12, /usr/local/cuda/lib64");
    atomic_store(&ready, ok);
}

US_HOT bool us_drv_runtime_ready(void)
{
    if (atomic_load_explicit(&ready, memory_order_acquire))
        return true;
    pthread_once(&load_once, load);
    return atomic_load_explicit(&ready, memory_order_acquire);
}

/* --- calls the runtime makes inside its own API calls ------------------------------- */

/* The address range of the loaded runtime the shim uses (real.h), found once:
 * the load segments of the object that holds its cudaGetDevice. */
static pthread_once_t range_once = PTHREAD_ONCE_INIT;
static uintptr_t range_lo, range_hi;

static int find_segments(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t inside = (uintptr_t)data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
        lo = start < lo ? start : lo;
        hi = end > hi ? end : hi;
    }
    if (inside < lo || inside >= hi)
        return 0;
    range_lo = lo;
    range_hi = hi;
    return 1;
}

static void find_range(void)
{
    void *fn = (void *)us_real()->cudaGetDevice;
    if (fn != NULL)
        dl_iterate_phdr(find_segments, fn);
}

US_HOT bool us_drv_inside_runtime(const void *address)
{
    pthread_once(&range_once, find_range);
    return (uintptr_t)address >= range_lo && (uintptr_t)address < range_hi;
}
