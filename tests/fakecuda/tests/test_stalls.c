/* test_stalls.c - the native stalls the simulated runtime reproduces (cases
 * A-D; E is in test_fakecuda.c), the stream-0 D2H deadlock, and the copy time
 * model. Kernels take 200 ms; "held" is asserted as >= 150 ms and "returned
 * at once" as < 50 ms, so that a loaded machine does not make them flake. */
#include "fc_test.h"

#include <cuda.h>

#define CU_OK(call) assert_int_equal((call), CUDA_SUCCESS)

#define KERNEL_MS 200.0
#define HELD_MS 150.0
#define AT_ONCE_MS 50.0

static cudaStream_t new_stream(int device)
{
    cudaStream_t s;
    CUDA_OK(cudaSetDevice(device));
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaSetDevice(0));
    return s;
}

static void *dev_alloc(int device, size_t n)
{
    void *p;
    CUDA_OK(cudaSetDevice(device));
    CUDA_OK(cudaMalloc(&p, n));
    CUDA_OK(cudaSetDevice(0));
    return p;
}

/* --- case B: pageable H2D ---------------------------------------------------------------- */

static void test_stall_pageable_h2d_small_returns_at_once(void **state)
{
    (void)state;
    const size_t sizes[] = {64 << 10, 1 << 20};
    for (int i = 0; i < 2; i++) {
        size_t n = sizes[i];
        cudaStream_t s = new_stream(0);
        unsigned char *src = malloc(n), *ref = malloc(n), *back = malloc(n), *d = dev_alloc(0, n);
        fill_pattern(src, n, 1);
        memcpy(ref, src, n);
        fakecuda_reset_stats();
        CUDA_OK(launch_sleep(s, KERNEL_MS));
        double t0 = now_ms();
        CUDA_OK(cudaMemcpyAsync(d, src, n, cudaMemcpyHostToDevice, s));
        assert_true(now_ms() - t0 < AT_ONCE_MS);
        memset(src, 0, n); /* the source was read at call time */
        CUDA_OK(cudaMemcpyAsync(back, d, n, cudaMemcpyDeviceToHost, s));
        assert_true(now_ms() - t0 >= HELD_MS); /* that one is case C */
        assert_memory_equal(back, ref, n);
        struct fakecuda_stats st;
        fakecuda_stats(&st);
        assert_int_equal(st.pageable_h2d_snapshots, 1);
        assert_int_equal(st.pageable_h2d_waits, 0);
        CUDA_OK(cudaStreamDestroy(s));
        CUDA_OK(cudaFree(d));
        free(src);
        free(ref);
        free(back);
    }
}

static void test_stall_pageable_h2d_large_holds_caller(void **state)
{
    (void)state;
    size_t n = (2 << 20) + 3;
    cudaStream_t s = new_stream(0);
    unsigned char *src = malloc(n), *back, *d = dev_alloc(0, n);
    CUDA_OK(cudaMallocHost((void **)&back, n));
    fill_pattern(src, n, 2);
    fakecuda_reset_stats();
    CUDA_OK(launch_sleep(s, KERNEL_MS));
    double t0 = now_ms();
    CUDA_OK(cudaMemcpyAsync(d, src, n, cudaMemcpyHostToDevice, s));
    double held = now_ms() - t0;
    assert_true(held >= HELD_MS);
    CUDA_OK(cudaStreamQuery(s)); /* returned with the copy done */
    CUDA_OK(cudaMemcpyAsync(back, d, n, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    assert_memory_equal(back, src, n);
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    assert_int_equal(st.pageable_h2d_waits, 1);
    assert_true(st.host_wait_us_max >= HELD_MS * 1e3);
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(d));
    CUDA_OK(cudaFreeHost(back));
    free(src);
}

/* --- case C: pageable D2H holds the caller and the API lock -------------------------------- */

struct launcher {
    cudaStream_t stream;
    double start_delay_ms;
    double latency_ms;
    cudaError_t err;
};

static void *launch_after_delay(void *p)
{
    struct launcher *l = p;
    sleep_ms(l->start_delay_ms);
    double t0 = now_ms();
    l->err = launch_sleep(l->stream, 0);
    l->latency_ms = now_ms() - t0;
    return NULL;
}

static void d2h_with_other_thread_launching(bool pinned, double *held_ms, double *launch_ms)
{
    enum { N = 1 << 16 };
    cudaStream_t s = new_stream(0), unrelated = new_stream(1);
    unsigned char *d = dev_alloc(0, N), *h;
    if (pinned)
        CUDA_OK(cudaMallocHost((void **)&h, N));
    else
        h = malloc(N);
    CUDA_OK(cudaMemset(d, 0x6b, N));
    CUDA_OK(launch_sleep(s, KERNEL_MS));
    struct launcher l = {unrelated, 50, 0, cudaErrorUnknown};
    pthread_t t;
    pthread_create(&t, NULL, launch_after_delay, &l);
    double t0 = now_ms();
    CUDA_OK(cudaMemcpyAsync(h, d, N, cudaMemcpyDeviceToHost, s));
    *held_ms = now_ms() - t0;
    if (!pinned)
        for (int i = 0; i < N; i++)
            assert_int_equal(h[i], 0x6b); /* returned with the data in place */
    pthread_join(t, NULL);
    CUDA_OK(l.err);
    *launch_ms = l.latency_ms;
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaStreamDestroy(unrelated));
    CUDA_OK(cudaFree(d));
    if (pinned)
        CUDA_OK(cudaFreeHost(h));
    else
        free(h);
}

