/* prog_dlopen.c - loads lib_user.so with RTLD_LOCAL and runs its copies. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    void *lib = dlopen(argc > 1 ? argv[1] : "./lib_user.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        printf("prog_dlopen: %s\n", dlerror());
        return 1;
    }
    int (*round_trip)(size_t) = (int (*)(size_t))dlsym(lib, "user_pageable_round_trip");
    int result = round_trip((1u << 20) + 3);
    printf("prog_dlopen: result %d\n", result);
    return result;
}
