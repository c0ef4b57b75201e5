/* Rule: a pageable copy whose host side the process may not touch (a
 * destination mapped read-only, a source mapped PROT_NONE) ends the process
 * with SIGSEGV; the call does not return an error. Measured on an H200
 * (driver 580) natively at 64 KiB, 4 MiB and 64 MiB, cudaMemcpy and
 * cudaMemcpyAsync, and under the shim, whose pipelines copy host memory on
 * their own threads: the same signal, not an error, not a hang
 * (docs/measurements/2026-11-29-h200-checks.md). The simulated runtime
 * copies host memory in the calling thread, which faults the same way.
 * Arguments: d2h (into read-only memory) or h2d (from PROT_NONE memory);
 * large (64 MiB: the shim's pipelines; else 64 KiB); async
 * (cudaMemcpyAsync on a non-blocking stream + synchronize; else cudaMemcpy);
 * accessible (the control: the memory stays readable and writable, so the
 * child's copy itself is shown to work: returned=cudaSuccess).
 * Outcome: signal=<n> when the copy's process was killed by a signal, else
 * returned=<error name of the copy>. The copy runs in a child process, which
 * makes its own CUDA context after the fork. */
#include "conform.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void copy_in_child(size_t bytes, bool to_host, bool async, bool accessible)
{
    void *dev = NULL;
    cudaStream_t s;
    CF_CK(cudaMalloc(&dev, bytes));
    CF_CK(cudaMemset(dev, 1, bytes));
    CF_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CF_CK(cudaDeviceSynchronize());
    unsigned char *host = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (host == MAP_FAILED)
        _exit(3);
    memset(host, 0, bytes); /* mapped and faulted in: only the protection forbids it */
    if (!accessible && mprotect(host, bytes, to_host ? PROT_READ : PROT_NONE) != 0)
        _exit(3);
    cudaError_t err;
    if (async) {
        err = to_host ? cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s)
                      : cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(s);
    } else {
        err = to_host ? cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost)
                      : cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
    }
    cf_result("returned=%s", cudaGetErrorName(err));
}

int main(int argc, char **argv)
{
    cf_name(argc, argv);
    size_t bytes = cf_arg("large") ? (size_t)64 << 20 : (size_t)64 << 10;
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 3;
    if (child == 0) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
        /* a sanitizer's own handler would report the fault and exit 1 */
        signal(SIGSEGV, SIG_DFL);
#endif
        cf_begin(argc, argv);
        copy_in_child(bytes, cf_arg("d2h"), cf_arg("async"), cf_arg("accessible"));
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child)
        return 3;
    if (WIFSIGNALED(status))
        cf_result("signal=%d", WTERMSIG(status));
    return 0;
}