static void test_stall_pageable_d2h_blocks_other_threads_launch(void **state)
{
    (void)state;
    double held, launch;
    fakecuda_reset_stats();
    d2h_with_other_thread_launching(false, &held, &launch);
    assert_true(held >= HELD_MS);
    /* the other thread launched 50 ms in, on another device's stream, and
     * waited for the copy to finish */
    assert_true(launch >= HELD_MS - 60);
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    assert_int_equal(st.pageable_d2h_waits, 1);
    assert_true(st.api_lock_max_hold_us >= HELD_MS * 1e3);
    assert_true(st.api_lock_max_wait_us >= (HELD_MS - 60) * 1e3);
    assert_true(st.api_lock_waits >= 1);

    /* with pinned memory neither the caller nor the other thread waits */
    fakecuda_reset_stats();
    d2h_with_other_thread_launching(true, &held, &launch);
    assert_true(held < AT_ONCE_MS);
    assert_true(launch < AT_ONCE_MS);
    fakecuda_stats(&st);
    assert_int_equal(st.pageable_d2h_waits, 0);
    assert_int_equal(st.copies_pinned, 1);
}

/* cudaMemcpy (synchronous) to pageable memory is case C as well. */
static void test_stall_sync_memcpy_d2h_pageable(void **state)
{
    (void)state;
    enum { N = 4096 };
    unsigned char *d = dev_alloc(0, N), h[N];
    CUDA_OK(launch_fill(0, d, 0x3c, N, KERNEL_MS));
    fakecuda_reset_stats();
    double t0 = now_ms();
    CUDA_OK(cudaMemcpy(h, d, N, cudaMemcpyDeviceToHost));
    assert_true(now_ms() - t0 >= HELD_MS);
    for (int i = 0; i < N; i++)
        assert_int_equal(h[i], 0x3c);
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    assert_int_equal(st.pageable_d2h_waits, 1);
    CUDA_OK(cudaFree(d));
}

/* --- the stream-0 D2H deadlock ---------------------------------------------------------------- */

struct cpu_event {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool signalled;
};

static struct cpu_event cpu_event = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};

