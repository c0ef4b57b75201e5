/* Rule: an asynchronous copy's host range must lie inside one pinned
 * allocation or one registered range. One 4 MiB mapping is registered as two
 * 2 MiB ranges (cudaHostRegister each half); a 64 KiB copy across the
 * middle touches both. unstall's staging registers its slots in pieces
 * (shim/fix/staging.c) and must split its copies where a piece ends.
 * Arguments: d2h (device to host instead of host to device), unregistered
 * (only the first half registered: the copy runs from registered memory into
 * memory that is not), inside (the control: the copy within the first half),
 * sync (cudaMemcpy instead of cudaMemcpyAsync).
 * Outcome: the call's error name (cudaSuccess, cudaErrorInvalidValue, ...)
 * and, when it succeeded, whether the bytes arrived (data=ok). */
#include "conform.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define HALF ((size_t)2 << 20)
#define COPY ((size_t)64 << 10)

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    bool d2h = cf_arg("d2h"), both = !cf_arg("unregistered"), inside = cf_arg("inside"), sync = cf_arg("sync");
    char *map = mmap(NULL, 2 * HALF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        cf_result("ERROR mmap");
        return 1;
    }
    memset(map, 0x5a, 2 * HALF);
    CF_CK(cudaHostRegister(map, HALF, cudaHostRegisterPortable));
    if (both)
        CF_CK(cudaHostRegister(map + HALF, HALF, cudaHostRegisterPortable));
    char *host = inside ? map + HALF / 2 : map + HALF - COPY / 2;
    cudaStream_t s = cf_stream(0, false);
    uint32_t *dev = cf_words(0, COPY / sizeof(uint32_t));
    CF_CK(cudaMemset(dev, d2h ? 0x33 : 0, COPY));
    CF_CK(cudaDeviceSynchronize());
    cudaError_t err;
    if (sync)
        err = d2h ? cudaMemcpy(host, dev, COPY, cudaMemcpyDeviceToHost) : cudaMemcpy(dev, host, COPY, cudaMemcpyHostToDevice);
    else
        err = d2h ? cudaMemcpyAsync(host, dev, COPY, cudaMemcpyDeviceToHost, s)
                  : cudaMemcpyAsync(dev, host, COPY, cudaMemcpyHostToDevice, s);
    (void)cudaGetLastError(); /* the error, if any, is the outcome: not sticky */
    bool data = false;
    if (err == cudaSuccess) {
        CF_CK(cudaStreamSynchronize(s));
        char back[COPY];
        if (d2h) {
            memcpy(back, host, COPY);
            data = back[0] == 0x33 && back[COPY - 1] == 0x33;
        } else {
            CF_CK(cudaMemcpy(back, dev, COPY, cudaMemcpyDeviceToHost));
            data = back[0] == 0x5a && back[COPY - 1] == 0x5a;
        }
    }
    CF_CK(cudaHostUnregister(map));
    if (both)
        CF_CK(cudaHostUnregister(map + HALF));
    munmap(map, 2 * HALF);
    if (err == cudaSuccess)
        cf_result("%s data=%s", cudaGetErrorName(err), data ? "ok" : "wrong");
    else
        cf_result("%s", cudaGetErrorName(err));
    return 0;
}
