/* prog_nocuda.c - a process that loads the driver library but makes no CUDA
 * runtime call, like torchrun's own process after `import torch`: dlopen
 * argv[1] (a libcuda.so.1), then wait until the file argv[2] exists (at most
 * 20 s) so that a test can let other processes run and write meanwhile. */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2 || dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) == NULL) {
        printf("prog_nocuda: %s\n", argc < 2 ? "usage: prog_nocuda LIBCUDA [WAIT_FOR_FILE]" : dlerror());
        return 1;
    }
    const struct timespec tick = { 0, 10 * 1000 * 1000 };
    for (int i = 0; argc > 2 && i < 2000 && access(argv[2], F_OK) != 0; i++)
        nanosleep(&tick, NULL);
    printf("prog_nocuda: ok\n");
    return 0;
}
