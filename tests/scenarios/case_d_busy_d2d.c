/* case_d_busy_d2d.c - case D: same-device device-to-device copies while a long
 * kernel runs (a user reported it in a created context). A D2D copy runs as a
 * kernel on the compute engine: behind a kernel of its own context that
 * occupies every SM it waits until that kernel ends; behind a kernel of
 * another context, a time slice per burst (measured on 2 x H200: 197.9 ms for
 * the first burst behind a 200 ms kernel of the primary context, then
 * 0.035 ms; 2.44 ms every burst in a cuCtxCreate context).
 *
 * Test (argv or SCN_TESTS):
 *   busy_d2d   baseline: a burst of SCN_D_COUNT (8) x SCN_D_BYTES (1 MiB)
 *              cudaMemcpyAsync D2D on a non-blocking stream, no kernel
 *              running; then a SCN_D_KERNEL_MS kernel on stream K and
 *              SCN_D_BURSTS bursts on the copy stream while it runs: time
 *              from the first copy's issue to the burst's completion (an
 *              event). during_kernel=1 when the kernel was still running
 *              after the last burst (else the figure mixes in an idle GPU,
 *              or the burst waited for the kernel's end). The kernel
 *              occupies every SM (scn_kernel_occupy).
 *   bursts_primary_idle, bursts_primary_busy, bursts_created_idle,
 *   bursts_created_busy
 *              the repeated case: SCN_D_REPEAT (10) bursts back
 *              to back, each SCN_D_COUNT x SCN_D_BYTES cudaMemcpyAsync D2D
 *              on a non-blocking stream then cudaStreamSynchronize, timed
 *              on the host from the first copy's issue to the sync's
 *              return; busy: while a SCN_D_KERNEL_MS kernel occupies every
 *              SM (launched in the primary context); in the primary
 *              context, or in a cuCtxCreate context (the driver is reached
 *              with dlopen: the programs link only the runtime). Prints
 *              the median and the max burst; during_kernel=1 when the
 *              kernel was still running after the last burst. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>

#include "kernels.h"
#include "scenario.h"

static double burst(char *dst, const char *src, size_t n, int count, cudaStream_t s, cudaEvent_t ev)
{
    double t0 = scn_now_ms();
    for (int i = 0; i < count; i++)
        SCN_CK(cudaMemcpyAsync(dst + (size_t)i * n, src + (size_t)i * n, n, cudaMemcpyDeviceToDevice, s));
    SCN_CK(cudaEventRecord(ev, s));
    return scn_poll_event(ev) - t0;
}

/* Whether the kernel is still running, right after the bursts: its event,
 * recorded behind it, is not done. (Polling the event and comparing its
 * observed time with the bursts' end said "during" also when the kernel had
 * ended before the bursts did.) */
static bool kernel_running(cudaEvent_t kev)
{
    cudaError_t err = cudaEventQuery(kev);
    if (err != cudaErrorNotReady)
        SCN_CK(err);
    return err == cudaErrorNotReady;
}

/* The driver functions the created-context tests need, from the libcuda the
 * runtime loaded. */
struct driver {
    CUresult (*ctx_create)(CUcontext *ctx, unsigned flags, CUdevice dev);
    CUresult (*ctx_destroy)(CUcontext ctx);
    CUresult (*ctx_get_current)(CUcontext *ctx);
    CUresult (*ctx_set_current)(CUcontext ctx);
    CUresult (*device_get)(CUdevice *dev, int ordinal);
};

static bool driver_load(struct driver *d)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY);
    if (lib == NULL)
        return false;
    *(void **)&d->ctx_create = dlsym(lib, "cuCtxCreate_v2");
    *(void **)&d->ctx_destroy = dlsym(lib, "cuCtxDestroy_v2");
    *(void **)&d->ctx_get_current = dlsym(lib, "cuCtxGetCurrent");
    *(void **)&d->ctx_set_current = dlsym(lib, "cuCtxSetCurrent");
    *(void **)&d->device_get = dlsym(lib, "cuDeviceGet");
    return d->ctx_create && d->ctx_destroy && d->ctx_get_current && d->ctx_set_current && d->device_get;
}

#define DRV_CK(call)                                                                                               \
    do {                                                                                                           \
        if ((call) != CUDA_SUCCESS)                                                                                \
            SCN_CK(cudaErrorUnknown);                                                                              \
    } while (0)

