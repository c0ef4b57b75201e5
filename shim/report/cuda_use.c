/* cuda_use.c - how the process used CUDA, when no runtime call reached the
 * shim (see cuda_use.h). */
#include "cuda_use.h"

#include <dirent.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct loaded {
    char runtime[64];
    bool driver;
};

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct loaded *l = arg;
    const char *base = strrchr(info->dlpi_name, '/');
    base = base != NULL ? base + 1 : info->dlpi_name;
    if (strncmp(base, "libcudart.so", 12) == 0 && l->runtime[0] == '\0')
        snprintf(l->runtime, sizeof l->runtime, "%s", base);
    else if (strncmp(base, "libcuda.so", 10) == 0)
        l->driver = true;
    return 0;
}

/* Whether one of this process's open files is an NVIDIA device file: the
 * driver opens /dev/nvidiactl and /dev/nvidia<N> when it initializes. */
static bool driver_files_open(void)
{
    DIR *dir = opendir("/proc/self/fd");
    if (dir == NULL)
        return false;
    bool open_file = false;
    struct dirent *e;
    while (!open_file && (e = readdir(dir)) != NULL) {
        char path[sizeof "/proc/self/fd/" + sizeof e->d_name], target[64];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            open_file = strncmp(target, "/dev/nvidia", 11) == 0;
        }
    }
    closedir(dir);
    return open_file;
}

void us_cuda_use_probe(bool hooked, struct us_cuda_use_info *out)
{
    struct loaded l = { .driver = false };
    dl_iterate_phdr(visit, &l);
    snprintf(out->runtime, sizeof out->runtime, "%s", l.runtime);
    if (hooked)
        out->use = US_CUDA_USE_RUNTIME;
    else if (l.runtime[0] != '\0')
        out->use = US_CUDA_USE_RUNTIME_IDLE;
    else if (l.driver)
        /* Open device files say the driver was used. Their absence says
         * nothing sure: a runtime torn down at exit may have closed them. */
        out->use = driver_files_open() ? US_CUDA_USE_DRIVER_ONLY : US_CUDA_USE_DRIVER_LOADED;
    else
        out->use = US_CUDA_USE_NONE;
}

const char *us_cuda_use_name(enum us_cuda_use use)
{
    switch (use) {
    case US_CUDA_USE_RUNTIME: return "runtime";
    case US_CUDA_USE_RUNTIME_IDLE: return "runtime_not_called";
    case US_CUDA_USE_DRIVER_ONLY:
    case US_CUDA_USE_DRIVER_LOADED: return "driver_without_runtime";
    case US_CUDA_USE_NONE: return "none";
    case US_CUDA_USE_UNKNOWN: break;
    }
    return "unknown";
}
