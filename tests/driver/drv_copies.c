/* drv_copies.c - a program that reaches CUDA only through the driver, as
 * driver-API programs and the static runtime do: it links no CUDA library,
 * dlopens libcuda.so.1 and takes every function from cuGetProcAddress.
 *
 *   drv_copies STYLE WHERE [strict]
 *   STYLE  driver: dlsym(libcuda, "cuGetProcAddress") (the 4-argument
 *                  form), entry points with flags 0 (default)
 *          static: dlsym(libcuda, "cuGetProcAddress_v2"), cuGetProcAddress
 *                  looked up through itself (version 13000: _v2), each copy
 *                  function taken twice, with the legacy-stream flag and with
 *                  the per-thread flag, as the static runtime does
 *          linked: built with -DDRV_LINKED and linked against libcuda
 *                  (-lcuda), calling the exported functions directly by their
 *                  symbols (_v2, and _ptds/_ptsz for the per-thread ones), as
 *                  NVIDIA's driver-API samples do
 *   WHERE  primary: the device's primary context (retained, made current);
 *          created: a context of its own (cuCtxCreate)
 *   strict expect the first pageable copy refused (CUDA_ERROR_NOT_PERMITTED,
 *          UNSTALL_MODE=strict), print "refused" and stop
 *
 * Makes pageable H2D and D2H copies (synchronous, asynchronous on a stream,
 * on the per-thread stream both as stream 0 of a _ptsz function and as
 * CU_STREAM_PER_THREAD of a legacy one, cuMemcpyAsync), a cross-device copy
 * there and back when there are two devices (no peer access: staged), and a
 * cuCtxSynchronize_v2. Checks every byte, every return code, and that the
 * current context is the one the program made current. Prints "ok" and exits
 * 0, or says what went wrong and exits 1. Built over fakecuda (CI) and over
 * the real driver (make gpu-test). */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* the functions the program uses; [0] legacy, [1] per-thread */
static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_count)(int *);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_create)(CUcontext *, unsigned, CUdevice);
    CUresult (*ctx_destroy)(CUcontext);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*ctx_get)(CUcontext *);
    CUresult (*ctx_sync)(CUcontext);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_sync[2])(CUstream);
    CUresult (*htod[2])(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh[2])(void *, CUdeviceptr, size_t);
    CUresult (*htod_async[2])(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*dtoh_async[2])(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*copy_async[2])(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*peer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
    CUresult (*peer_async)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
    CUresult (*enable_peer)(CUcontext, unsigned int);
} cu;

static int failures;

