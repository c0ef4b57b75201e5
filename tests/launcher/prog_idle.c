/* prog_idle.c - a process that loads CUDA libraries and calls none of them,
 * like torchrun's own process after `import torch` (the runtime and the
 * driver loaded, nothing called): dlopen each argument, then exit 0. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL) == NULL) {
            printf("prog_idle: %s\n", dlerror());
            return 1;
        }
    printf("prog_idle: ok\n");
    return 0;
}