/* One repeated-bursts test: `created` works in a cuCtxCreate context,
 * `busy` runs the bursts while a kernel of the primary context occupies
 * every SM. */
static void repeated_bursts(const char *test, bool created, bool busy, size_t n, int count, int repeat,
                            double kernel_ms)
{
    scn_test(test, 0);
    struct driver drv = {0}; /* set only when created: a newer gcc (the H200 image's) warns otherwise */
    if (created && !driver_load(&drv)) {
        scn_result(test, "error=no_driver ok=0");
        return;
    }
    SCN_CK(cudaSetDevice(0));
    SCN_CK(cudaFree(0));
    CUcontext primary = NULL, ctx = NULL;
    if (created) {
        CUdevice dev;
        DRV_CK(drv.ctx_get_current(&primary));
        DRV_CK(drv.device_get(&dev, 0));
        DRV_CK(drv.ctx_create(&ctx, 0, dev)); /* current from here */
    }
    size_t total = n * (size_t)count;
    char *src, *dst;
    cudaStream_t sc;
    SCN_CK(cudaMalloc((void **)&src, total));
    SCN_CK(cudaMalloc((void **)&dst, total));
    SCN_CK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
    SCN_CK(cudaMemsetAsync(dst, 0, total, sc));
    SCN_CK(cudaMemsetAsync(src, 0x3C, total, sc));
    SCN_CK(cudaStreamSynchronize(sc));
    for (int i = 0; i < count; i++) /* warm-up */
        SCN_CK(cudaMemcpyAsync(dst + (size_t)i * n, src + (size_t)i * n, n, cudaMemcpyDeviceToDevice, sc));
    SCN_CK(cudaStreamSynchronize(sc));

    cudaStream_t sk = NULL;
    cudaEvent_t kev = NULL;
    double t_kernel = scn_now_ms();
    if (busy) {
        if (created)
            DRV_CK(drv.ctx_set_current(primary));
        SCN_CK(cudaStreamCreateWithFlags(&sk, cudaStreamNonBlocking));
        SCN_CK(cudaEventCreateWithFlags(&kev, cudaEventDisableTiming));
        t_kernel = scn_now_ms();
        scn_kernel_occupy(sk, kernel_ms);
        SCN_CK(cudaEventRecord(kev, sk));
        if (created)
            DRV_CK(drv.ctx_set_current(ctx));
        scn_sleep_ms(2); /* the kernel is running (the seed's gap) */
    }
    double *t = calloc((size_t)repeat, sizeof *t);
    if (t == NULL) {
        scn_result(test, "error=calloc ok=0");
        return;
    }
    double worst = 0;
    for (int b = 0; b < repeat; b++) {
        double t0 = scn_now_ms();
        for (int i = 0; i < count; i++)
            SCN_CK(cudaMemcpyAsync(dst + (size_t)i * n, src + (size_t)i * n, n, cudaMemcpyDeviceToDevice, sc));
        SCN_CK(cudaStreamSynchronize(sc));
        t[b] = scn_now_ms() - t0;
        if (t[b] > worst)
            worst = t[b];
    }
    bool during = true;
    if (busy) {
        if (created)
            DRV_CK(drv.ctx_set_current(primary));
        during = kernel_running(kev);
        SCN_CK(cudaEventDestroy(kev));
        SCN_CK(cudaStreamDestroy(sk));
        if (created)
            DRV_CK(drv.ctx_set_current(ctx));
    }
    /* the data: every burst copied the same bytes */
    unsigned char *back;
    SCN_CK(cudaMallocHost((void **)&back, total));
    SCN_CK(cudaMemcpyAsync(back, dst, total, cudaMemcpyDeviceToHost, sc));
    SCN_CK(cudaStreamSynchronize(sc));
    bool ok = true;
    for (size_t i = 0; i < total && ok; i++)
        ok = back[i] == 0x3C;
    SCN_CK(cudaFreeHost(back));
    /* each burst in order, for the reader: which one was the worst */
    char bursts_ms[256] = "";
    for (int b = 0, at = 0; b < repeat && at < (int)sizeof bursts_ms - 16; b++)
        at += snprintf(bursts_ms + at, sizeof bursts_ms - (size_t)at, "%s%.3f", b ? "," : "", t[b]);
    double median = scn_quantile(t, (size_t)repeat, 0.5);
    scn_result(test,
               "context=%s busy=%d copies=%d bytes=%zu bursts=%d kernel_ms=%.3f median_ms=%.3f max_ms=%.3f "
               "during_kernel=%d ok=%d burst_ms=%s",
               created ? "created" : "primary", busy, count, n, repeat, busy ? kernel_ms : 0.0, median, worst,
               during, ok, bursts_ms);
    (void)t_kernel;
    free(t);
    SCN_CK(cudaStreamDestroy(sc));
    SCN_CK(cudaFree(src));
    SCN_CK(cudaFree(dst));
    if (created) {
        DRV_CK(drv.ctx_destroy(ctx));
        DRV_CK(drv.ctx_set_current(primary));
    }
}

