/* Rule (case D): a same-device D2D copy runs as a kernel on the
 * compute engine. Behind a kernel of its own context that occupies every SM
 * it waits until that kernel ends (the first burst; the others run after
 * it); beside a one-block kernel of the same context it runs at once; in a
 * context the program created (cuCtxCreate) it waits behind any kernel of
 * the primary context, a time slice (2 ms by default) burst after burst.
 * Arguments: full (the kernel occupies every SM), one_block, created (a
 * one-block kernel in the primary context, the copies in a created one).
 * Outcome: late=1 when the median of 5 bursts of 4 x 64 KiB, each timed by an
 * event pair on the copy stream and synchronized, took more than 1.2 ms (idle:
 * tens of us; busy: a time slice, 2 ms), and during=1 when every burst ended
 * before the 300 ms kernel (full: 0, the first burst ends with the kernel;
 * there, before the first of its blocks left, since the copies may use the
 * SMs the first ones free).
 * With hostfn as well, each burst starts with a host function that notes the
 * host time it ran, and the outcome is hostfn_late=1 when the median time from
 * its launch to its run exceeds 1.2 ms (whether a host function of a context
 * off the engine waits for the slice too: what unstall's probe relies on). */
#include "conform.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda.h>

#define BURSTS 5
#define COPIES 4
#define CHUNK ((size_t)64 << 10)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void CUDART_CB note_time(void *p)
{
    *(volatile double *)p = now_ms();
}

static int cmp(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    bool created = cf_arg("created"), full = cf_arg("full"), hostfn = cf_arg("hostfn");
    double ran[BURSTS] = {0};
    float waited[BURSTS];
    CUresult (*ctx_create)(CUcontext *, unsigned, CUdevice) = NULL;
    CUresult (*ctx_set)(CUcontext) = NULL;
    CUresult (*ctx_get)(CUcontext *) = NULL;
    CUcontext primary = NULL, ctx = NULL;
    CF_CK(cudaFree(0));
    cudaStream_t sk = cf_stream(0, false);
    int *flags = cf_flags(1);
    if (created) {
        void *lib = dlopen("libcuda.so.1", RTLD_LAZY);
        if (lib == NULL) {
            cf_result("ERROR no_driver");
            return 1;
        }
        *(void **)&ctx_create = dlsym(lib, "cuCtxCreate_v2");
        *(void **)&ctx_set = dlsym(lib, "cuCtxSetCurrent");
        *(void **)&ctx_get = dlsym(lib, "cuCtxGetCurrent");
        CUdevice dev = 0;
        if (ctx_create == NULL || ctx_set == NULL || ctx_get == NULL || ctx_get(&primary) != CUDA_SUCCESS ||
            ctx_create(&ctx, 0, dev) != CUDA_SUCCESS) {
            cf_result("ERROR cuCtxCreate");
            return 1;
        }
    }
    char *src, *dst;
    cudaStream_t sc;
    cudaEvent_t e0, e1;
    CF_CK(cudaMalloc((void **)&src, COPIES * CHUNK));
    CF_CK(cudaMalloc((void **)&dst, COPIES * CHUNK));
    CF_CK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
    CF_CK(cudaEventCreate(&e0));
    CF_CK(cudaEventCreate(&e1));
    for (int i = 0; i < COPIES; i++) /* warm-up */
        CF_CK(cudaMemcpyAsync(dst + i * CHUNK, src + i * CHUNK, CHUNK, cudaMemcpyDeviceToDevice, sc));
    CF_CK(cudaStreamSynchronize(sc));

    if (created)
        ctx_set(primary);
    if (full) {
        cf_occupy(sk, 300, &flags[0], 1);
    } else {
        cf_sleep(sk, 300);
        cf_set_flag_after(sk, &flags[0], 1, 0);
    }
    if (created)
        ctx_set(ctx);
    float ms[BURSTS];
    int during = 1;
    for (int b = 0; b < BURSTS; b++) {
        double issued = now_ms();
        if (hostfn)
            CF_CK(cudaLaunchHostFunc(sc, note_time, &ran[b]));
        CF_CK(cudaEventRecord(e0, sc));
        for (int i = 0; i < COPIES; i++)
            CF_CK(cudaMemcpyAsync(dst + i * CHUNK, src + i * CHUNK, CHUNK, cudaMemcpyDeviceToDevice, sc));
        CF_CK(cudaEventRecord(e1, sc));
        CF_CK(cudaStreamSynchronize(sc));
        CF_CK(cudaEventElapsedTime(&ms[b], e0, e1));
        waited[b] = hostfn ? (float)(ran[b] - issued) : 0.0f;
    }
    if (__atomic_load_n(&flags[0], __ATOMIC_SEQ_CST) != 0)
        during = 0;
    qsort(ms, BURSTS, sizeof ms[0], cmp);
    qsort(waited, BURSTS, sizeof waited[0], cmp);
    if (created)
        ctx_set(primary);
    CF_CK(cudaStreamSynchronize(sk));
    if (getenv("CONFORM_VERBOSE") != NULL)
        for (int b = 0; b < BURSTS; b++)
            fprintf(stderr, "burst %d: %.3f ms, host function after %.3f ms (sorted)\n", b, (double)ms[b],
                    (double)waited[b]);
    if (hostfn)
        cf_result("hostfn_late=%d during=%d", waited[BURSTS / 2] > 1.2f, during);
    else
        cf_result("late=%d during=%d", ms[BURSTS / 2] > 1.2f, during);
    return 0;
}
