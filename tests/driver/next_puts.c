/* next_puts.c - a preload loaded after the shim that interposes puts the
 * usual way, with dlsym(RTLD_NEXT, "puts"). The shim interposes dlsym: if
 * its dlsym answered RTLD_NEXT relative to itself instead of to the caller,
 * this would find its own puts and recurse until the stack ends. */
#include <dlfcn.h>
#include <stdio.h>

int puts(const char *s)
{
    int (*next)(const char *) = (int (*)(const char *))dlsym(RTLD_NEXT, "puts");
    if (next == NULL || next == puts)
        return EOF;
    return next(s);
}