static void CUDART_CB block_until_signalled(void *arg)
{
    struct cpu_event *e = arg;
    pthread_mutex_lock(&e->mu);
    while (!e->signalled)
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

struct deadlock_args {
    cudaStream_t irrelevant;
    bool launch;
};

static void *deadlock_thread(void *p)
{
    struct deadlock_args *a = p;
    sleep_ms(50); /* the main thread is inside its copy by then */
    if (a->launch)
        launch_sleep(a->irrelevant, 0); /* hangs: the copy holds the API lock */
    pthread_mutex_lock(&cpu_event.mu);
    cpu_event.signalled = true;
    pthread_cond_broadcast(&cpu_event.cv);
    pthread_mutex_unlock(&cpu_event.mu);
    return NULL;
}

/* The program of the stream-0 D2H deadlock as a user reported it, in a child
 * process: returns 0 when it finished. */
static int child_deadlock(bool launch, bool pinned)
{
    float *h, *d;
    cudaStream_t cpu_block, irrelevant;
    cudaEvent_t unblock;
    if (pinned)
        cudaMallocHost((void **)&h, sizeof *h);
    else
        h = malloc(sizeof *h);
    cudaMalloc((void **)&d, sizeof *d);
    cudaStreamCreateWithFlags(&cpu_block, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&irrelevant, cudaStreamNonBlocking);
    cudaEventCreate(&unblock);
    cudaLaunchHostFunc(cpu_block, block_until_signalled, &cpu_event);
    cudaEventRecord(unblock, cpu_block);
    cudaStreamWaitEvent(0, unblock, 0);
    struct deadlock_args a = {irrelevant, launch};
    pthread_t t;
    pthread_create(&t, NULL, deadlock_thread, &a);
    if (cudaMemcpyAsync(h, d, sizeof *h, cudaMemcpyDeviceToHost, 0) != cudaSuccess)
        return 2;
    pthread_join(t, NULL);
    int rc = cudaDeviceSynchronize() == cudaSuccess ? 0 : 3;
    if (pinned)
        cudaFreeHost(h);
    else
        free(h);
    cudaFree(d);
    cudaStreamDestroy(cpu_block);
    cudaStreamDestroy(irrelevant);
    cudaEventDestroy(unblock);
    return rc;
}

static void test_stall_d2h_launch_deadlock(void **state)
{
    (void)state;
    /* as reported: the launch in the other thread waits for the D2H, which
     * waits for the host function, which waits for that thread */
    assert_int_equal(run_child("deadlock", 1500), -1);
    /* without the launch, or with a pinned destination, it completes */
    assert_int_equal(run_child("deadlock_no_launch", 5000), 0);
    assert_int_equal(run_child("deadlock_pinned", 5000), 0);
}

/* --- case A: staged cross-device copies ------------------------------------------------------ */

struct staged_copy {
    cudaStream_t stream;
    void *dst, *src;
    size_t n;
    double start_delay_ms;
    double t_start, t_call, t_done; /* relative to its start */
};

static void *staged_copy_thread(void *p)
{
    struct staged_copy *c = p;
    sleep_ms(c->start_delay_ms);
    double t0 = now_ms();
    assert_int_equal(cudaMemcpyAsync(c->dst, c->src, c->n, cudaMemcpyDefault, c->stream), cudaSuccess);
    c->t_call = now_ms() - t0;
    assert_int_equal(cudaStreamSynchronize(c->stream), cudaSuccess);
    c->t_done = now_ms() - t0;
    return NULL;
}

/* Case A's stall of an independent copy: a staged copy behind a kernel on
 * stream A; another, independent staged copy on stream B issued from another
 * thread 50 ms later. */
static void independent_copies(bool peer, struct staged_copy *b, double *held_a, double *done_a)
{
    size_t n = (1 << 20) + 5;
    cudaStream_t sa = new_stream(0), sb = new_stream(0);
    unsigned char *src = dev_alloc(0, n), *src2 = dev_alloc(0, n), *dst = dev_alloc(1, n), *dst2 = dev_alloc(1, n);
    unsigned char *ref = malloc(n), *back = malloc(n);
    fill_pattern(ref, n, 4);
    CUDA_OK(cudaMemcpy(src, ref, n, cudaMemcpyHostToDevice));
    if (peer)
        CUDA_OK(cudaDeviceEnablePeerAccess(1, 0));
    *b = (struct staged_copy){sb, dst2, src2, n, 50, 0, 0, 0};
    pthread_t t;
    CUDA_OK(launch_sleep(sa, KERNEL_MS));
    double t0 = now_ms();
    pthread_create(&t, NULL, staged_copy_thread, b);
    CUDA_OK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, sa));
    *held_a = now_ms() - t0;
    CUDA_OK(cudaStreamSynchronize(sa));
    *done_a = now_ms() - t0;
    pthread_join(t, NULL);
    CUDA_OK(cudaMemcpy(back, dst, n, cudaMemcpyDeviceToHost));
    assert_memory_equal(back, ref, n);
    if (peer)
        CUDA_OK(cudaDeviceDisablePeerAccess(1));
    CUDA_OK(cudaStreamDestroy(sa));
    CUDA_OK(cudaStreamDestroy(sb));
    CUDA_OK(cudaFree(src));
    CUDA_OK(cudaFree(src2));
    CUDA_OK(cudaFree(dst));
    CUDA_OK(cudaFree(dst2));
    free(ref);
    free(back);
}

