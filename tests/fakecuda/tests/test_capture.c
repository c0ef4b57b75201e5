/* test_capture.c - fakecuda's graphs: capture records instead of running,
 * replays in order, joins through events, graph memory nodes, stream-ordered
 * allocation, and the calls a capture forbids. */
#include "fc_test.h"

static int setup(void **state)
{
    (void)state;
    register_test_kernels();
    return 0;
}

static bool is_device_memory(const void *p)
{
    struct cudaPointerAttributes attr;
    return cudaPointerGetAttributes(&attr, p) == cudaSuccess && attr.type == cudaMemoryTypeDevice;
}

/* Nothing captured runs; every launch replays kernels, memsets, copies and
 * host functions in issue order, with the kernel arguments of capture time. */
static void test_capture_replays_in_order(void **state)
{
    (void)state;
    cudaStream_t s;
    char *d, *pinned;
    double stamp = 0;
    cudaGraph_t g;
    cudaGraphExec_t x;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc((void **)&d, 64));
    CUDA_OK(cudaMallocHost((void **)&pinned, 64));
    CUDA_OK(cudaMemset(d, 0, 64));
    CUDA_OK(cudaDeviceSynchronize());
    memset(pinned, 0, 64);

    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    int value = 0x5a;
    CUDA_OK(launch_fill(s, d, value, 32, 1));                  /* d[0,32) = 5a */
    value = 0x77;                                              /* the kernel keeps 5a */
    CUDA_OK(cudaMemsetAsync(d + 16, 0x33, 32, s));             /* d[16,48) = 33, after it */
    CUDA_OK(cudaMemcpyAsync(pinned, d, 64, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaLaunchHostFunc(s, stamp_fn, &stamp));
    CUDA_OK(cudaStreamEndCapture(s, &g));
    CUDA_OK(cudaDeviceSynchronize());
    assert_true(stamp == 0);
    assert_int_equal(pinned[0], 0);

    CUDA_OK(cudaGraphInstantiate(&x, g, 0));
    CUDA_OK(cudaGraphDestroy(g)); /* the executable graph keeps what it needs */
    for (int round = 0; round < 3; round++) {
        memset(pinned, 0, 64);
        stamp = 0;
        CUDA_OK(cudaGraphLaunch(x, s));
        CUDA_OK(cudaStreamSynchronize(s));
        assert_true(stamp > 0);
        for (int i = 0; i < 64; i++)
            assert_int_equal((unsigned char)pinned[i], i < 16 ? 0x5a : i < 48 ? 0x33 : 0);
    }
    /* _ptsz launch on the per-thread stream */
    memset(pinned, 0, 64);
    CUDA_OK(cudaGraphLaunch_ptsz(x, 0));
    CUDA_OK(cudaStreamSynchronize_ptsz(0));
    assert_int_equal((unsigned char)pinned[20], 0x33);
    CUDA_OK(cudaGraphExecDestroy(x));
    assert_int_equal(cudaGraphExecDestroy(x), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaGraphDestroy(g), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaGraphLaunch(x, s), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaGraphInstantiate(&x, NULL, 0), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(d));
    CUDA_OK(cudaFreeHost(pinned));
}

/* A captured pageable H2D reads its source at each launch (outside a
 * capture, a small one reads it at the call). */
static void test_capture_copy_reads_source_at_launch(void **state)
{
    (void)state;
    cudaStream_t s;
    unsigned char src[256], back[256], *d;
    cudaGraph_t g;
    cudaGraphExec_t x;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc((void **)&d, sizeof src));
    fill_pattern(src, sizeof src, 1);
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaMemcpyAsync(d, src, sizeof src, cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaStreamEndCapture(s, &g));
    CUDA_OK(cudaGraphInstantiate(&x, g, 0));
    for (unsigned seed = 2; seed < 4; seed++) {
        fill_pattern(src, sizeof src, seed);
        CUDA_OK(cudaGraphLaunch(x, s));
        CUDA_OK(cudaStreamSynchronize(s));
        CUDA_OK(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost));
        assert_memory_equal(back, src, sizeof src);
    }
    CUDA_OK(cudaGraphExecDestroy(x));
    CUDA_OK(cudaGraphDestroy(g));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(d));
}

