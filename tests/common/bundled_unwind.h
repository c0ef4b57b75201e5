/* bundled_unwind.h - the libunwind copy the build put beside the shim
 * (BUILD/unstall/libunwind.so.8, tools/bundle-unwind.sh), found from a
 * program built one folder down (BUILD/unit, BUILD/bench) and linked
 * against the core library, where the shim's own look-up beside itself
 * (unwinder.c) would find the program's folder instead. Header-only: the
 * unwinder's unit test and make bench-costs include it. */
#ifndef UNSTALL_TEST_BUNDLED_UNWIND_H
#define UNSTALL_TEST_BUNDLED_UNWIND_H

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The copy's path in path[size], or NULL when there is none (the build
 * machine had no libunwind). */
static inline const char *us_bundled_unwind_path(char *path, size_t size)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return NULL;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash == NULL)
        return NULL;
    *slash = '\0'; /* BUILD/unit, BUILD/bench */
    int len = snprintf(path, size, "%.*s/../unstall/libunwind.so.8", PATH_MAX / 2, self);
    return len > 0 && (size_t)len < size && access(path, R_OK) == 0 ? path : NULL;
}

#endif