static void busy_d2d(size_t n, int count, int bursts, double kernel_ms);

int main(int argc, char **argv)
{
    scn_begin("D", argc, argv);
    size_t n = scn_env_size("D_BYTES", SCN_MIB, SCN_MIB);
    int count = (int)scn_env_long("D_COUNT", 8, 8);
    int bursts = (int)scn_env_long("D_BURSTS", 3, 2);
    int repeat = (int)scn_env_long("D_REPEAT", 10, 10);
    double kernel_ms = scn_env_double("D_KERNEL_MS", 200, 100);
    if (repeat < 1)
        repeat = 1;
    if (scn_want("busy_d2d"))
        busy_d2d(n, count, bursts, kernel_ms);
    static const struct {
        const char *name;
        bool created, busy;
    } repeated[] = {
        {"bursts_primary_idle", false, false},
        {"bursts_primary_busy", false, true},
        {"bursts_created_idle", true, false},
        {"bursts_created_busy", true, true},
    };
    for (size_t i = 0; i < sizeof repeated / sizeof repeated[0]; i++)
        if (scn_want(repeated[i].name))
            repeated_bursts(repeated[i].name, repeated[i].created, repeated[i].busy, n, count, repeat, kernel_ms);
    return scn_end();
}

static void busy_d2d(size_t n, int count, int bursts, double kernel_ms)
{
    scn_test("busy_d2d", 0);
    if (bursts < 1)
        bursts = 1;

    SCN_CK(cudaSetDevice(0));
    size_t total = n * (size_t)count;
    char *src, *dst;
    SCN_CK(cudaMalloc((void **)&src, total));
    SCN_CK(cudaMalloc((void **)&dst, total));
    scn_device_fill(0, src, total, 51);
    SCN_CK(cudaMemset(dst, 0, total));
    SCN_CK(cudaDeviceSynchronize());
    cudaStream_t sk, sc;
    SCN_CK(cudaStreamCreateWithFlags(&sk, cudaStreamNonBlocking));
    SCN_CK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
    cudaEvent_t ev, kev;
    SCN_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    SCN_CK(cudaEventCreateWithFlags(&kev, cudaEventDisableTiming));

    burst(dst, src, n, count, sc, ev); /* warm-up */
    double base = 1e30;
    for (int r = 0; r < 3; r++) {
        double t = burst(dst, src, n, count, sc, ev);
        if (t < base)
            base = t;
    }
    bool ok = scn_device_verify(0, dst, total, 51);
    SCN_CK(cudaMemset(dst, 0, total));
    SCN_CK(cudaDeviceSynchronize());

    double t0 = scn_now_ms();
    scn_kernel_occupy(sk, kernel_ms);
    SCN_CK(cudaEventRecord(kev, sk));
    scn_sleep_ms(2); /* the kernel is running (the seed's gap) */
    double first = 0, worst = 0;
    for (int b = 0; b < bursts; b++) {
        double t = burst(dst, src, n, count, sc, ev);
        if (b == 0)
            first = t;
        if (t > worst)
            worst = t;
    }
    bool during = kernel_running(kev);
    double kernel_done = scn_poll_event(kev);
    ok = ok && scn_device_verify(0, dst, total, 51);
    scn_result("busy_d2d",
               "copies=%d bytes=%zu kernel_ms=%.3f base_ms=%.3f burst_ms=%.3f burst_max_ms=%.3f bursts=%d "
               "kernel_done_ms=%.3f during_kernel=%d ok=%d",
               count, n, kernel_ms, base, first, worst, bursts, kernel_done - t0, during, ok);

    SCN_CK(cudaEventDestroy(ev));
    SCN_CK(cudaEventDestroy(kev));
    SCN_CK(cudaStreamDestroy(sk));
    SCN_CK(cudaStreamDestroy(sc));
    SCN_CK(cudaFree(src));
    SCN_CK(cudaFree(dst));
}
