/* resolve.c - see resolve.h. */
#include "resolve.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>

static _Atomic us_dlsym_fn libc_dlsym;

/* Uninstrumented, as the callers that need it early are: the interposed
 * dlsym asks for it while a preloaded sanitizer's runtime initializes, before
 * it can record anything. */
#define US_RESOLVE_EARLY __attribute__((no_sanitize("address", "thread", "undefined")))

US_RESOLVE_EARLY us_dlsym_fn us_resolve_libc_dlsym(void)
{
    us_dlsym_fn fn = atomic_load_explicit(&libc_dlsym, memory_order_acquire);
    if (fn != NULL)
        return fn;
    fn = (us_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (fn == NULL)
        fn = (us_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (fn != NULL)
        atomic_store_explicit(&libc_dlsym, fn, memory_order_release);
    return fn;
}

US_RESOLVE_EARLY void *us_resolve_next(const char *name)
{
    us_dlsym_fn find = us_resolve_libc_dlsym();
    return find != NULL ? find(RTLD_NEXT, name) : NULL;
}

void *us_resolve_global(const char *name)
{
    us_dlsym_fn find = us_resolve_libc_dlsym();
    return find != NULL ? find(RTLD_DEFAULT, name) : NULL;
}

US_RESOLVE_EARLY void *us_resolve_in(void *lib, const char *name)
{
    us_dlsym_fn find = us_resolve_libc_dlsym();
    return find != NULL && lib != NULL ? find(lib, name) : NULL;
}

void *us_resolve_loaded(const char *soname)
{
    return dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
}

bool us_resolve_is_loaded(const char *soname)
{
    void *lib = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    if (lib == NULL)
        return false;
    dlclose(lib);
    return true;
}

void *us_resolve_load(const char *soname)
{
    return dlopen(soname, RTLD_NOW | RTLD_LOCAL);
}