static void test_stall_staged_copy_holds_caller_and_queue(void **state)
{
    (void)state;
    struct staged_copy b;
    double held_a, done_a;
    struct fakecuda_stats st;
    fakecuda_reset_stats();
    independent_copies(false, &b, &held_a, &done_a);
    assert_true(held_a >= HELD_MS); /* the caller waited for the kernel */
    /* the independent copy queued behind it: done only after the kernel */
    assert_true(b.t_done + b.start_delay_ms >= HELD_MS);
    assert_true(b.t_call + b.start_delay_ms >= HELD_MS - 10); /* and its caller was held as well */
    fakecuda_stats(&st);
    assert_int_equal(st.copies_staged, 2);
    assert_int_equal(st.staged_waits, 2);

    /* FAKECUDA_STAGED_HOLD=0 (CUDA 13.0 on H200s): calls return at once, the
     * staging queue still delays the independent copy */
    setenv_reload("FAKECUDA_STAGED_HOLD", "0");
    independent_copies(false, &b, &held_a, &done_a);
    setenv_reload("FAKECUDA_STAGED_HOLD", NULL);
    assert_true(held_a < AT_ONCE_MS);
    assert_true(b.t_call < AT_ONCE_MS);
    assert_true(done_a >= HELD_MS);
    assert_true(b.t_done + b.start_delay_ms >= HELD_MS);
}

static void test_stall_peer_copy_is_async(void **state)
{
    (void)state;
    struct staged_copy b;
    double held_a, done_a;
    struct fakecuda_stats st;
    fakecuda_reset_stats();
    independent_copies(true, &b, &held_a, &done_a);
    assert_true(held_a < AT_ONCE_MS);
    assert_true(done_a >= HELD_MS); /* still in stream order */
    assert_true(b.t_done < AT_ONCE_MS); /* the independent copy is independent */
    fakecuda_stats(&st);
    assert_int_equal(st.copies_peer, 2);
    assert_int_equal(st.copies_staged, 0);

    /* cudaMemcpyPeerAsync: the same rules; peer access from the other side
     * counts too */
    size_t n = 1 << 20;
    cudaStream_t s = new_stream(0);
    void *src = dev_alloc(0, n), *dst = dev_alloc(1, n);
    CUDA_OK(launch_sleep(s, KERNEL_MS));
    double t0 = now_ms();
    CUDA_OK(cudaMemcpyPeerAsync(dst, 1, src, 0, n, s));
    assert_true(now_ms() - t0 >= HELD_MS);
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaDeviceEnablePeerAccess(0, 0));
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(launch_sleep(s, KERNEL_MS));
    t0 = now_ms();
    CUDA_OK(cudaMemcpyPeerAsync(dst, 1, src, 0, n, s));
    assert_true(now_ms() - t0 < AT_ONCE_MS);
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaDeviceDisablePeerAccess(0));
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(src));
    CUDA_OK(cudaFree(dst));
}

/* --- case D: same-device copies wait for the compute engine --------------------------------- */

/* When a burst of `copies` 128 KiB D2D copies is done, from its issue; the
 * kernel (if any) occupies every SM when `full`. */