/* Forks and joins through events; a joined stream may be destroyed before
 * the capture ends (its work stays in the graph); a stream not joined back
 * fails the capture with cudaErrorStreamCaptureUnjoined. */
static void test_capture_fork_join(void **state)
{
    (void)state;
    cudaStream_t s1, s2;
    cudaEvent_t fork_ev, join_ev;
    char *d, h[32];
    cudaGraph_t g;
    cudaGraphExec_t x;
    enum cudaStreamCaptureStatus st;
    CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc((void **)&d, 32));
    CUDA_OK(cudaMemset(d, 0, 32));
    CUDA_OK(cudaDeviceSynchronize());

    CUDA_OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreate(&fork_ev));
    CUDA_OK(cudaEventCreate(&join_ev));
    CUDA_OK(cudaMemsetAsync(d, 1, 16, s1));
    CUDA_OK(cudaEventRecord(fork_ev, s1));
    CUDA_OK(cudaStreamWaitEvent(s2, fork_ev, 0));
    CUDA_OK(cudaStreamIsCapturing(s2, &st));
    assert_int_equal(st, cudaStreamCaptureStatusActive);
    CUDA_OK(cudaMemsetAsync(d + 16, 2, 16, s2));
    CUDA_OK(cudaEventRecord(join_ev, s2));
    CUDA_OK(cudaStreamWaitEvent(s1, join_ev, 0));
    CUDA_OK(cudaStreamDestroy(s2));
    CUDA_OK(cudaEventDestroy(fork_ev));
    CUDA_OK(cudaEventDestroy(join_ev));
    CUDA_OK(cudaStreamIsCapturing(s1, &st));
    assert_int_equal(st, cudaStreamCaptureStatusActive);
    CUDA_OK(cudaStreamEndCapture(s1, &g));
    CUDA_OK(cudaGraphInstantiate(&x, g, 0));
    CUDA_OK(cudaGraphLaunch(x, s1));
    CUDA_OK(cudaStreamSynchronize(s1));
    CUDA_OK(cudaMemcpy(h, d, 32, cudaMemcpyDeviceToHost));
    assert_int_equal(h[0], 1);
    assert_int_equal(h[31], 2);
    CUDA_OK(cudaGraphExecDestroy(x));
    CUDA_OK(cudaGraphDestroy(g));

    /* not joined back */
    CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreate(&fork_ev));
    CUDA_OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaEventRecord(fork_ev, s1));
    CUDA_OK(cudaStreamWaitEvent(s2, fork_ev, 0));
    CUDA_OK(cudaMemsetAsync(d, 3, 16, s2));
    g = (cudaGraph_t)&g;
    assert_int_equal(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureUnjoined);
    assert_null(g);
    CUDA_OK(cudaStreamIsCapturing(s2, &st));
    assert_int_equal(st, cudaStreamCaptureStatusNone);

    /* an event of another capture cannot be waited for */
    cudaStream_t s3;
    CUDA_OK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaStreamBeginCapture(s3, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaEventRecord(fork_ev, s1));
    assert_int_equal(cudaStreamWaitEvent(s3, fork_ev, 0), cudaErrorStreamCaptureMerge);
    assert_int_equal(cudaStreamEndCapture(s3, &g), cudaErrorStreamCaptureInvalidated);
    assert_int_equal(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureInvalidated);
    (void)cudaGetLastError();
    CUDA_OK(cudaStreamDestroy(s1));
    CUDA_OK(cudaStreamDestroy(s2));
    CUDA_OK(cudaStreamDestroy(s3));
    CUDA_OK(cudaEventDestroy(fork_ev));
    CUDA_OK(cudaFree(d));
}