#define CHECK(call)                                                                          \
    do {                                                                                     \
        CUresult rc_ = (call);                                                               \
        if (rc_ != CUDA_SUCCESS) {                                                           \
            fprintf(stderr, "%s:%d %s: CUresult %d\n", __FILE__, __LINE__, #call, (int)rc_); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static getproc_fn getproc;       /* style driver */
static getproc_v2_fn getproc_v2; /* style static */

/* The newest variant CUDA `version` knows, with its ABI */
static void take_version(const char *name, int version, cuuint64_t flags, void *slot)
{
    CUresult rc;
    if (getproc_v2 != NULL) {
        CUdriverProcAddressQueryResult status;
        rc = getproc_v2(name, (void **)slot, version, flags, &status);
    } else {
        rc = getproc(name, (void **)slot, version, flags);
    }
    if (rc != CUDA_SUCCESS || *(void **)slot == NULL) {
        fprintf(stderr, "cuGetProcAddress(%s): CUresult %d\n", name, (int)rc);
        exit(1);
    }
}

static void take(const char *name, cuuint64_t flags, void *slot)
{
    take_version(name, 13000, flags, slot);
}

#ifdef DRV_LINKED
/* the exported symbols themselves, each under a name of its own (cuda.h maps
 * some names by macro to other versions) */
#define LINKED(ret, local, params, symbol) extern ret local params __asm__(symbol);
LINKED(CUresult, lk_init, (unsigned), "cuInit")
LINKED(CUresult, lk_device_get, (CUdevice *, int), "cuDeviceGet")
LINKED(CUresult, lk_device_count, (int *), "cuDeviceGetCount")
LINKED(CUresult, lk_primary_retain, (CUcontext *, CUdevice), "cuDevicePrimaryCtxRetain")
LINKED(CUresult, lk_ctx_create, (CUcontext *, unsigned, CUdevice), "cuCtxCreate_v2")
LINKED(CUresult, lk_ctx_destroy, (CUcontext), "cuCtxDestroy_v2")
LINKED(CUresult, lk_ctx_set, (CUcontext), "cuCtxSetCurrent")
LINKED(CUresult, lk_ctx_get, (CUcontext *), "cuCtxGetCurrent")
LINKED(CUresult, lk_enable_peer, (CUcontext, unsigned), "cuCtxEnablePeerAccess")
LINKED(CUresult, lk_ctx_sync, (CUcontext), "cuCtxSynchronize_v2")
LINKED(CUresult, lk_mem_alloc, (CUdeviceptr *, size_t), "cuMemAlloc_v2")
LINKED(CUresult, lk_mem_free, (CUdeviceptr), "cuMemFree_v2")
LINKED(CUresult, lk_stream_create, (CUstream *, unsigned), "cuStreamCreate")
LINKED(CUresult, lk_stream_destroy, (CUstream), "cuStreamDestroy_v2")
LINKED(CUresult, lk_stream_sync, (CUstream), "cuStreamSynchronize")
LINKED(CUresult, lk_stream_sync_ptsz, (CUstream), "cuStreamSynchronize_ptsz")
LINKED(CUresult, lk_htod, (CUdeviceptr, const void *, size_t), "cuMemcpyHtoD_v2")
LINKED(CUresult, lk_htod_ptds, (CUdeviceptr, const void *, size_t), "cuMemcpyHtoD_v2_ptds")
LINKED(CUresult, lk_dtoh, (void *, CUdeviceptr, size_t), "cuMemcpyDtoH_v2")
LINKED(CUresult, lk_dtoh_ptds, (void *, CUdeviceptr, size_t), "cuMemcpyDtoH_v2_ptds")
LINKED(CUresult, lk_htod_async, (CUdeviceptr, const void *, size_t, CUstream), "cuMemcpyHtoDAsync_v2")
LINKED(CUresult, lk_htod_async_ptsz, (CUdeviceptr, const void *, size_t, CUstream), "cuMemcpyHtoDAsync_v2_ptsz")
LINKED(CUresult, lk_dtoh_async, (void *, CUdeviceptr, size_t, CUstream), "cuMemcpyDtoHAsync_v2")
LINKED(CUresult, lk_dtoh_async_ptsz, (void *, CUdeviceptr, size_t, CUstream), "cuMemcpyDtoHAsync_v2_ptsz")
LINKED(CUresult, lk_copy_async, (CUdeviceptr, CUdeviceptr, size_t, CUstream), "cuMemcpyAsync")
LINKED(CUresult, lk_copy_async_ptsz, (CUdeviceptr, CUdeviceptr, size_t, CUstream), "cuMemcpyAsync_ptsz")
LINKED(CUresult, lk_peer, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t), "cuMemcpyPeer")
LINKED(CUresult, lk_peer_async, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream),
       "cuMemcpyPeerAsync")
#undef LINKED

static void resolve_linked(void)
{
    cu.init = lk_init;
    cu.device_get = lk_device_get;
    cu.device_count = lk_device_count;
    cu.primary_retain = lk_primary_retain;
    cu.ctx_create = lk_ctx_create;
    cu.ctx_destroy = lk_ctx_destroy;
    cu.ctx_set = lk_ctx_set;
    cu.ctx_get = lk_ctx_get;
    cu.enable_peer = lk_enable_peer;
    cu.ctx_sync = lk_ctx_sync;
    cu.mem_alloc = lk_mem_alloc;
    cu.mem_free = lk_mem_free;
    cu.stream_create = lk_stream_create;
    cu.stream_destroy = lk_stream_destroy;
    cu.stream_sync[0] = lk_stream_sync;
    cu.stream_sync[1] = lk_stream_sync_ptsz;
    cu.htod[0] = lk_htod;
    cu.htod[1] = lk_htod_ptds;
    cu.dtoh[0] = lk_dtoh;
    cu.dtoh[1] = lk_dtoh_ptds;
    cu.htod_async[0] = lk_htod_async;
    cu.htod_async[1] = lk_htod_async_ptsz;
    cu.dtoh_async[0] = lk_dtoh_async;
    cu.dtoh_async[1] = lk_dtoh_async_ptsz;
    cu.copy_async[0] = lk_copy_async;
    cu.copy_async[1] = lk_copy_async_ptsz;
    cu.peer = lk_peer;
    cu.peer_async = lk_peer_async;
}
#endif

static void resolve(const char *style)
{
#ifdef DRV_LINKED
    if (strcmp(style, "linked") == 0) {
        resolve_linked();
        return;
    }
#endif
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
        exit(1);
    }
    cuuint64_t flags[2] = {CU_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM};
    if (strcmp(style, "static") == 0) {
        getproc_v2_fn first = (getproc_v2_fn)dlsym(lib, "cuGetProcAddress_v2");
        if (first == NULL) {
            fprintf(stderr, "no cuGetProcAddress_v2\n");
            exit(1);
        }
        CUdriverProcAddressQueryResult status;
        CHECK(first("cuGetProcAddress", (void **)&getproc_v2, 13000, 0, &status));
        flags[0] = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    } else {
        getproc = (getproc_fn)dlsym(lib, "cuGetProcAddress");
        if (getproc == NULL) {
            fprintf(stderr, "no cuGetProcAddress\n");
            exit(1);
        }
    }
    take("cuInit", 0, &cu.init);
    take("cuDeviceGet", 0, &cu.device_get);
    take("cuDeviceGetCount", 0, &cu.device_count);
    take("cuDevicePrimaryCtxRetain", 0, &cu.primary_retain);
    take_version("cuCtxCreate", 3020, 0, &cu.ctx_create); /* _v2; 13000 gives _v4, another ABI */
    take("cuCtxDestroy", 0, &cu.ctx_destroy);
    take("cuCtxSetCurrent", 0, &cu.ctx_set);
    take("cuCtxGetCurrent", 0, &cu.ctx_get);
    take("cuCtxEnablePeerAccess", 0, &cu.enable_peer);
    take("cuCtxSynchronize", 0, &cu.ctx_sync); /* 13000: _v2, as cudaDeviceSynchronize takes it */
    take("cuMemAlloc", 0, &cu.mem_alloc);
    take("cuMemFree", 0, &cu.mem_free);
    take("cuStreamCreate", 0, &cu.stream_create);
    take("cuStreamDestroy", 0, &cu.stream_destroy);
    for (int pt = 0; pt < 2; pt++) {
        take("cuStreamSynchronize", flags[pt], &cu.stream_sync[pt]);
        take("cuMemcpyHtoD", flags[pt], &cu.htod[pt]);
        take("cuMemcpyDtoH", flags[pt], &cu.dtoh[pt]);
        take("cuMemcpyHtoDAsync", flags[pt], &cu.htod_async[pt]);
        take("cuMemcpyDtoHAsync", flags[pt], &cu.dtoh_async[pt]);
        take("cuMemcpyAsync", flags[pt], &cu.copy_async[pt]);
    }
    take("cuMemcpyPeer", flags[0], &cu.peer);
    take("cuMemcpyPeerAsync", flags[0], &cu.peer_async);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 131u + seed + (i >> 9));
}