static double d2d_done_after(cudaStream_t kernel_stream, bool full, cudaStream_t copy_stream, void *dst, void *src,
                             int copies)
{
    volatile double t_done = 0;
    if (kernel_stream != NULL)
        CUDA_OK(full ? launch_sleep_full(kernel_stream, 300) : launch_sleep(kernel_stream, 300));
    sleep_ms(10); /* the kernel is running */
    double t0 = now_ms();
    for (int i = 0; i < copies; i++)
        CUDA_OK(cudaMemcpyAsync((char *)dst + i * (128 << 10), (char *)src + i * (128 << 10), 128 << 10,
                                cudaMemcpyDeviceToDevice, copy_stream));
    CUDA_OK(cudaLaunchHostFunc(copy_stream, stamp_fn, (void *)&t_done));
    CUDA_OK(cudaStreamSynchronize(copy_stream));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaSetDevice(0));
    return t_done - t0;
}

/* Behind a kernel of its own context that occupies every SM a copy waits
 * until the kernel ends: no time slice within one context (measured on an
 * H200: the first burst of case_d_busy_d2d's bursts_primary_busy waited
 * 197.9 ms behind a 200 ms kernel, the old busy_d2d burst 198.0 ms). */
static void test_stall_d2d_own_context_waits_for_kernel_end(void **state)
{
    (void)state;
    setenv_reload("FAKECUDA_TIMESLICE_US", "60000"); /* a slice well before the kernel's end */
    cudaStream_t k = new_stream(0), c = new_stream(0), k1 = new_stream(1);
    void *src = dev_alloc(0, 1 << 20), *dst = dev_alloc(0, 1 << 20);
    struct fakecuda_stats st;
    fakecuda_reset_stats();
    /* a kernel on every SM, 290 ms left: the burst waits for all of it, not a slice */
    double t = d2d_done_after(k, true, c, dst, src, 8);
    assert_true(t >= 250);
    fakecuda_stats(&st);
    assert_int_equal(st.timeslice_waits, 0);
    assert_int_equal(st.kernel_end_waits, 1); /* the first copy; the rest of the burst follows it */
    assert_true(st.kernel_end_wait_us_total >= 250e3);
    t = d2d_done_after(k, true, k, dst, src, 1); /* behind it in its own stream: after it */
    assert_true(t >= 250);
    t = d2d_done_after(NULL, false, c, dst, src, 8); /* no kernel: at once */
    assert_true(t < 30);
    t = d2d_done_after(k1, true, c, dst, src, 8); /* a kernel on another device: at once */
    assert_true(t < 30);
    /* a one-block kernel of the same context leaves SMs free: the copy kernel runs beside it */
    t = d2d_done_after(k, false, c, dst, src, 8);
    assert_true(t < 30);
    setenv_reload("FAKECUDA_TIMESLICE_US", NULL);
    /* the default slice (2 ms) changes nothing: still the whole kernel */
    t = d2d_done_after(k, true, c, dst, src, 8);
    assert_true(t >= 250);
    CUDA_OK(cudaStreamDestroy(k));
    CUDA_OK(cudaStreamDestroy(c));
    CUDA_OK(cudaStreamDestroy(k1));
    CUDA_OK(cudaFree(src));
    CUDA_OK(cudaFree(dst));
}

/* Bursts repeated back to back (each synchronized) while a kernel of the
 * same context holds every SM: the first burst waits for the kernel's end,
 * the others run after it at once (measured on an H200: 10 bursts, median
 * 0.035 ms, max 197.9 ms behind a 200 ms kernel). */