struct malloc_arg {
    enum cudaStreamCaptureMode mode;
    cudaError_t err;
};

static void *malloc_on_thread(void *p)
{
    struct malloc_arg *a = p;
    enum cudaStreamCaptureMode mode = a->mode;
    void *ptr;
    cudaThreadExchangeStreamCaptureMode(&mode);
    a->err = cudaMalloc(&ptr, 64);
    if (a->err == cudaSuccess)
        cudaFree(ptr);
    cudaThreadExchangeStreamCaptureMode(&mode);
    return NULL;
}

/* The rule measured on an H100: another thread's cudaMalloc during a global
 * capture fails with 900 and the capture ends with 901; in relaxed mode both
 * succeed; a thread-local capture minds only its own thread. A capturing
 * stream's device cannot be asked (measured: tests/capture/expected.txt,
 * global_get_device_capturing). */
static void test_capture_forbidden_calls(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaGraph_t g;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const struct {
        enum cudaStreamCaptureMode capture, caller;
        bool same_thread;
        cudaError_t call, end;
    } cases[] = {
        {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeGlobal, false, cudaErrorStreamCaptureUnsupported,
         cudaErrorStreamCaptureInvalidated},
        {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeRelaxed, false, cudaSuccess, cudaSuccess},
        {cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeGlobal, false, cudaSuccess, cudaSuccess},
        {cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeGlobal, true, cudaErrorStreamCaptureUnsupported,
         cudaErrorStreamCaptureInvalidated},
        {cudaStreamCaptureModeRelaxed, cudaStreamCaptureModeGlobal, true, cudaSuccess, cudaSuccess},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct malloc_arg a = {cases[i].caller, cudaErrorUnknown};
        CUDA_OK(cudaStreamBeginCapture(s, cases[i].capture));
        CUDA_OK(cudaMemsetAsync(NULL, 0, 0, s));
        if (cases[i].same_thread) {
            malloc_on_thread(&a);
        } else {
            pthread_t t;
            pthread_create(&t, NULL, malloc_on_thread, &a);
            pthread_join(t, NULL);
        }
        assert_int_equal(a.err, cases[i].call);
        cudaError_t end = cudaStreamEndCapture(s, &g);
        assert_int_equal(end, cases[i].end);
        if (end == cudaSuccess)
            CUDA_OK(cudaGraphDestroy(g));
    }
    int device;
    unsigned flags;
    /* asking a capturing stream its flags or device ends the capture (H100) */
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    assert_int_equal(cudaStreamGetFlags(s, &flags), cudaErrorStreamCaptureUnsupported);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    assert_int_equal(cudaStreamGetDevice(s, &device), cudaErrorStreamCaptureUnsupported);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    /* a graph launched into a capture is not modelled: refused, invalidates */
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t x;
    CUDA_OK(cudaGraphInstantiate(&x, g, 0));
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    assert_int_equal(cudaGraphLaunch(x, s), cudaErrorStreamCaptureUnsupported);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    CUDA_OK(cudaGraphExecDestroy(x));
    (void)cudaGetLastError();
    CUDA_OK(cudaStreamDestroy(s));
}

/* cudaMallocAsync in a capture: a pointer valid at once as device memory,
 * written and read by every replay; an allocation the graph does not free
 * outlives the launch and blocks the next one until it is freed (free node,
 * cudaFreeAsync or cudaFree); the memory goes with the graph's last owner. */
