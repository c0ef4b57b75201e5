/* test_fakecuda.c - the simulated runtime's model, apart from the stalls
 * (test_stalls.c) and faults (test_faults.c): devices, memory and pointer
 * attributes, byte-exact copies on every path, stream order, events, the
 * legacy and per-thread default streams, capture, argument errors. */
#include "fc_test.h"

/* --- devices and errors ------------------------------------------------------------------- */

static void test_fakecuda_devices(void **state)
{
    (void)state;
    int n = 0, d = -1, v = -1;
    CUDA_OK(cudaGetDeviceCount(&n));
    assert_int_equal(n, 2);
    CUDA_OK(cudaGetDevice(&d));
    assert_int_equal(d, 0);
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaGetDevice(&d));
    assert_int_equal(d, 1);
    CUDA_OK(cudaSetDevice(0));
    assert_int_equal(cudaSetDevice(2), cudaErrorInvalidDevice);
    assert_int_equal(cudaSetDevice(-1), cudaErrorInvalidDevice);

    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 1));
    assert_string_equal(prop.name, "fakecuda device 1");
    assert_int_equal(cudaGetDeviceProperties(&prop, 5), cudaErrorInvalidDevice);
    CUDA_OK(cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, 0));
    assert_true(v > 0);
    CUDA_OK(cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, 0));
    assert_int_equal(v, 0);
    CUDA_OK(cudaRuntimeGetVersion(&v));
    assert_int_equal(v, 13000);
    CUDA_OK(cudaDriverGetVersion(&v));
    assert_int_equal(v, 13000);
}

/* A fresh thread has device 0 current, whatever other threads chose. */
static void *get_device_fn(void *arg)
{
    cudaGetDevice(arg);
    return NULL;
}

static void test_fakecuda_current_device_is_per_thread(void **state)
{
    (void)state;
    CUDA_OK(cudaSetDevice(1));
    int d = -1;
    pthread_t t;
    pthread_create(&t, NULL, get_device_fn, &d);
    pthread_join(t, NULL);
    assert_int_equal(d, 0);
    CUDA_OK(cudaSetDevice(0));
}