static void test_stall_d2d_repeated_bursts_own_context(void **state)
{
    (void)state;
    setenv_reload("FAKECUDA_TIMESLICE_US", "20000");
    cudaStream_t k = new_stream(0), c = new_stream(0);
    void *src = dev_alloc(0, 1 << 20), *dst = dev_alloc(0, 1 << 20);
    fakecuda_reset_stats();
    double t_kernel = now_ms();
    CUDA_OK(launch_sleep_full(k, 400));
    sleep_ms(5);
    double t[4];
    for (int b = 0; b < 4; b++) {
        double t0 = now_ms();
        for (int i = 0; i < 8; i++)
            CUDA_OK(cudaMemcpyAsync((char *)dst + i * (128 << 10), (char *)src + i * (128 << 10), 128 << 10,
                                    cudaMemcpyDeviceToDevice, c));
        CUDA_OK(cudaStreamSynchronize(c));
        t[b] = now_ms() - t0;
    }
    assert_true(t[0] >= 350 && now_ms() - t_kernel >= 395); /* the first: until the kernel ended */
    for (int b = 1; b < 4; b++)
        assert_true(t[b] < 15); /* the engine is free by then */
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    assert_int_equal(st.timeslice_waits, 0);
    assert_int_equal(st.kernel_end_waits, 1);
    CUDA_OK(cudaDeviceSynchronize());
    setenv_reload("FAKECUDA_TIMESLICE_US", NULL);
    CUDA_OK(cudaStreamDestroy(k));
    CUDA_OK(cudaStreamDestroy(c));
    CUDA_OK(cudaFree(src));
    CUDA_OK(cudaFree(dst));
}

/* Bursts repeated back to back in a created context while a kernel of the
 * primary context holds every SM: each burst waits a time slice, not only
 * the first (measured on an H200: 10 bursts, 2.44 ms each, median and
 * max). */
static void test_stall_d2d_repeated_bursts_other_context(void **state)
{
    (void)state;
    setenv_reload("FAKECUDA_TIMESLICE_US", "20000");
    cudaStream_t k = new_stream(0);
    CUdevice dev;
    CUcontext primary, created;
    CU_OK(cuDeviceGet(&dev, 0));
    CU_OK(cuCtxGetCurrent(&primary));
    CU_OK(cuCtxCreate(&created, NULL, 0, dev));
    cudaStream_t c;
    CUDA_OK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    void *src, *dst;
    CUDA_OK(cudaMalloc(&src, 1 << 20));
    CUDA_OK(cudaMalloc(&dst, 1 << 20));
    fakecuda_reset_stats();
    CU_OK(cuCtxSetCurrent(primary));
    CUDA_OK(launch_sleep_full(k, 400));
    CU_OK(cuCtxSetCurrent(created));
    sleep_ms(5);
    for (int b = 0; b < 4; b++) {
        double t0 = now_ms();
        for (int i = 0; i < 8; i++)
            CUDA_OK(cudaMemcpyAsync((char *)dst + i * (128 << 10), (char *)src + i * (128 << 10), 128 << 10,
                                    cudaMemcpyDeviceToDevice, c));
        CUDA_OK(cudaStreamSynchronize(c));
        double t = now_ms() - t0;
        assert_true(t >= 15 && t < 300); /* a slice, not the kernel */
    }
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    /* one per burst: the rest of a burst runs at once; under a sanitizer the
     * next copy of a burst may be queued only after the previous one ran,
     * which gives the engine back (an extra slice, still not the kernel) */
    if (getenv("TEST_SANITIZER") == NULL)
        assert_int_equal(st.timeslice_waits, 4);
    else
        assert_true(st.timeslice_waits >= 4);
    assert_int_equal(st.kernel_end_waits, 0);
    CUDA_OK(cudaStreamDestroy(c));
    CUDA_OK(cudaFree(src));
    CUDA_OK(cudaFree(dst));
    CU_OK(cuCtxDestroy(created));
    CU_OK(cuCtxSetCurrent(primary));
    CUDA_OK(cudaDeviceSynchronize());
    setenv_reload("FAKECUDA_TIMESLICE_US", NULL);
    CUDA_OK(cudaStreamDestroy(k));
}

/* A copy in a created context waits behind any kernel of the primary one:
 * the engine runs one context at a time (case D as a user reported it). */
