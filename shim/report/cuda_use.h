/* cuda_use.h - how the process used CUDA, for a report in which no runtime
 * call reached the shim: it never called the runtime it loaded (torchrun's
 * own process after `import torch`), or it used the driver without the
 * shared runtime (a statically linked runtime, the driver API), which a
 * runtime-layer preload cannot see. Read at report time from what is loaded
 * and which files are open; calls no CUDA function (the runtime may be
 * unloading at exit). */
#ifndef UNSTALL_CUDA_USE_H
#define UNSTALL_CUDA_USE_H

#include <stdbool.h>
#include <stddef.h>

enum us_cuda_use {
    US_CUDA_USE_UNKNOWN = 0,     /* not looked at */
    US_CUDA_USE_RUNTIME,         /* runtime calls reached the shim */
    US_CUDA_USE_RUNTIME_IDLE,    /* libcudart loaded, no call reached the shim */
    US_CUDA_USE_DRIVER_ONLY,     /* no libcudart; the driver has its device files open */
    US_CUDA_USE_DRIVER_LOADED,   /* no libcudart; libcuda loaded, its use unknown */
    US_CUDA_USE_NONE,            /* neither library loaded */
};

struct us_cuda_use_info {
    enum us_cuda_use use;
    char runtime[64]; /* the runtime's file name (libcudart.so.12) when loaded */
};

/* Look now. hooked: whether any runtime call reached the shim. */
void us_cuda_use_probe(bool hooked, struct us_cuda_use_info *out);

/* "runtime", "runtime_not_called", "driver_without_runtime", "none",
 * "unknown": the JSON report's "cuda". */
const char *us_cuda_use_name(enum us_cuda_use use);

#endif