static void test_fakecuda_errors(void **state)
{
    (void)state;
    assert_string_equal(cudaGetErrorName(cudaSuccess), "cudaSuccess");
    assert_string_equal(cudaGetErrorString(cudaSuccess), "no error");
    assert_string_equal(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
    assert_string_equal(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
    assert_string_equal(cudaGetErrorName(cudaErrorPeerAccessUnsupported), "cudaErrorPeerAccessUnsupported");
    assert_string_equal(cudaGetErrorName((cudaError_t)12345), "unrecognized error code");

    (void)cudaGetLastError();
    assert_int_equal(cudaSetDevice(9), cudaErrorInvalidDevice);
    assert_int_equal(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidDevice);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

static void test_fakecuda_peer_access_api(void **state)
{
    (void)state;
    int can = -1;
    CUDA_OK(cudaDeviceCanAccessPeer(&can, 0, 1));
    assert_int_equal(can, 1);
    CUDA_OK(cudaDeviceCanAccessPeer(&can, 0, 0));
    assert_int_equal(can, 0);
    assert_int_equal(cudaDeviceCanAccessPeer(&can, 0, 2), cudaErrorInvalidDevice);
    assert_int_equal(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    CUDA_OK(cudaDeviceEnablePeerAccess(1, 0));
    assert_int_equal(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    assert_int_equal(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessUnsupported);
    assert_int_equal(cudaDeviceEnablePeerAccess(1, 7), cudaErrorInvalidValue);
    CUDA_OK(cudaDeviceDisablePeerAccess(1));
    assert_int_equal(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    (void)cudaGetLastError();
}

/* --- memory --------------------------------------------------------------------------------- */

static void test_fakecuda_pointer_attributes(void **state)
{
    (void)state;
    char *d = NULL, *h = NULL, *m = malloc(4096), *r = malloc(8192);
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaMalloc((void **)&d, 1000));
    CUDA_OK(cudaMallocHost((void **)&h, 100));
    CUDA_OK(cudaHostRegister(r, 8192, cudaHostRegisterDefault));
    CUDA_OK(cudaSetDevice(0));

    struct cudaPointerAttributes a;
    CUDA_OK(cudaPointerGetAttributes(&a, d + 999));
    assert_int_equal(a.type, cudaMemoryTypeDevice);
    assert_int_equal(a.device, 1);
    assert_ptr_equal(a.devicePointer, d + 999);
    assert_null(a.hostPointer);

    CUDA_OK(cudaPointerGetAttributes(&a, h + 5));
    assert_int_equal(a.type, cudaMemoryTypeHost);
    assert_int_equal(a.device, 1); /* current at allocation */
    assert_ptr_equal(a.hostPointer, h + 5);
    assert_ptr_equal(a.devicePointer, h + 5);

    CUDA_OK(cudaPointerGetAttributes(&a, r + 8191));
    assert_int_equal(a.type, cudaMemoryTypeHost);
    assert_int_equal(a.device, 1);

    /* pageable, one past a device allocation, NULL: unregistered, device -2 */
    const void *unregistered[] = {m, r + 8192, NULL};
    for (size_t i = 0; i < 3; i++) {
        CUDA_OK(cudaPointerGetAttributes(&a, unregistered[i]));
        assert_int_equal(a.type, cudaMemoryTypeUnregistered);
        assert_int_equal(a.device, cudaInvalidDeviceId);
        assert_null(a.devicePointer);
        assert_ptr_equal(a.hostPointer, unregistered[i]);
    }
    assert_int_equal(cudaPointerGetAttributes(NULL, m), cudaErrorInvalidValue);

    void *dp = NULL;
    CUDA_OK(cudaHostGetDevicePointer(&dp, h, 0));
    assert_ptr_equal(dp, h);
    assert_int_equal(cudaHostGetDevicePointer(&dp, m, 0), cudaErrorInvalidValue);
    assert_int_equal(cudaHostGetDevicePointer(&dp, d, 0), cudaErrorInvalidValue);

    assert_int_equal(cudaHostRegister(r + 64, 64, 0), cudaErrorHostMemoryAlreadyRegistered);
    assert_int_equal(cudaHostRegister(NULL, 64, 0), cudaErrorInvalidValue);
    assert_int_equal(cudaHostUnregister(m), cudaErrorHostMemoryNotRegistered);
    CUDA_OK(cudaHostUnregister(r));
    assert_int_equal(cudaHostUnregister(r), cudaErrorHostMemoryNotRegistered);
    CUDA_OK(cudaPointerGetAttributes(&a, r));
    assert_int_equal(a.type, cudaMemoryTypeUnregistered);

    assert_int_equal(cudaFree(m), cudaErrorInvalidValue);
    assert_int_equal(cudaFree(d + 16), cudaErrorInvalidValue);
    assert_int_equal(cudaFreeHost(m), cudaErrorInvalidValue);
    CUDA_OK(cudaFree(NULL));
    CUDA_OK(cudaFreeHost(NULL));
    CUDA_OK(cudaFree(d));
    CUDA_OK(cudaFreeHost(h));
    CUDA_OK(cudaPointerGetAttributes(&a, d));
    assert_int_equal(a.type, cudaMemoryTypeUnregistered);
    free(m);
    free(r);
    (void)cudaGetLastError();
}

/* --- copies: every path lands byte-exact ---------------------------------------------------- */

enum host_kind { PAGEABLE, PINNED, REGISTERED };

static unsigned char *host_alloc(enum host_kind k, size_t n)
{
    unsigned char *p = NULL;
    if (k == PINNED) {
        CUDA_OK(cudaMallocHost((void **)&p, n));
    } else {
        p = malloc(n);
        assert_non_null(p);
        if (k == REGISTERED)
            CUDA_OK(cudaHostRegister(p, n, 0));
    }
    return p;
}

static void host_free(enum host_kind k, unsigned char *p)
{
    if (k == PINNED) {
        CUDA_OK(cudaFreeHost(p));
    } else {
        if (k == REGISTERED)
            CUDA_OK(cudaHostUnregister(p));
        free(p);
    }
}

/* H2D, D2D on device 0, D2D to device 1 (peer off, then on), D2H: each
 * sync and async, for sizes that are no multiple of anything. */
static void roundtrip(enum host_kind k, size_t n, bool async, bool peer)
{
    unsigned char *src = host_alloc(k, n), *dst = host_alloc(k, n);
    unsigned char *d0a, *d0b, *d1;
    fill_pattern(src, n, (unsigned)n);
    memset(dst, 0, n);
    CUDA_OK(cudaMalloc((void **)&d0a, n));
    CUDA_OK(cudaMalloc((void **)&d0b, n));
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaMalloc((void **)&d1, n));
    CUDA_OK(cudaSetDevice(0));
    if (peer)
        CUDA_OK(cudaDeviceEnablePeerAccess(1, 0));
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (async) {
        CUDA_OK(cudaMemcpyAsync(d0a, src, n, cudaMemcpyHostToDevice, s));
        CUDA_OK(cudaMemcpyAsync(d0b, d0a, n, cudaMemcpyDeviceToDevice, s));
        CUDA_OK(cudaMemcpyAsync(d1, d0b, n, cudaMemcpyDefault, s));
        CUDA_OK(cudaMemsetAsync(d0a, 0, n, s));
        CUDA_OK(cudaMemcpyPeerAsync(d0a, 0, d1, 1, n, s));
        CUDA_OK(cudaMemcpyAsync(dst, d0a, n, cudaMemcpyDeviceToHost, s));
        CUDA_OK(cudaStreamSynchronize(s));
    } else {
        CUDA_OK(cudaMemcpy(d0a, src, n, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(d0b, d0a, n, cudaMemcpyDeviceToDevice));
        CUDA_OK(cudaMemcpy(d1, d0b, n, cudaMemcpyDeviceToDevice));
        CUDA_OK(cudaMemset(d0a, 0, n));
        CUDA_OK(cudaMemcpyPeer(d0a, 0, d1, 1, n));
        CUDA_OK(cudaMemcpy(dst, d0a, n, cudaMemcpyDefault));
    }
    assert_memory_equal(dst, src, n);
    if (peer)
        CUDA_OK(cudaDeviceDisablePeerAccess(1));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(d0a));
    CUDA_OK(cudaFree(d0b));
    CUDA_OK(cudaFree(d1));
    host_free(k, src);
    host_free(k, dst);
}

static void test_fakecuda_copies_byte_exact(void **state)
{
    (void)state;
    const size_t sizes[] = {1, 3, 4097, (1 << 20) + 7, (3 << 20) + 1};
    struct fakecuda_stats st;
    fakecuda_reset_stats();
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int k = PAGEABLE; k <= REGISTERED; k++)
            for (int async = 0; async < 2; async++)
                roundtrip((enum host_kind)k, sizes[i], async, (i + (size_t)k + (size_t)async) % 2 == 0);
    fakecuda_stats(&st);
    assert_true(st.copies_pinned > 0);
    assert_true(st.copies_pageable > 0);
    assert_true(st.copies_d2d > 0);
    assert_true(st.copies_peer > 0);
    assert_true(st.copies_staged > 0);
    assert_true(st.memsets > 0);
}

static void test_fakecuda_copy_2d_and_overlap(void **state)
{
    (void)state;
    enum { W = 37, H = 9, SP = 50, DP = 64 };
    unsigned char src[SP * H], back[DP * H], *d;
    fill_pattern(src, sizeof src, 3);
    memset(back, 0xee, sizeof back);
    CUDA_OK(cudaMalloc((void **)&d, DP * H));
    CUDA_OK(cudaMemset(d, 0xee, DP * H));
    CUDA_OK(cudaMemcpy2D(d, DP, src, SP, W, H, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy2DAsync(back, DP, d, DP, W, H, cudaMemcpyDeviceToHost, 0));
    CUDA_OK(cudaStreamSynchronize(0));
    for (int r = 0; r < H; r++) {
        assert_memory_equal(back + r * DP, src + r * SP, W);
        assert_int_equal(back[r * DP + W], 0xee); /* the gap is left alone */
    }
    assert_int_equal(cudaMemcpy2D(d, DP, src, W - 1, W, H, cudaMemcpyHostToDevice), cudaErrorInvalidPitchValue);
    CUDA_OK(cudaMemcpy2D(d, DP, src, SP, W, 0, cudaMemcpyHostToDevice));

    /* overlapping copy inside one allocation: memmove semantics */
    unsigned char ref[DP * H];
    fill_pattern(ref, sizeof ref, 9);
    CUDA_OK(cudaMemcpy(d, ref, sizeof ref, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d + 10, d, 200, cudaMemcpyDeviceToDevice));
    CUDA_OK(cudaDeviceSynchronize());
    memmove(ref + 10, ref, 200);
    CUDA_OK(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost));
    assert_memory_equal(back, ref, sizeof ref);
    CUDA_OK(cudaFree(d));
    (void)cudaGetLastError();
}

static void test_fakecuda_copy_argument_errors(void **state)
{
    (void)state;
    char *d, *h, m[64];
    CUDA_OK(cudaMalloc((void **)&d, 256));
    CUDA_OK(cudaMallocHost((void **)&h, 256));
    assert_int_equal(cudaMemcpy(NULL, m, 16, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpy(d, NULL, 16, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    CUDA_OK(cudaMemcpy(NULL, NULL, 0, cudaMemcpyHostToDevice)); /* count 0: nothing to do */
    CUDA_OK(cudaMemcpyAsync(NULL, NULL, 0, cudaMemcpyDefault, 0));
    assert_int_equal(cudaMemcpy(d + 250, m, 16, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpy(m, d + 250, 16, cudaMemcpyDefault), cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpy(d, m, 16, (enum cudaMemcpyKind)9), cudaErrorInvalidMemcpyDirection);
    /* a side the kind calls device must not be pageable (measured on CUDA 13) */
    assert_int_equal(cudaMemcpy(m, m + 16, 16, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpy(m, d, 16, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpy(m, d, 16, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
    CUDA_OK(cudaMemcpy(m, h, 16, cudaMemcpyDeviceToHost)); /* pinned is device-accessible */
    CUDA_OK(cudaMemcpy(h, d, 16, cudaMemcpyHostToDevice)); /* a host side may be anything */
    CUDA_OK(cudaMemcpy(m, m + 16, 16, cudaMemcpyDefault));
    CUDA_OK(cudaMemcpy(m, m + 16, 16, cudaMemcpyHostToHost));
    assert_int_equal(cudaMemcpyPeer(d, 0, m, 0, 16), cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpyPeer(d, 2, d + 64, 0, 16), cudaErrorInvalidDevice);
    assert_int_equal(cudaMemcpyAsync(d, h, 16, cudaMemcpyHostToDevice, (cudaStream_t)m),
                     cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaMemset(m, 0, 16), cudaErrorInvalidValue);
    assert_int_equal(cudaMemset(NULL, 0, 16), cudaErrorInvalidValue);
    assert_int_equal(cudaMemset(d + 250, 0, 16), cudaErrorInvalidValue);
    CUDA_OK(cudaMemset(NULL, 0, 0));
    CUDA_OK(cudaMemset(h, 1, 16));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaFree(d));
    CUDA_OK(cudaFreeHost(h));
    (void)cudaGetLastError();
}

/* --- streams and events --------------------------------------------------------------------- */

static void test_fakecuda_stream_order(void **state)
{
    (void)state;
    enum { N = 4096 };
    cudaStream_t s;
    unsigned char *d, *h;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaMalloc((void **)&d, N));
    CUDA_OK(cudaMallocHost((void **)&h, N));
    CUDA_OK(cudaMemsetAsync(d, 1, N, s));
    CUDA_OK(launch_fill(s, d, 7, N, 60)); /* writes after 60 ms */
    CUDA_OK(cudaMemcpyAsync(h, d, N, cudaMemcpyDeviceToHost, s));
    assert_int_equal(cudaStreamQuery(s), cudaErrorNotReady);
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaStreamQuery(s));
    for (int i = 0; i < N; i++)
        assert_int_equal(h[i], 7);
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(d));
    CUDA_OK(cudaFreeHost(h));
}

static void test_fakecuda_stream_api(void **state)
{
    (void)state;
    cudaStream_t s, nb, pr;
    unsigned flags = 99;
    int dev = -1;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaStreamCreateWithPriority(&pr, cudaStreamDefault, -1));
    CUDA_OK(cudaSetDevice(0));
    assert_int_equal(cudaStreamCreateWithFlags(&s, 77), cudaErrorInvalidValue);
    CUDA_OK(cudaStreamGetFlags(nb, &flags));
    assert_int_equal(flags, cudaStreamNonBlocking);
    const cudaStream_t defaults[] = {0, cudaStreamLegacy, cudaStreamPerThread};
    for (int i = 0; i < 3; i++) {
        CUDA_OK(cudaStreamGetFlags(defaults[i], &flags));
        assert_int_equal(flags, 0);
        CUDA_OK(cudaStreamGetFlags_ptsz(defaults[i], &flags));
        assert_int_equal(flags, 0);
        CUDA_OK(cudaStreamGetDevice(defaults[i], &dev));
        assert_int_equal(dev, 0);
    }
    CUDA_OK(cudaStreamGetDevice(pr, &dev));
    assert_int_equal(dev, 1);
    CUDA_OK(cudaStreamGetDevice_ptsz(pr, &dev));
    assert_int_equal(dev, 1);
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaStreamDestroy(nb));
    CUDA_OK(cudaStreamDestroy(pr));
    /* destroyed and unknown handles */
    assert_int_equal(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaStreamQuery(nb), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaStreamDestroy(0), cudaErrorInvalidResourceHandle);
    assert_int_equal(launch_sleep((cudaStream_t)&flags, 1), cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();
}

/* Work queued on a stream still runs after cudaStreamDestroy. */
static void test_fakecuda_destroy_with_pending_work(void **state)
{
    (void)state;
    cudaStream_t s;
    volatile double t = 0;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(launch_sleep(s, 30));
    CUDA_OK(cudaLaunchHostFunc(s, stamp_fn, (void *)&t));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaDeviceSynchronize());
    assert_true(t > 0);
}

static void test_fakecuda_events(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaEvent_t a, b, nt, never;
    float ms = -1;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreateWithFlags(&b, cudaEventDefault));
    CUDA_OK(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming));
    CUDA_OK(cudaEventCreate(&never));
    assert_int_equal(cudaEventCreateWithFlags(&a, 0x100), cudaErrorInvalidValue);

    CUDA_OK(cudaEventQuery(never)); /* never recorded: complete */
    CUDA_OK(cudaEventSynchronize(never));
    assert_int_equal(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle);

    CUDA_OK(cudaEventRecord(a, s));
    CUDA_OK(launch_sleep(s, 80));
    CUDA_OK(cudaEventRecord(b, s));
    CUDA_OK(cudaEventRecord(nt, s));
    assert_int_equal(cudaEventQuery(b), cudaErrorNotReady);
    assert_int_equal(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady);
    double t0 = now_ms();
    CUDA_OK(cudaEventSynchronize(b));
    assert_true(now_ms() - t0 >= 50);
    CUDA_OK(cudaEventQuery(b));
    CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    assert_true(ms >= 70 && ms < 1000);
    CUDA_OK(cudaEventSynchronize(nt));
    assert_int_equal(cudaEventElapsedTime(&ms, a, nt), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaEventElapsedTime(&ms, nt, a), cudaErrorInvalidResourceHandle);

    CUDA_OK(cudaEventDestroy(a));
    assert_int_equal(cudaEventQuery(a), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaEventDestroy(a), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaEventRecord(a, s), cudaErrorInvalidResourceHandle);
    CUDA_OK(cudaEventDestroy(b));
    CUDA_OK(cudaEventDestroy(nt));
    CUDA_OK(cudaEventDestroy(never));
    CUDA_OK(cudaStreamDestroy(s));
    (void)cudaGetLastError();
}

/* Stream B waits for an event of stream A; across devices too. */
static void test_fakecuda_cross_stream_wait(void **state)
{
    (void)state;
    enum { N = 1000 };
    cudaStream_t a, b, a1;
    cudaEvent_t e, e1;
    unsigned char *d, *h;
    CUDA_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_OK(cudaMalloc((void **)&d, N));
    CUDA_OK(cudaMallocHost((void **)&h, N));
    CUDA_OK(cudaMemsetAsync(d, 0, N, a)); /* on a: the legacy stream would not order a non-blocking stream */
    CUDA_OK(launch_fill(a, d, 9, N, 80));
    CUDA_OK(cudaEventRecord(e, a));
    CUDA_OK(cudaStreamWaitEvent(b, e, 0));
    CUDA_OK(cudaMemcpyAsync(h, d, N, cudaMemcpyDeviceToHost, b));
    CUDA_OK(cudaStreamSynchronize(b));
    for (int i = 0; i < N; i++)
        assert_int_equal(h[i], 9);

    /* an event of device 1 waited on by a stream of device 0 */
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaStreamCreateWithFlags(&a1, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
    volatile double t_kernel_end = 0, t_after = 0;
    CUDA_OK(launch_sleep(a1, 80));
    CUDA_OK(cudaLaunchHostFunc(a1, stamp_fn, (void *)&t_kernel_end));
    CUDA_OK(cudaEventRecord(e1, a1));
    /* recorded only on a stream of its own device */
    assert_int_equal(cudaEventRecord(e1, b), cudaErrorInvalidResourceHandle);
    CUDA_OK(cudaSetDevice(0));
    assert_int_equal(cudaEventRecord(e1, b), cudaErrorInvalidResourceHandle);
    CUDA_OK(cudaStreamWaitEvent(b, e1, 0));
    CUDA_OK(cudaLaunchHostFunc(b, stamp_fn, (void *)&t_after));
    CUDA_OK(cudaStreamSynchronize(b));
    assert_true(t_kernel_end > 0 && t_after >= t_kernel_end);
    assert_int_equal(cudaStreamWaitEvent(b, e1, 5), cudaErrorInvalidValue);

    CUDA_OK(cudaStreamDestroy(a));
    CUDA_OK(cudaStreamDestroy(b));
    CUDA_OK(cudaStreamDestroy(a1));
    CUDA_OK(cudaEventDestroy(e));
    CUDA_OK(cudaEventDestroy(e1));
    CUDA_OK(cudaFree(d));
    CUDA_OK(cudaFreeHost(h));
    (void)cudaGetLastError();
}

/* --- default streams --------------------------------------------------------------------------- */

/* Legacy stream work waits for blocking streams, not for non-blocking ones;
 * blocking stream work waits for the legacy stream. */
static void test_fakecuda_legacy_stream(void **state)
{
    (void)state;
    cudaStream_t blk, nb;
    volatile double t_legacy = 0, t_blk = 0, t_nb = 0;
    CUDA_OK(cudaStreamCreate(&blk));
    CUDA_OK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));

    double t0 = now_ms();
    CUDA_OK(launch_sleep(blk, 150));
    CUDA_OK(cudaLaunchHostFunc(0, stamp_fn, (void *)&t_legacy));
    CUDA_OK(cudaDeviceSynchronize());
    assert_true(t_legacy - t0 >= 120);

    t0 = now_ms();
    CUDA_OK(launch_sleep(nb, 150));
    CUDA_OK(cudaLaunchHostFunc(cudaStreamLegacy, stamp_fn, (void *)&t_legacy));
    CUDA_OK(cudaStreamSynchronize(0));
    assert_true(t_legacy - t0 < 60);
    CUDA_OK(cudaDeviceSynchronize());

    t0 = now_ms();
    CUDA_OK(launch_sleep(0, 150));
    CUDA_OK(cudaLaunchHostFunc(blk, stamp_fn, (void *)&t_blk));
    CUDA_OK(cudaLaunchHostFunc(nb, stamp_fn, (void *)&t_nb));
    CUDA_OK(cudaDeviceSynchronize());
    assert_true(t_blk - t0 >= 120);
    assert_true(t_nb - t0 < 60);

    /* the legacy stream of device 1 ignores device 0's streams */
    t0 = now_ms();
    CUDA_OK(launch_sleep(blk, 150));
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaLaunchHostFunc(0, stamp_fn, (void *)&t_legacy));
    CUDA_OK(cudaStreamSynchronize(0));
    assert_true(t_legacy - t0 < 60);
    CUDA_OK(cudaSetDevice(0));

    /* cudaStreamSynchronize(0) waits for the blocking streams too */
    t0 = now_ms();
    CUDA_OK(cudaStreamSynchronize(0));
    assert_true(now_ms() - t0 >= 60);
    CUDA_OK(cudaStreamDestroy(blk));
    CUDA_OK(cudaStreamDestroy(nb));
}

struct ptds_arg {
    double t_done;
    cudaError_t err;
};

static void *ptds_thread(void *p)
{
    struct ptds_arg *a = p;
    a->err = launch_sleep(cudaStreamPerThread, 150);
    if (a->err == cudaSuccess)
        a->err = cudaStreamSynchronize_ptsz(0);
    a->t_done = now_ms();
    return NULL;
}

/* Each thread has its own per-thread default stream: blocking with respect
 * to the legacy stream, independent of other threads' ones. */
static void test_fakecuda_per_thread_stream(void **state)
{
    (void)state;
    struct ptds_arg a[2] = {{0, cudaErrorUnknown}, {0, cudaErrorUnknown}};
    pthread_t t[2];
    double t0 = now_ms();
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, ptds_thread, &a[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(a[i].err, cudaSuccess);
        assert_true(a[i].t_done - t0 < 280); /* concurrent, not 300 ms in a row */
    }

    /* 0 in a _ptsz entry is this thread's stream; cudaStreamPerThread too */
    volatile double t_ptds = 0;
    t0 = now_ms();
    CUDA_OK(cudaLaunchKernel_ptsz((const void *)sleep_kernel, one, one, (void *[]){&(double){100e3}}, 0, 0));
    /* the legacy stream counts blocking streams' work in (measured) */
    assert_int_equal(cudaStreamQuery(0), cudaErrorNotReady);
    assert_int_equal(cudaStreamQuery_ptsz(0), cudaErrorNotReady);
    assert_int_equal(cudaStreamQuery(cudaStreamPerThread), cudaErrorNotReady);
    CUDA_OK(cudaStreamSynchronize_ptsz(0));
    assert_true(now_ms() - t0 >= 70);

    /* its work waits for earlier legacy work */
    CUDA_OK(launch_sleep(0, 100));
    t0 = now_ms();
    CUDA_OK(cudaLaunchHostFunc_ptsz(0, stamp_fn, (void *)&t_ptds));
    CUDA_OK(cudaStreamSynchronize_ptsz(0));
    assert_true(t_ptds - t0 >= 70);

    unsigned char *d, h[64], back[64];
    fill_pattern(h, sizeof h, 5);
    CUDA_OK(cudaMalloc((void **)&d, sizeof h));
    CUDA_OK(cudaMemcpy_ptds(d, h, sizeof h, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpyAsync_ptsz(back, d, sizeof h, cudaMemcpyDeviceToHost, 0));
    CUDA_OK(cudaStreamSynchronize_ptsz(0));
    assert_memory_equal(back, h, sizeof h);
    CUDA_OK(cudaMemset_ptds(d, 3, sizeof h));
    CUDA_OK(cudaMemsetAsync_ptsz(d, 4, 8, 0));
    CUDA_OK(cudaMemcpy2DAsync_ptsz(back, 8, d, 8, 8, 8, cudaMemcpyDeviceToHost, cudaStreamPerThread));
    CUDA_OK(cudaStreamSynchronize(cudaStreamPerThread));
    assert_int_equal(back[0], 4);
    assert_int_equal(back[8], 3);
    CUDA_OK(cudaMemcpy2D_ptds(d, 8, h, 8, 8, 8, cudaMemcpyHostToDevice));
    CUDA_OK(cudaFree(d));
}

static void CUDART_CB callback_fn(cudaStream_t s, cudaError_t status, void *arg)
{
    (void)s;
    *(cudaError_t *)arg = status;
}

static void test_fakecuda_host_functions(void **state)
{
    (void)state;
    cudaStream_t s;
    volatile double t1 = 0, t2 = 0;
    cudaError_t cb_status = cudaErrorUnknown;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(launch_sleep(s, 40));
    CUDA_OK(cudaLaunchHostFunc(s, stamp_fn, (void *)&t1));
    CUDA_OK(launch_sleep(s, 20));
    CUDA_OK(cudaLaunchHostFunc_ptsz(s, stamp_fn, (void *)&t2));
    CUDA_OK(cudaStreamAddCallback(s, callback_fn, &cb_status, 0));
    assert_int_equal(cudaStreamAddCallback(s, callback_fn, &cb_status, 1), cudaErrorInvalidValue);
    assert_int_equal(cudaLaunchHostFunc(s, NULL, NULL), cudaErrorInvalidValue);
    CUDA_OK(cudaStreamSynchronize(s));
    assert_true(t1 > 0 && t2 - t1 >= 15);
    assert_int_equal(cb_status, cudaSuccess);
    CUDA_OK(cudaStreamDestroy(s));
    assert_int_equal(cudaLaunchKernel(NULL, one, one, NULL, 0, 0), cudaErrorInvalidDeviceFunction);
    assert_int_equal(cudaLaunchKernel((const void *)sleep_kernel, (dim3){0, 1, 1}, one, NULL, 0, 0),
                     cudaErrorInvalidConfiguration);
    (void)cudaGetLastError();
}

/* Kernel arguments are copied at launch for registered kernels. */
static void test_fakecuda_kernel_args_copied(void **state)
{
    (void)state;
    enum { N = 256 };
    cudaStream_t s;
    unsigned char *d, h[N];
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaMalloc((void **)&d, N));
    CUDA_OK(launch_sleep(s, 30));
    {
        void *dst = d;
        int value = 0x5a;
        size_t n = N;
        double us = 0;
        void *args[] = {&dst, &value, &n, &us};
        CUDA_OK(cudaLaunchKernel((const void *)fill_kernel, one, one, args, 0, s));
        value = 0; /* the launch already took the values */
        dst = NULL;
    }
    CUDA_OK(cudaMemcpyAsync(h, d, N, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++)
        assert_int_equal(h[i], 0x5a);
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(d));
}

/* Many streams at once (the shim makes its own): no deadlock, workers come
 * and go. */
static void test_fakecuda_many_streams(void **state)
{
    (void)state;
    enum { N = 96 };
    cudaStream_t s[N];
    cudaEvent_t e[N];
    double t0 = now_ms();
    for (int i = 0; i < N; i++) {
        CUDA_OK(cudaStreamCreateWithFlags(&s[i], i % 2 ? cudaStreamNonBlocking : cudaStreamDefault));
        CUDA_OK(cudaEventCreateWithFlags(&e[i], cudaEventDisableTiming));
        CUDA_OK(launch_sleep(s[i], 50));
        if (i > 0)
            CUDA_OK(cudaStreamWaitEvent(s[i], e[i - 1], 0));
        CUDA_OK(cudaEventRecord(e[i], s[i]));
    }
    CUDA_OK(cudaStreamSynchronize(s[N - 1]));
    for (int i = 0; i < N; i++)
        CUDA_OK(cudaEventQuery(e[i]));
    assert_true(now_ms() - t0 < 1500); /* the 50 ms kernels ran side by side */
    for (int i = 0; i < N; i++) {
        CUDA_OK(cudaStreamDestroy(s[i]));
        CUDA_OK(cudaEventDestroy(e[i]));
    }
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    assert_true(st.workers_running >= 0);
}

/* cudaFree, cudaFreeHost and cudaHostUnregister wait for the device's work;
 * cudaMallocHost and cudaHostRegister do not (measured on CUDA 13.0). */
static void test_fakecuda_implicit_sync(void **state)
{
    (void)state;
    cudaStream_t s;
    void *d, *h;
    char *r = malloc(4096);
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc(&d, 16));
    CUDA_OK(launch_sleep(s, 120));
    double t0 = now_ms();
    CUDA_OK(cudaMallocHost(&h, 16));
    CUDA_OK(cudaHostRegister(r, 4096, 0));
    assert_true(now_ms() - t0 < 60);
    CUDA_OK(cudaFree(d));
    assert_true(now_ms() - t0 >= 90);
    CUDA_OK(launch_sleep(s, 120));
    t0 = now_ms();
    CUDA_OK(cudaHostUnregister(r));
    assert_true(now_ms() - t0 >= 90);
    /* another device's work is not waited for */
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(launch_sleep(0, 200));
    CUDA_OK(cudaSetDevice(0));
    t0 = now_ms();
    CUDA_OK(cudaFreeHost(h));
    assert_true(now_ms() - t0 < 60);
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaStreamDestroy(s));
    free(r);
}

