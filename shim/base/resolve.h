/* resolve.h - the one place the shim finds functions it does not define: the
 * CUDA runtime's and libcuda's (real.c, real_driver.c, context.c), the C
 * library's it wraps (sigaction), and those of the optional libraries it uses
 * when the process has them (libdw, the unwinder, a C++ demangler, CPython).
 *
 * Every lookup goes through the C library's own dlsym, found with dlvsym. The
 * shim interposes dlsym (entry_driver/dlsym.c), so a call of dlsym by name
 * from inside the shim binds to that wrapper: an upward call from the lowest
 * layer that no include shows. tools/check-layers --objects fails when an
 * object other than this module's refers to dlsym, dlvsym, dlopen or dlmopen.
 *
 * RTLD_NEXT is relative to the object that calls the C library's dlsym: this
 * module is linked into the shim (and into the unit tests' programs), so
 * "next" is what comes after the shim, as it was for each caller. */
#ifndef UNSTALL_RESOLVE_H
#define UNSTALL_RESOLVE_H

#include <stdbool.h>

typedef void *(*us_dlsym_fn)(void *, const char *);

/* The C library's dlsym (GLIBC_2.34, else GLIBC_2.2.5); NULL when neither is
 * there. Safe before the sanitizers' runtimes are up. */
us_dlsym_fn us_resolve_libc_dlsym(void);

/* name as the object after the shim in the global scope defines it (the
 * runtime a program links, a library preloaded after the shim); NULL: none */
void *us_resolve_next(const char *name);

/* name in the global scope (RTLD_DEFAULT); NULL: none */
void *us_resolve_global(const char *name);

/* name in a library handle from us_resolve_loaded or us_resolve_load */
void *us_resolve_in(void *lib, const char *name);

/* A handle on a library the process has loaded already, by soname; never
 * loads one (RTLD_NOLOAD). The reference is kept for the life of the process.
 * NULL: not loaded. */
void *us_resolve_loaded(const char *soname);

/* Whether the process has soname loaded, keeping no reference. */
bool us_resolve_is_loaded(const char *soname);

/* An optional library the shim uses (libdw, the unwinder), loaded with its
 * symbols kept local; NULL when the system lacks it. */
void *us_resolve_load(const char *soname);

#endif
