/* probe_real.c - prints what the real CUDA runtime answers for the corner
 * cases where fakecuda had to choose a behaviour (pointer attributes of
 * pageable memory, error codes for bad arguments, capture rules). Not part of
 * the build: run it by hand on a GPU machine and compare with docs/fakecuda.md.
 *   gcc -std=c11 -D_GNU_SOURCE -I/usr/local/cuda/include probe_real.c \
 *       -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,/usr/local/cuda/lib64 -o probe_real
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHOW(call) do { cudaError_t e_ = (call); \
    printf("%-70s -> %s\n", #call, cudaGetErrorName(e_)); (void)cudaGetLastError(); } while (0)

static void attr(const char *what, const void *p)
{
    struct cudaPointerAttributes a;
    a.type = (enum cudaMemoryType)77; a.device = 77; a.devicePointer = (void *)7; a.hostPointer = (void *)7;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    printf("attr %-22s -> %s type=%d device=%d devptr=%s hostptr=%s\n", what, cudaGetErrorName(e),
           (int)a.type, a.device, a.devicePointer == p ? "=p" : a.devicePointer ? "other" : "NULL",
           a.hostPointer == p ? "=p" : a.hostPointer ? "other" : "NULL");
    (void)cudaGetLastError();
}

static void CUDART_CB hostfn(void *arg) { (void)arg; }

/* Kind/pointer mismatches that may crash the real runtime: one per process. */
static int risky(int which)
{
    size_t sz = 1 << 20;
    char *d = NULL, *h = NULL, *m = malloc(sz);
    cudaMalloc((void **)&d, sz);
    cudaMallocHost((void **)&h, sz);
    switch (which) {
    case 1: SHOW(cudaMemcpy(h, d, 16, cudaMemcpyHostToDevice)); break;
    case 2: SHOW(cudaMemcpy(d, h, 16, cudaMemcpyDeviceToHost)); break;
    case 3: SHOW(cudaMemcpy(d, d + 64, 16, cudaMemcpyHostToHost)); break;
    case 4: SHOW(cudaMemcpy(h, h + 64, 16, cudaMemcpyDeviceToDevice)); break;
    case 5: SHOW(cudaMemcpy(h, d, 16, cudaMemcpyDeviceToDevice)); break;
    case 6: SHOW(cudaMemcpy(d, m, 16, cudaMemcpyHostToHost)); break;
    case 7: SHOW(cudaMemcpy(m, d, 16, cudaMemcpyHostToHost)); break;
    case 8: SHOW(cudaMemcpy(d, h, 16, cudaMemcpyHostToDevice)); break;
    case 9: SHOW(cudaMemcpy(h, m, 16, cudaMemcpyHostToDevice)); break;
    case 10: SHOW(cudaMemcpy(m, h, 16, cudaMemcpyHostToDevice)); break;
    case 11: SHOW(cudaMemcpyAsync(m, d, 16, cudaMemcpyDeviceToHost, cudaStreamPerThread)); break;
    default: return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1 && argv[1][0] == 'e') {
        /* the error table: code, name, string (source of tests/fakecuda/errors.def) */
        for (int c = 0; c < 1100; c++) {
            const char *name = cudaGetErrorName((cudaError_t)c);
            if (strcmp(name, cudaGetErrorName((cudaError_t)99999)) != 0)
                printf("%d\t%s\t%s\n", c, name, cudaGetErrorString((cudaError_t)c));
        }
        printf("-1\t%s\t%s\n", cudaGetErrorName((cudaError_t)99999), cudaGetErrorString((cudaError_t)99999));
        return 0;
    }
    if (argc > 1)
        return risky(atoi(argv[1]));
    int n = 0, v = 0;
    SHOW(cudaGetDeviceCount(&n));
    printf("devices %d\n", n);
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv); cudaRuntimeGetVersion(&rt);
    printf("driver %d runtime %d\n", drv, rt);
    SHOW(cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, 0)); printf("clock %d\n", v);
    SHOW(cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, 0)); printf("cma %d\n", v);
    SHOW(cudaDeviceCanAccessPeer(&v, 0, 0)); printf("canaccess self %d\n", v);
    SHOW(cudaDeviceCanAccessPeer(&v, 0, n)); 
    SHOW(cudaDeviceEnablePeerAccess(0, 0));
    SHOW(cudaDeviceEnablePeerAccess(n, 0));
    SHOW(cudaDeviceDisablePeerAccess(0));
    SHOW(cudaSetDevice(n));
    SHOW(cudaSetDevice(-1));

    size_t sz = 1 << 20;
    char *d = NULL, *h = NULL, *p = NULL, *r = malloc(sz + 4096), *m = malloc(sz);
    char stack[64];
    SHOW(cudaMalloc((void **)&d, sz));
    SHOW(cudaMallocHost((void **)&h, sz));
    SHOW(cudaHostAlloc((void **)&p, sz, cudaHostAllocMapped));
    SHOW(cudaHostRegister(r, sz, 0));
    SHOW(cudaHostRegister(r, sz, 0));
    SHOW(cudaHostRegister(r + 64, 128, 0));
    SHOW(cudaHostRegister(NULL, 0, 0));
    SHOW(cudaHostUnregister(m));
    attr("device", d); attr("device+100", d + 100); attr("device end", d + sz); attr("device end+4096", d + sz + 4096);
    attr("pinned", h); attr("pinned+5", h + 5); attr("hostalloc mapped", p);
    attr("registered", r); attr("registered+9", r + 9);
    attr("malloc", m); attr("stack", stack); attr("NULL", NULL); attr("0x10", (void *)0x10);
    SHOW(cudaSetDevice(0));
    void *dp = NULL;
    SHOW(cudaHostGetDevicePointer(&dp, h, 0)); printf("hgdp pinned %s\n", dp == h ? "=p" : "other");
    SHOW(cudaHostGetDevicePointer(&dp, r, 0)); printf("hgdp registered %s\n", dp == r ? "=p" : "other");
    SHOW(cudaHostGetDevicePointer(&dp, m, 0));
    SHOW(cudaHostGetDevicePointer(&dp, d, 0));

    /* copies with odd arguments */
    SHOW(cudaMemcpy(m, m + 16, 16, cudaMemcpyHostToHost));
    SHOW(cudaMemcpy(m, m + 16, 16, cudaMemcpyDeviceToHost));
    SHOW(cudaMemcpy(m, m + 16, 16, cudaMemcpyHostToDevice));
    SHOW(cudaMemcpy(m, m + 16, 16, cudaMemcpyDeviceToDevice));
    SHOW(cudaMemcpy(m, m + 16, 16, cudaMemcpyDefault));
    SHOW(cudaMemcpy(d, m, 16, cudaMemcpyDeviceToHost));
    SHOW(cudaMemcpy(m, d, 16, cudaMemcpyHostToDevice));
    SHOW(cudaMemcpy(m, h, 16, cudaMemcpyDeviceToHost));
    SHOW(cudaMemcpy(m, d, 16, cudaMemcpyDeviceToDevice));
    SHOW(cudaMemcpy(d, m, 16, cudaMemcpyDeviceToDevice));
    SHOW(cudaMemcpy(d + sz - 8, m, 16, cudaMemcpyHostToDevice));
    SHOW(cudaMemcpy(m, d + sz - 8, 16, cudaMemcpyDeviceToHost));
    SHOW(cudaMemcpy(m, d + sz - 8, 16, cudaMemcpyDefault));
    SHOW(cudaMemcpy(NULL, m, 16, cudaMemcpyHostToDevice));
    SHOW(cudaMemcpy(d, NULL, 16, cudaMemcpyHostToDevice));
    SHOW(cudaMemcpy(NULL, NULL, 0, cudaMemcpyHostToDevice));
    SHOW(cudaMemcpy(d, m, 16, (enum cudaMemcpyKind)9));
    SHOW(cudaMemcpyPeer(d, 0, d + 64, 0, 16));
    SHOW(cudaMemcpyPeer(d, 0, m, 0, 16));
    SHOW(cudaMemcpyPeer(d, n, d + 64, 0, 16));
    SHOW(cudaMemset(m, 0, 16));
    SHOW(cudaMemset(h, 0, 16));
    SHOW(cudaMemset(r, 0, 16));
    SHOW(cudaMemset(d + sz - 8, 0, 16));
    SHOW(cudaMemset(NULL, 0, 0));
    SHOW(cudaMemset(NULL, 0, 16));
    SHOW(cudaMemcpy2D(d, 64, m, 32, 48, 4, cudaMemcpyHostToDevice));
    SHOW(cudaMemcpy2D(d, 64, m, 64, 48, 0, cudaMemcpyHostToDevice));
    SHOW(cudaFree(m));
    SHOW(cudaFree(d + 16));
    SHOW(cudaFree(NULL));
    SHOW(cudaFreeHost(m));
    SHOW(cudaFreeHost(NULL));

    /* streams and events */
    cudaStream_t s, nb;
    unsigned fl = 99; int dev = 99;
    SHOW(cudaStreamCreate(&s));
    SHOW(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    SHOW(cudaStreamGetFlags(0, &fl)); printf("flags(0) %u\n", fl);
    SHOW(cudaStreamGetFlags(cudaStreamLegacy, &fl)); printf("flags(legacy) %u\n", fl);
    SHOW(cudaStreamGetFlags(cudaStreamPerThread, &fl)); printf("flags(perthread) %u\n", fl);
    SHOW(cudaStreamGetFlags(nb, &fl)); printf("flags(nb) %u\n", fl);
    SHOW(cudaStreamGetDevice(0, &dev)); printf("dev(0) %d\n", dev);
    SHOW(cudaStreamCreateWithFlags(&nb, 77));
    cudaEvent_t e1, e2, e3;
    SHOW(cudaEventCreate(&e1));
    SHOW(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
    SHOW(cudaEventCreateWithFlags(&e3, 0x100));
    SHOW(cudaEventCreate(&e3));
    float ms = 0;
    SHOW(cudaEventQuery(e1));
    SHOW(cudaEventSynchronize(e1));
    SHOW(cudaEventElapsedTime(&ms, e1, e3));
    SHOW(cudaEventRecord(e1, s));
    SHOW(cudaEventElapsedTime(&ms, e1, e3));
    SHOW(cudaEventRecord(e3, s));
    SHOW(cudaStreamSynchronize(s));
    SHOW(cudaEventElapsedTime(&ms, e1, e3));
    SHOW(cudaEventRecord(e2, s));
    SHOW(cudaStreamSynchronize(s));
    SHOW(cudaEventElapsedTime(&ms, e1, e2));
    SHOW(cudaEventElapsedTime(&ms, e2, e1));

    /* capture */
    enum cudaStreamCaptureStatus st = (enum cudaStreamCaptureStatus)9;
    cudaGraph_t g = NULL;
    SHOW(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal));
    SHOW(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    SHOW(cudaStreamIsCapturing(s, &st)); printf("status %d\n", (int)st);
    SHOW(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    SHOW(cudaMemcpyAsync(d, h, 16, cudaMemcpyHostToDevice, s));
    SHOW(cudaMemcpyAsync(m, d, 16, cudaMemcpyDeviceToHost, s));
    SHOW(cudaStreamIsCapturing(s, &st)); printf("status %d\n", (int)st);
    SHOW(cudaStreamEndCapture(s, &g)); printf("graph %p\n", (void *)g);
    SHOW(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    SHOW(cudaMemcpyAsync(d, m, 16, cudaMemcpyHostToDevice, s));
    SHOW(cudaStreamIsCapturing(s, &st)); printf("status %d\n", (int)st);
    SHOW(cudaStreamEndCapture(s, &g));
    SHOW(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    SHOW(cudaStreamQuery(s));
    SHOW(cudaStreamIsCapturing(s, &st)); printf("status %d\n", (int)st);
    SHOW(cudaStreamEndCapture(s, &g));
    SHOW(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    SHOW(cudaStreamSynchronize(s));
    SHOW(cudaStreamEndCapture(s, &g));
    SHOW(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    SHOW(cudaEventQuery(e1));
    SHOW(cudaStreamIsCapturing(s, &st)); printf("status after eventquery %d\n", (int)st);
    SHOW(cudaStreamEndCapture(s, &g));
    SHOW(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    SHOW(cudaStreamQuery(nb));
    SHOW(cudaStreamIsCapturing(s, &st)); printf("status after query(other) %d\n", (int)st);
    SHOW(cudaStreamEndCapture(s, &g));
    SHOW(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    void *tmp = NULL;
    SHOW(cudaMallocHost(&tmp, 4096));
    SHOW(cudaStreamIsCapturing(s, &st)); printf("status after mallochost %d\n", (int)st);
    SHOW(cudaStreamEndCapture(s, &g));
    SHOW(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    SHOW(cudaThreadExchangeStreamCaptureMode(&mode)); printf("old mode %d\n", (int)mode);
    SHOW(cudaEventQuery(e1));
    SHOW(cudaMallocHost(&tmp, 4096));
    SHOW(cudaStreamIsCapturing(s, &st)); printf("status relaxed %d\n", (int)st);
    SHOW(cudaThreadExchangeStreamCaptureMode(&mode)); printf("old mode %d\n", (int)mode);
    SHOW(cudaStreamEndCapture(s, &g)); printf("graph %s\n", g ? "non-null" : "NULL");
    SHOW(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    SHOW(cudaLaunchHostFunc(s, hostfn, NULL));
    SHOW(cudaEventRecord(e1, s));
    SHOW(cudaStreamWaitEvent(nb, e1, 0));
    SHOW(cudaStreamIsCapturing(nb, &st)); printf("nb status after join %d\n", (int)st);
    SHOW(cudaStreamEndCapture(s, &g));
    SHOW(cudaStreamEndCapture(s, &g));
    SHOW(cudaStreamIsCapturing(0, &st)); printf("legacy status %d\n", (int)st);
    SHOW(cudaStreamSynchronize(nb));

    SHOW(cudaStreamDestroy(s));
    SHOW(cudaEventDestroy(e1));
    SHOW(cudaDeviceSynchronize());
    SHOW(cudaHostUnregister(r));
    SHOW(cudaHostUnregister(r));
    return 0;
}