/* --- capture ----------------------------------------------------------------------------------- */

static void test_fakecuda_capture(void **state)
{
    (void)state;
    cudaStream_t s, other;
    cudaEvent_t e, plain;
    cudaGraph_t g = (cudaGraph_t)1;
    enum cudaStreamCaptureStatus st;
    volatile double t = 0;
    unsigned char *d, h[16] = {0};
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreate(&e));
    CUDA_OK(cudaEventCreate(&plain));
    CUDA_OK(cudaMalloc((void **)&d, 16));
    CUDA_OK(cudaMemset(d, 0x11, 16));
    CUDA_OK(cudaDeviceSynchronize());

    assert_int_equal(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorIllegalState);
    CUDA_OK(cudaStreamIsCapturing(s, &st));
    assert_int_equal(st, cudaStreamCaptureStatusNone);

    /* work issued to a capturing stream does not run */
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
    CUDA_OK(cudaStreamIsCapturing(s, &st));
    assert_int_equal(st, cudaStreamCaptureStatusActive);
    CUDA_OK(cudaStreamIsCapturing_ptsz(s, &st));
    assert_int_equal(st, cudaStreamCaptureStatusActive);
    CUDA_OK(launch_fill(s, d, 0x22, 16, 0));
    CUDA_OK(cudaMemsetAsync(d, 0x33, 16, s));
    CUDA_OK(cudaMemcpyAsync(h, d, 16, cudaMemcpyDeviceToHost, s)); /* pageable D2H: not held either */
    CUDA_OK(cudaLaunchHostFunc(s, stamp_fn, (void *)&t));
    CUDA_OK(cudaEventRecord(e, s));
    /* waiting on an event recorded in the capture joins it */
    CUDA_OK(cudaStreamWaitEvent(other, e, 0));
    CUDA_OK(cudaStreamIsCapturing(other, &st));
    assert_int_equal(st, cudaStreamCaptureStatusActive);
    /* relaxed mode allows what global mode forbids, except a captured event */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    CUDA_OK(cudaThreadExchangeStreamCaptureMode(&mode));
    assert_int_equal(mode, cudaStreamCaptureModeGlobal);
    CUDA_OK(cudaEventQuery(plain));
    assert_int_equal(cudaEventQuery(e), cudaErrorCapturedEvent);
    CUDA_OK(cudaThreadExchangeStreamCaptureMode(&mode));
    assert_int_equal(mode, cudaStreamCaptureModeRelaxed);
    /* only the origin ends it (ending elsewhere invalidates it); joined
     * streams leave it with the origin */
    assert_int_equal(cudaStreamEndCapture(other, &g), cudaErrorStreamCaptureUnmatched);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    CUDA_OK(cudaStreamIsCapturing(other, &st));
    assert_int_equal(st, cudaStreamCaptureStatusNone);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(h, d, 16, cudaMemcpyDeviceToHost));
    assert_int_equal(h[0], 0x11);
    assert_true(t == 0);

    /* a clean capture ends with success and a graph (test_capture.c
     * replays graphs); nothing ran */
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CUDA_OK(cudaMemsetAsync(d, 0x44, 16, s));
    CUDA_OK(cudaStreamEndCapture(s, &g));
    assert_non_null(g);
    CUDA_OK(cudaGraphDestroy(g));

    /* in global mode, syncing, querying and pinned allocation are forbidden
     * and invalidate the capture */
    void *p;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    assert_int_equal(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    CUDA_OK(cudaStreamIsCapturing(s, &st));
    assert_int_equal(st, cudaStreamCaptureStatusInvalidated);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    const int forbidden = 4;
    for (int i = 0; i < forbidden; i++) {
        CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        cudaError_t err = i == 0   ? cudaStreamQuery(other)
                          : i == 1 ? cudaEventQuery(plain)
                          : i == 2 ? cudaMallocHost(&p, 16)
                                   : cudaDeviceSynchronize();
        assert_int_equal(err, cudaErrorStreamCaptureUnsupported);
        assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    }
    CUDA_OK(cudaMemcpy(h, d, 16, cudaMemcpyDeviceToHost));
    assert_int_equal(h[0], 0x11);

    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaStreamDestroy(other));
    CUDA_OK(cudaEventDestroy(e));
    CUDA_OK(cudaEventDestroy(plain));
    CUDA_OK(cudaFree(d));
    (void)cudaGetLastError();
}

