/* ipc.cu - device memory shared between two processes (cudaIpcGetMemHandle /
 * cudaIpcOpenMemHandle): the parent fills a buffer with a pageable H2D and
 * starts itself again as a child (the preload is inherited), which opens the
 * buffer, checks it with a pageable D2H, writes another pattern with a
 * pageable H2D and exits; the parent then reads that back. */
#include "compat.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const size_t n = (size_t)4 << 20;

static int child(const char *hex)
{
    compat_name = "ipc(child)";
    cudaIpcMemHandle_t handle;
    if (strlen(hex) != 2 * sizeof handle)
        compat_fail("bad handle argument");
    for (size_t i = 0; i < sizeof handle; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        ((unsigned char *)&handle)[i] = (unsigned char)v;
    }
    unsigned char *d, *h = (unsigned char *)malloc(n);
    if (h == NULL)
        compat_fail("malloc");
    CK(cudaIpcOpenMemHandle((void **)&d, handle, cudaIpcMemLazyEnablePeerAccess));
    CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    COMPAT_EXPECT(h, n, 100, "the child's D2H of the parent's buffer");
    compat_fill(h, n, 101);
    CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
    CK(cudaIpcCloseMemHandle(d));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "child") == 0)
        return child(argv[2]);
    compat_name = "ipc";
    unsigned char *d, *h = (unsigned char *)malloc(n);
    if (h == NULL)
        compat_fail("malloc");
    CK(cudaMalloc((void **)&d, n));
    compat_fill(h, n, 100);
    CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    cudaIpcMemHandle_t handle;
    CK(cudaIpcGetMemHandle(&handle, d));
    char hex[2 * sizeof handle + 1];
    for (size_t i = 0; i < sizeof handle; i++)
        snprintf(hex + 2 * i, 3, "%02x", ((unsigned char *)&handle)[i]);
    char *child_argv[] = {argv[0], (char *)"child", hex, NULL};
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, child_argv, environ) != 0)
        compat_fail("posix_spawn");
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        compat_fail("the child failed");
    memset(h, 0, n);
    CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    COMPAT_EXPECT(h, n, 101, "the parent's D2H of what the child wrote");
    CK(cudaFree(d));
    return compat_pass();
}
