/* no_cuda.c - a program that never uses CUDA but uses the dynamic linker as
 * programs do: dlsym with RTLD_DEFAULT and RTLD_NEXT, a handle of its own,
 * dlerror after a failed lookup. Under the shim (which interposes dlsym)
 * every answer must be the C library's. Prints "ok" or what differed. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    int bad = 0;
    if (dlsym(RTLD_DEFAULT, "printf") != (void *)printf) {
        fprintf(stderr, "RTLD_DEFAULT printf\n");
        bad++;
    }
    if (dlsym(RTLD_NEXT, "strlen") == NULL) {
        fprintf(stderr, "RTLD_NEXT strlen\n");
        bad++;
    }
    void *m = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
    double (*cos_fn)(double) = m != NULL ? (double (*)(double))dlsym(m, "cos") : NULL;
    if (cos_fn == NULL || cos_fn(0.0) != 1.0) {
        fprintf(stderr, "dlsym(libm, cos)\n");
        bad++;
    }
    dlerror();
    if (m == NULL || dlsym(m, "no_such_function_here") != NULL || dlerror() == NULL) {
        fprintf(stderr, "a failed lookup sets dlerror\n");
        bad++;
    }
    /* under a second preload that interposes puts through dlsym(RTLD_NEXT) */
    if (bad == 0 && puts("ok") == EOF)
        bad++;
    return bad != 0;
}