struct capture_thread_arg {
    cudaStream_t s;
    enum cudaStreamCaptureMode mode;
    cudaError_t query;
};

static void *query_other_stream(void *p)
{
    struct capture_thread_arg *a = p;
    enum cudaStreamCaptureMode mode = a->mode;
    cudaThreadExchangeStreamCaptureMode(&mode);
    a->query = cudaStreamQuery(a->s);
    return NULL;
}

/* Another thread in global mode is forbidden unsafe calls during a global
 * capture; in thread-local or relaxed mode it is not. */
static void test_fakecuda_capture_other_thread(void **state)
{
    (void)state;
    cudaStream_t s, other;
    cudaGraph_t g;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    const enum cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                                cudaStreamCaptureModeRelaxed};
    for (int i = 0; i < 3; i++) {
        struct capture_thread_arg a = {other, modes[i], cudaErrorUnknown};
        pthread_t t;
        CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        pthread_create(&t, NULL, query_other_stream, &a);
        pthread_join(t, NULL);
        cudaError_t end = cudaStreamEndCapture(s, &g);
        if (i == 0) {
            assert_int_equal(a.query, cudaErrorStreamCaptureUnsupported);
            assert_int_equal(end, cudaErrorStreamCaptureInvalidated);
        } else {
            assert_int_equal(a.query, cudaSuccess);
            assert_int_equal(end, cudaSuccess);
        }
    }
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaStreamDestroy(other));
    (void)cudaGetLastError();
}