static void test_capture_graph_memory(void **state)
{
    (void)state;
    cudaStream_t s;
    unsigned char in[512], back[512], *d = NULL, *kept = NULL;
    cudaGraph_t g;
    cudaGraphExec_t x;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    /* allocated and freed in the graph */
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaMallocAsync((void **)&d, sizeof in, s));
    assert_non_null(d);
    assert_true(is_device_memory(d));
    CUDA_OK(cudaMemcpyAsync(d, in, sizeof in, cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaFreeAsync(d, s));
    assert_int_equal(cudaFreeAsync(in, s), cudaErrorInvalidValue); /* not a graph allocation */
    (void)cudaGetLastError();
    CUDA_OK(cudaStreamEndCapture(s, &g));
    CUDA_OK(cudaGraphInstantiate(&x, g, 0));
    CUDA_OK(cudaGraphDestroy(g));
    for (unsigned seed = 0; seed < 3; seed++) {
        fill_pattern(in, sizeof in, seed);
        memset(back, 0, sizeof back);
        CUDA_OK(cudaGraphLaunch(x, s)); /* no wait between launches: the graph frees its own */
        CUDA_OK(cudaStreamSynchronize(s));
        assert_memory_equal(in, back, sizeof in);
    }
    assert_true(is_device_memory(d));
    CUDA_OK(cudaGraphExecDestroy(x));
    CUDA_OK(cudaStreamSynchronize(s));
    assert_false(is_device_memory(d)); /* gone with the graph */

    /* allocated in the graph, freed outside it */
    fill_pattern(in, sizeof in, 9);
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaMallocAsync((void **)&kept, sizeof in, s));
    CUDA_OK(cudaMemcpyAsync(kept, in, sizeof in, cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaStreamEndCapture(s, &g));
    CUDA_OK(cudaGraphInstantiate(&x, g, 0));
    CUDA_OK(cudaGraphLaunch(x, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(back, kept, sizeof back, cudaMemcpyDeviceToHost));
    assert_memory_equal(in, back, sizeof in);
    assert_int_equal(cudaGraphLaunch(x, s), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    CUDA_OK(cudaFreeAsync(kept, s));
    CUDA_OK(cudaGraphLaunch(x, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaFree(kept)); /* cudaFree frees a graph allocation too */
    CUDA_OK(cudaGraphLaunch(x, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaGraphDestroy(g));
    assert_true(is_device_memory(kept)); /* the executable graph still owns it */
    CUDA_OK(cudaGraphExecDestroy(x));
    CUDA_OK(cudaStreamSynchronize(s));
    assert_false(is_device_memory(kept));
    CUDA_OK(cudaStreamDestroy(s));
}

/* Outside a capture: allocated at once, freed when the stream gets there. */
static void test_malloc_async_stream_order(void **state)
{
    (void)state;
    cudaStream_t s;
    unsigned char *d, in[128], back[128];
    fill_pattern(in, sizeof in, 4);
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaMallocAsync((void **)&d, sizeof in, s));
    assert_true(is_device_memory(d));
    CUDA_OK(launch_sleep(s, 30)); /* the free waits for this */
    CUDA_OK(cudaMemcpyAsync(d, in, sizeof in, cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, s));
    assert_memory_equal(in, back, sizeof in);
    CUDA_OK(launch_sleep(s, 30));
    CUDA_OK(cudaFreeAsync(d, s));
    assert_true(is_device_memory(d)); /* still queued behind the kernel */
    CUDA_OK(cudaStreamSynchronize(s));
    assert_false(is_device_memory(d));
    assert_int_equal(cudaFreeAsync(in, s), cudaErrorInvalidValue);
    CUDA_OK(cudaFreeAsync(NULL, s));
    assert_int_equal(cudaMallocAsync(NULL, 16, s), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    CUDA_OK(cudaMallocAsync_ptsz((void **)&d, 64, 0));
    CUDA_OK(cudaFreeAsync_ptsz(d, 0));
    CUDA_OK(cudaStreamSynchronize_ptsz(0));
    CUDA_OK(cudaStreamDestroy(s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_replays_in_order),
        cmocka_unit_test(test_capture_copy_reads_source_at_launch),
        cmocka_unit_test(test_capture_fork_join),
        cmocka_unit_test(test_capture_forbidden_calls),
        cmocka_unit_test(test_capture_graph_memory),
        cmocka_unit_test(test_malloc_async_stream_order),
    };
    return US_RUN_TESTS("test_capture", tests, setup, NULL);
}