static void expect_same(const unsigned char *a, const unsigned char *b, size_t n, const char *what)
{
    if (memcmp(a, b, n) != 0) {
        fprintf(stderr, "data wrong after %s\n", what);
        failures++;
    }
}

static void expect_current(CUcontext want, const char *after)
{
    CUcontext cur = NULL;
    CHECK(cu.ctx_get(&cur));
    if (cur != want) {
        fprintf(stderr, "current context changed by %s\n", after);
        failures++;
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s driver|static primary|created [strict|peer]\n", argv[0]);
        return 2;
    }
    int created = strcmp(argv[2], "created") == 0;
    int strict = argc > 3 && strcmp(argv[3], "strict") == 0;
    int enable_peer = argc > 3 && strcmp(argv[3], "peer") == 0; /* the peer copies go direct */
    resolve(argv[1]);
    size_t n = (size_t)4 << 20;
    int ndev = 0;
    CHECK(cu.init(0));
    CHECK(cu.device_count(&ndev));
    CUdevice dev;
    CHECK(cu.device_get(&dev, 0));
    CUcontext ctx;
    if (created) {
        CHECK(cu.ctx_create(&ctx, 0, dev));
    } else {
        CHECK(cu.primary_retain(&ctx, dev));
        CHECK(cu.ctx_set(ctx));
    }
    unsigned char *src = malloc(n), *back = malloc(n), *zeros = calloc(1, n);
    if (src == NULL || back == NULL || zeros == NULL)
        return 1;
    CUdeviceptr d;
    CUstream s;
    CHECK(cu.mem_alloc(&d, n));
    CHECK(cu.stream_create(&s, 0));

    /* synchronous, legacy: pageable H2D then D2H */
    fill(src, n, 3);
    CUresult first = cu.htod[0](d, src, n);
    if (strict) {
        free(src);
        free(back);
        free(zeros);
        if (first == CUDA_ERROR_NOT_PERMITTED) {
            puts("refused");
            return 0;
        }
        fprintf(stderr, "strict: the pageable H2D was not refused (CUresult %d)\n", (int)first);
        return 1;
    }
    CHECK(first);
    memset(back, 0, n);
    CHECK(cu.dtoh[0](back, d, n));
    expect_same(src, back, n, "cuMemcpyHtoD + cuMemcpyDtoH");

    /* synchronous, per-thread variants */
    fill(src, n, 5);
    CHECK(cu.htod[1](d, src, n));
    memset(back, 0, n);
    CHECK(cu.dtoh[1](back, d, n));
    expect_same(src, back, n, "per-thread cuMemcpyHtoD + cuMemcpyDtoH");

    /* synchronous, legacy, again: the process's first pageable copy may go to
     * the driver unchanged while the staging pool grows (on a GPU, pinning the
     * first slot costs more than the copy); the pool grows in the background,
     * 50 ms is ample for it, and this one finds it grown */
    usleep(50 * 1000);
    fill(src, n, 4);
    CHECK(cu.htod[0](d, src, n));
    memset(back, 0, n);
    CHECK(cu.dtoh[0](back, d, n));
    expect_same(src, back, n, "cuMemcpyHtoD + cuMemcpyDtoH, again");

    /* asynchronous on a stream of the context */
    fill(src, n, 7);
    CHECK(cu.htod_async[0](d, src, n, s));
    memset(back, 0, n);
    CHECK(cu.dtoh_async[0](back, d, n, s));
    CHECK(cu.stream_sync[0](s));
    expect_same(src, back, n, "cuMemcpyHtoDAsync + cuMemcpyDtoHAsync on a stream");
    expect_current(ctx, "the asynchronous copies");

    /* the per-thread stream: 0 of the per-thread variants, then
     * CU_STREAM_PER_THREAD of the legacy ones */
    fill(src, n, 9);
    CHECK(cu.htod_async[1](d, src, n, 0));
    memset(back, 0, n);
    CHECK(cu.dtoh_async[1](back, d, n, 0));
    CHECK(cu.stream_sync[1](0));
    expect_same(src, back, n, "per-thread stream 0");
    memset(back, 0, n);
    CHECK(cu.dtoh_async[0](back, d, n, CU_STREAM_PER_THREAD));
    CHECK(cu.stream_sync[0](CU_STREAM_PER_THREAD));
    expect_same(src, back, n, "CU_STREAM_PER_THREAD");

    /* cuMemcpyAsync: the pointers say the direction */
    memset(back, 0, n);
    CHECK(cu.copy_async[0]((CUdeviceptr)(uintptr_t)back, d, n, s));
    CHECK(cu.stream_sync[0](s));
    expect_same(src, back, n, "cuMemcpyAsync D2H");

    /* across devices, with device 1's primary context: there and back */
    if (ndev > 1) {
        CUdevice dev1;
        CUcontext ctx1;
        CUdeviceptr d1;
        CHECK(cu.device_get(&dev1, 1));
        CHECK(cu.primary_retain(&ctx1, dev1));
        CHECK(cu.ctx_set(ctx1));
        CHECK(cu.mem_alloc(&d1, n));
        CHECK(cu.ctx_set(ctx));
        if (enable_peer) { /* both ways, as a static runtime's cudaDeviceEnablePeerAccess does it */
            CHECK(cu.enable_peer(ctx1, 0));
            CHECK(cu.ctx_set(ctx1));
            CHECK(cu.enable_peer(ctx, 0));
            CHECK(cu.ctx_set(ctx));
        }
        CHECK(cu.peer_async(d1, ctx1, d, ctx, n, s));
        CHECK(cu.stream_sync[0](s));
        CHECK(cu.htod[0](d, zeros, n));
        CHECK(cu.peer(d, ctx, d1, ctx1, n));
        memset(back, 0, n);
        CHECK(cu.dtoh[0](back, d, n));
        expect_same(src, back, n, "cuMemcpyPeerAsync + cuMemcpyPeer there and back");
        expect_current(ctx, "the peer copies");
        CHECK(cu.ctx_set(ctx1));
        CHECK(cu.mem_free(d1));
        CHECK(cu.ctx_set(ctx));
    }
    CHECK(cu.ctx_sync(NULL));
    expect_current(ctx, "cuCtxSynchronize");
    CHECK(cu.stream_destroy(s));
    CHECK(cu.mem_free(d));
    if (created)
        CHECK(cu.ctx_destroy(ctx));
    free(src);
    free(back);
    free(zeros);
    if (failures == 0)
        puts("ok");
    return failures == 0 ? 0 : 1;
}