/* --- process life ------------------------------------------------------------------------------ */

/* Exiting while workers run a long kernel: the process ends at once. */
static int child_exit_while_busy(void)
{
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess || launch_sleep(s, 10000) != cudaSuccess ||
        launch_sleep(0, 10000) != cudaSuccess)
        return 2;
    sleep_ms(20);
    return 0;
}

static void test_fakecuda_exit_while_busy(void **state)
{
    (void)state;
    double t0 = now_ms();
    assert_int_equal(run_child("exit_while_busy", 5000), 0);
    assert_true(now_ms() - t0 < 3000);
}

/* In the child of a fork() after CUDA was used, every call fails with
 * cudaErrorInitializationError, as with the real runtime; it does not hang. */
static void test_fakecuda_forked_child(void **state)
{
    (void)state;
    CUDA_OK(launch_sleep(0, 100)); /* workers busy at the fork */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        void *p;
        cudaStream_t s;
        int ok = cudaMalloc(&p, 16) == cudaErrorInitializationError &&
                 cudaStreamCreate(&s) == cudaErrorInitializationError &&
                 cudaDeviceSynchronize() == cudaErrorInitializationError &&
                 cudaGetLastError() == cudaErrorInitializationError;
        _exit(ok ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    CUDA_OK(cudaDeviceSynchronize()); /* the parent goes on */
}

int main(int argc, char **argv)
{
    register_test_kernels();
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        if (strcmp(argv[2], "exit_while_busy") == 0)
            return child_exit_while_busy();
        return 127;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fakecuda_devices),
        cmocka_unit_test(test_fakecuda_current_device_is_per_thread),
        cmocka_unit_test(test_fakecuda_errors),
        cmocka_unit_test(test_fakecuda_peer_access_api),
        cmocka_unit_test(test_fakecuda_pointer_attributes),
        cmocka_unit_test(test_fakecuda_copies_byte_exact),
        cmocka_unit_test(test_fakecuda_copy_2d_and_overlap),
        cmocka_unit_test(test_fakecuda_copy_argument_errors),
        cmocka_unit_test(test_fakecuda_stream_order),
        cmocka_unit_test(test_fakecuda_stream_api),
        cmocka_unit_test(test_fakecuda_destroy_with_pending_work),
        cmocka_unit_test(test_fakecuda_events),
        cmocka_unit_test(test_fakecuda_cross_stream_wait),
        cmocka_unit_test(test_fakecuda_legacy_stream),
        cmocka_unit_test(test_fakecuda_per_thread_stream),
        cmocka_unit_test(test_fakecuda_host_functions),
        cmocka_unit_test(test_fakecuda_kernel_args_copied),
        cmocka_unit_test(test_fakecuda_many_streams),
        cmocka_unit_test(test_fakecuda_implicit_sync),
        cmocka_unit_test(test_fakecuda_capture),
        cmocka_unit_test(test_fakecuda_capture_other_thread),
        cmocka_unit_test(test_fakecuda_exit_while_busy),
        cmocka_unit_test(test_fakecuda_forked_child),
    };
    return US_RUN_TESTS("test_fakecuda", tests, NULL, NULL);
}