static void test_stall_d2d_other_context(void **state)
{
    (void)state;
    setenv_reload("FAKECUDA_TIMESLICE_US", "20000");
    cudaStream_t k = new_stream(0);
    CUdevice dev;
    CUcontext primary, created;
    CU_OK(cuDeviceGet(&dev, 0));
    CU_OK(cuCtxGetCurrent(&primary));
    CU_OK(cuCtxCreate(&created, NULL, 0, dev));
    cudaStream_t c;
    CUDA_OK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    void *src, *dst;
    CUDA_OK(cudaMalloc(&src, 1 << 20));
    CUDA_OK(cudaMalloc(&dst, 1 << 20));
    CU_OK(cuCtxSetCurrent(primary));
    CUDA_OK(launch_sleep(k, 300)); /* one block */
    sleep_ms(5);
    CU_OK(cuCtxSetCurrent(created));
    double t0 = now_ms();
    CUDA_OK(cudaMemcpyAsync(dst, src, 1 << 20, cudaMemcpyDeviceToDevice, c));
    CUDA_OK(cudaStreamSynchronize(c));
    assert_true(now_ms() - t0 >= 15);
    CUDA_OK(cudaStreamDestroy(c));
    CU_OK(cuCtxDestroy(created));
    CU_OK(cuCtxSetCurrent(primary));
    CUDA_OK(cudaDeviceSynchronize());
    setenv_reload("FAKECUDA_TIMESLICE_US", NULL);
    CUDA_OK(cudaStreamDestroy(k));
}

/* --- the time model --------------------------------------------------------------------------- */

struct timed_copy {
    void *h, *d;
    size_t n;
};

static double timed_pinned_h2d(const struct timed_copy *c)
{
    double t0 = now_ms();
    CUDA_OK(cudaMemcpy(c->d, c->h, c->n, cudaMemcpyHostToDevice));
    return now_ms() - t0;
}

static void test_stall_bandwidth_and_scale(void **state)
{
    (void)state;
    if (getenv("TEST_SANITIZER") != NULL) /* speed only: a sanitizer's memmove is several times slower */
        us_test_skip();
    struct timed_copy c = {NULL, NULL, 100 << 20}; /* 104.9 MB: 105 ms at 1 GB/s, 2 ms at 50 */
    CUDA_OK(cudaMallocHost(&c.h, c.n));
    CUDA_OK(cudaMalloc(&c.d, c.n));
    setenv_reload("FAKECUDA_BW_PINNED", "1");
    double t = timed_pinned_h2d(&c);
    assert_true(t >= 95 && t < 600);
    setenv_reload("FAKECUDA_TIME_SCALE", "2");
    t = timed_pinned_h2d(&c);
    assert_true(t >= 190 && t < 1000);
    double t_sleep = now_ms();
    fakecuda_sleep_us(20000);
    t_sleep = now_ms() - t_sleep;
    assert_true(t_sleep >= 38 && t_sleep < 300);
    setenv_reload("FAKECUDA_TIME_SCALE", NULL);
    setenv_reload("FAKECUDA_BW_PINNED", NULL);
    t = timed_pinned_h2d(&c); /* what is left is the memcpy itself */
    assert_true(t < 70);
    CUDA_OK(cudaFreeHost(c.h));
    CUDA_OK(cudaFree(c.d));
}

int main(int argc, char **argv)
{
    register_test_kernels();
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        if (strcmp(argv[2], "deadlock") == 0)
            return child_deadlock(true, false);
        if (strcmp(argv[2], "deadlock_no_launch") == 0)
            return child_deadlock(false, false);
        if (strcmp(argv[2], "deadlock_pinned") == 0)
            return child_deadlock(true, true);
        return 127;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stall_pageable_h2d_small_returns_at_once),
        cmocka_unit_test(test_stall_pageable_h2d_large_holds_caller),
        cmocka_unit_test(test_stall_pageable_d2h_blocks_other_threads_launch),
        cmocka_unit_test(test_stall_sync_memcpy_d2h_pageable),
        cmocka_unit_test(test_stall_d2h_launch_deadlock),
        cmocka_unit_test(test_stall_staged_copy_holds_caller_and_queue),
        cmocka_unit_test(test_stall_peer_copy_is_async),
        cmocka_unit_test(test_stall_d2d_own_context_waits_for_kernel_end),
        cmocka_unit_test(test_stall_d2d_repeated_bursts_own_context),
        cmocka_unit_test(test_stall_d2d_repeated_bursts_other_context),
        cmocka_unit_test(test_stall_d2d_other_context),
        cmocka_unit_test(test_stall_bandwidth_and_scale),
    };
    return US_RUN_TESTS("test_stalls", tests, NULL, NULL);
}
