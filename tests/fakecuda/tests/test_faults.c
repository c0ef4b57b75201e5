/* test_faults.c - fault injection (environment and fakecuda_set_fault),
 * asynchronous errors on a stream, and the FAKECUDA_* environment. */
#include "fc_test.h"

#include <fcntl.h>

/* main() set FAKECUDA_FAULT_HOST_ALLOC=2:1 and
 * FAKECUDA_FAULT_EVENT_CREATE=1:1:cudaErrorLaunchOutOfResources before the
 * first CUDA call. This test must run first. */
static void test_faults_from_environment(void **state)
{
    (void)state;
    void *p[3] = {NULL, NULL, NULL};
    CUDA_OK(cudaMallocHost(&p[0], 64));
    assert_int_equal(cudaHostAlloc(&p[1], 64, 0), cudaErrorMemoryAllocation);
    assert_null(p[1]);
    CUDA_OK(cudaMallocHost(&p[2], 64));
    cudaEvent_t e;
    assert_int_equal(cudaEventCreate(&e), cudaErrorLaunchOutOfResources);
    CUDA_OK(cudaEventCreate(&e));
    CUDA_OK(cudaEventDestroy(e));
    CUDA_OK(cudaFreeHost(p[0]));
    CUDA_OK(cudaFreeHost(p[2]));
    /* a reload would arm them again */
    unsetenv("FAKECUDA_FAULT_HOST_ALLOC");
    unsetenv("FAKECUDA_FAULT_EVENT_CREATE");
    (void)cudaGetLastError();
}

static void test_faults_set_fault(void **state)
{
    (void)state;
    struct fakecuda_stats before, after;
    cudaStream_t s[4];
    void *d;
    char buf[64];

    assert_int_equal(fakecuda_set_fault(FAKECUDA_FAULT_SITES, 1, 0, cudaSuccess), -1);

    /* the 3rd and every later stream creation fails */
    assert_int_equal(fakecuda_set_fault(FAKECUDA_FAULT_STREAM_CREATE, 3, 0, cudaSuccess), 0);
    fakecuda_stats(&before);
    CUDA_OK(cudaStreamCreate(&s[0]));
    CUDA_OK(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
    assert_int_equal(cudaStreamCreateWithPriority(&s[2], 0, 0), cudaErrorMemoryAllocation);
    assert_int_equal(cudaStreamCreate(&s[3]), cudaErrorMemoryAllocation);
    fakecuda_stats(&after);
    assert_int_equal(after.streams_created - before.streams_created, 2); /* failed calls made nothing */
    assert_int_equal(after.faults_injected - before.faults_injected, 2);
    fakecuda_reset_faults();
    CUDA_OK(cudaStreamCreate(&s[2]));

    /* every cudaHostRegister, with the error given */
    fakecuda_set_fault(FAKECUDA_FAULT_HOST_REGISTER, 1, 0, cudaErrorNotSupported);
    assert_int_equal(cudaHostRegister(buf, sizeof buf, 0), cudaErrorNotSupported);
    assert_int_equal(cudaHostRegister(buf, sizeof buf, 0), cudaErrorNotSupported);
    fakecuda_set_fault(FAKECUDA_FAULT_HOST_REGISTER, 0, 0, cudaSuccess); /* disarmed */
    CUDA_OK(cudaHostRegister(buf, sizeof buf, 0));
    CUDA_OK(cudaHostUnregister(buf));

    /* the next two cudaMalloc */
    fakecuda_set_fault(FAKECUDA_FAULT_MALLOC, 1, 2, cudaSuccess);
    assert_int_equal(cudaMalloc(&d, 16), cudaErrorMemoryAllocation);
    assert_int_equal(cudaMalloc(&d, 16), cudaErrorMemoryAllocation);
    CUDA_OK(cudaMalloc(&d, 16));
    CUDA_OK(cudaFree(d));

    /* every cudaEventCreate*: default error */
    cudaEvent_t e;
    fakecuda_set_fault(FAKECUDA_FAULT_EVENT_CREATE, 1, 0, cudaSuccess);
    assert_int_equal(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaErrorMemoryAllocation);
    fakecuda_reset_faults();
    CUDA_OK(cudaEventCreate(&e));
    CUDA_OK(cudaEventDestroy(e));
    for (int i = 0; i < 3; i++)
        CUDA_OK(cudaStreamDestroy(s[i]));
    (void)cudaGetLastError();
}

static void CUDART_CB callback_fn(cudaStream_t s, cudaError_t status, void *arg)
{
    (void)s;
    *(cudaError_t *)arg = status;
}

static void test_faults_async_error_on_stream(void **state)
{
    (void)state;
    enum { N = 256 };
    cudaStream_t bad, good;
    cudaEvent_t before, after;
    unsigned char *d, h[N];
    volatile double t_host = 0;
    cudaError_t cb_status = cudaSuccess;
    CUDA_OK(cudaStreamCreate(&bad));
    CUDA_OK(cudaStreamCreateWithFlags(&good, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreate(&before));
    CUDA_OK(cudaEventCreate(&after));
    CUDA_OK(cudaMalloc((void **)&d, N));
    CUDA_OK(cudaMemset(d, 1, N));
    CUDA_OK(cudaDeviceSynchronize());

    CUDA_OK(cudaEventRecord(before, bad));
    CUDA_OK(fakecuda_fail_stream(bad, cudaErrorIllegalAddress));
    assert_int_equal(fakecuda_fail_stream((cudaStream_t)h, cudaSuccess), cudaErrorInvalidResourceHandle);
    CUDA_OK(launch_fill(bad, d, 2, N, 30)); /* the launch itself succeeds ... */
    CUDA_OK(cudaLaunchHostFunc(bad, stamp_fn, (void *)&t_host));
    CUDA_OK(cudaStreamAddCallback(bad, callback_fn, &cb_status, 0));
    CUDA_OK(cudaEventRecord(after, bad));
    assert_int_equal(cudaStreamSynchronize(bad), cudaErrorIllegalAddress); /* ... the error comes later */
    assert_int_equal(cudaStreamQuery(bad), cudaErrorIllegalAddress);
    assert_int_equal(cudaEventSynchronize(after), cudaErrorIllegalAddress);
    assert_int_equal(cudaEventQuery(after), cudaErrorIllegalAddress);
    assert_int_equal(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    assert_int_equal(cb_status, cudaErrorIllegalAddress); /* callbacks learn it */
    assert_true(t_host == 0);                             /* host functions are skipped */
    CUDA_OK(cudaMemcpy(h, d, N, cudaMemcpyDeviceToHost)); /* the legacy stream is fine */
    assert_int_equal(h[0], 1);                            /* the kernel did not run */
    CUDA_OK(launch_fill(good, d, 3, N, 0));               /* other streams are fine */
    CUDA_OK(cudaStreamSynchronize(good));

    fakecuda_reset_faults();
    CUDA_OK(cudaStreamSynchronize(bad));
    CUDA_OK(launch_fill(bad, d, 4, N, 0));
    CUDA_OK(cudaMemcpyAsync(h, d, N, cudaMemcpyDeviceToHost, bad));
    CUDA_OK(cudaStreamSynchronize(bad));
    assert_int_equal(h[N - 1], 4);
    CUDA_OK(cudaDeviceSynchronize());

    /* FAKECUDA_FAULT_ASYNC: the 2nd piece of work queued anywhere fails */
    fakecuda_set_fault(FAKECUDA_FAULT_ASYNC, 2, 1, cudaSuccess);
    CUDA_OK(cudaMemsetAsync(d, 5, N, good));
    CUDA_OK(cudaMemsetAsync(d, 6, N, bad));
    CUDA_OK(cudaStreamSynchronize(good));
    assert_int_equal(cudaStreamSynchronize(bad), cudaErrorLaunchFailure);
    CUDA_OK(cudaMemcpy(h, d, N, cudaMemcpyDeviceToHost));
    assert_int_equal(h[0], 5);
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    assert_true(st.async_errors >= 2);
    fakecuda_reset_faults();

    CUDA_OK(cudaStreamDestroy(bad));
    CUDA_OK(cudaStreamDestroy(good));
    CUDA_OK(cudaEventDestroy(before));
    CUDA_OK(cudaEventDestroy(after));
    CUDA_OK(cudaFree(d));
    (void)cudaGetLastError();
}

/* Runs `fn` with stderr going to a file; returns what was written. */
static char *capture_stderr(void (*fn)(void))
{
    static char text[4096];
    char path[] = "/tmp/fakecuda-stderr-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return text;
}

static void load_bad_environment(void)
{
    setenv("FAKECUDA_BW_PINNED", "fast", 1);
    setenv("FAKECUDA_LATENCY_US", "-3", 1);
    setenv("FAKECUDA_PAGEABLE_H2D_ASYNC_MAX", "2X", 1);
    setenv("FAKECUDA_PEER_MATRIX", "0x,00", 1);
    setenv("FAKECUDA_FAULT_MALLOC", "two", 1);
    fakecuda_reload_config();
    unsetenv("FAKECUDA_BW_PINNED");
    unsetenv("FAKECUDA_LATENCY_US");
    unsetenv("FAKECUDA_PAGEABLE_H2D_ASYNC_MAX");
    unsetenv("FAKECUDA_PEER_MATRIX");
    unsetenv("FAKECUDA_FAULT_MALLOC");
}

static void test_faults_bad_environment_warns_and_keeps_defaults(void **state)
{
    (void)state;
    const char *text = capture_stderr(load_bad_environment);
    assert_non_null(strstr(text, "FAKECUDA_BW_PINNED=\"fast\""));
    assert_non_null(strstr(text, "FAKECUDA_LATENCY_US=\"-3\""));
    assert_non_null(strstr(text, "FAKECUDA_PAGEABLE_H2D_ASYNC_MAX=\"2X\""));
    assert_non_null(strstr(text, "FAKECUDA_PEER_MATRIX=\"0x,00\""));
    assert_non_null(strstr(text, "FAKECUDA_FAULT_MALLOC=\"two\""));
    int can = 0;
    CUDA_OK(cudaDeviceCanAccessPeer(&can, 1, 0)); /* default matrix: all capable */
    assert_int_equal(can, 1);
    void *d;
    CUDA_OK(cudaMalloc(&d, 8)); /* no fault armed */
    CUDA_OK(cudaFree(d));
    fakecuda_reload_config();
}

static void test_faults_peer_matrix(void **state)
{
    (void)state;
    int can = -1;
    setenv_reload("FAKECUDA_PEER_MATRIX", "01,00");
    CUDA_OK(cudaDeviceCanAccessPeer(&can, 0, 1));
    assert_int_equal(can, 1);
    CUDA_OK(cudaDeviceCanAccessPeer(&can, 1, 0));
    assert_int_equal(can, 0);
    CUDA_OK(cudaSetDevice(1));
    assert_int_equal(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessUnsupported);
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaDeviceEnablePeerAccess(1, 0));
    CUDA_OK(cudaDeviceDisablePeerAccess(1));
    setenv_reload("FAKECUDA_PEER_MATRIX", NULL);
    CUDA_OK(cudaDeviceCanAccessPeer(&can, 1, 0));
    assert_int_equal(can, 1);
    (void)cudaGetLastError();
}

/* The P2P attributes and PCI bus ids follow the matrix; "r" is capable but
 * refuses cudaDeviceEnablePeerAccess (tools/p2pcheck's "refused" verdict). */
static void test_faults_peer_attributes_and_refused_enable(void **state)
{
    (void)state;
    int v = -1, can = -1;
    setenv_reload("FAKECUDA_PEER_MATRIX", "0r,00");
    CUDA_OK(cudaDeviceCanAccessPeer(&can, 0, 1));
    assert_int_equal(can, 1);
    CUDA_OK(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 0, 1));
    assert_int_equal(v, 1);
    CUDA_OK(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrNativeAtomicSupported, 0, 1));
    assert_int_equal(v, 1);
    CUDA_OK(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrPerformanceRank, 0, 1));
    assert_int_equal(v, 0);
    CUDA_OK(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 1, 0));
    assert_int_equal(v, 0);
    CUDA_OK(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrNativeAtomicSupported, 1, 0));
    assert_int_equal(v, 0);
    assert_int_equal(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 0, 0), cudaErrorInvalidDevice);
    assert_int_equal(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 0, 9), cudaErrorInvalidDevice);
    CUDA_OK(cudaSetDevice(0));
    assert_int_equal(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessUnsupported);

    setenv("FAKECUDA_P2P_ATOMICS", "0", 1);
    setenv("FAKECUDA_P2P_RANK", "2", 1);
    setenv_reload("FAKECUDA_PEER_MATRIX", "01,10");
    CUDA_OK(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrNativeAtomicSupported, 1, 0));
    assert_int_equal(v, 0);
    CUDA_OK(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrPerformanceRank, 1, 0));
    assert_int_equal(v, 2);
    unsetenv("FAKECUDA_P2P_ATOMICS");
    unsetenv("FAKECUDA_P2P_RANK");
    setenv_reload("FAKECUDA_PEER_MATRIX", NULL);

    char bus[32];
    CUDA_OK(cudaDeviceGetPCIBusId(bus, sizeof bus, 1));
    assert_string_equal(bus, "0000:02:00.0"); /* pciBusID is device + 1 */
    assert_int_equal(cudaDeviceGetPCIBusId(bus, 5, 1), cudaErrorInvalidValue);
    assert_int_equal(cudaDeviceGetPCIBusId(bus, sizeof bus, 7), cudaErrorInvalidDevice);
    (void)cudaGetLastError();
}

/* "h": cudaDeviceEnablePeerAccess never returns (a machine a user reported
 * locked up there), so a tool must run it in a process it can kill. Checked in
 * a child. */
static int child_enable_hangs(void)
{
    (void)cudaSetDevice(1);
    (void)cudaDeviceEnablePeerAccess(0, 0);
    return 0; /* returned: the test fails */
}

static void test_faults_peer_enable_hangs(void **state)
{
    (void)state;
    setenv("FAKECUDA_PEER_MATRIX", "01,h0", 1);
    int rc = run_child("enable_hangs", 300);
    unsetenv("FAKECUDA_PEER_MATRIX");
    assert_int_equal(rc, -1); /* killed at the time limit */
}

/* FAKECUDA_DEVICES is read once, at first use: checked in a child process. */
static int child_devices(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n == 4 && cudaSetDevice(3) == cudaSuccess &&
                   cudaSetDevice(4) == cudaErrorInvalidDevice
               ? 0
               : 1;
}

static void test_faults_device_count(void **state)
{
    (void)state;
    setenv("FAKECUDA_DEVICES", "4", 1);
    int rc = run_child("devices", 5000);
    unsetenv("FAKECUDA_DEVICES");
    assert_int_equal(rc, 0);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return strcmp(argv[2], "devices") == 0        ? child_devices()
               : strcmp(argv[2], "enable_hangs") == 0 ? child_enable_hangs()
                                                      : 127;
    setenv("FAKECUDA_FAULT_HOST_ALLOC", "2:1", 1);
    setenv("FAKECUDA_FAULT_EVENT_CREATE", "1:1:cudaErrorLaunchOutOfResources", 1);
    register_test_kernels();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_faults_from_environment),
        cmocka_unit_test(test_faults_set_fault),
        cmocka_unit_test(test_faults_async_error_on_stream),
        cmocka_unit_test(test_faults_bad_environment_warns_and_keeps_defaults),
        cmocka_unit_test(test_faults_peer_matrix),
        cmocka_unit_test(test_faults_peer_attributes_and_refused_enable),
        cmocka_unit_test(test_faults_peer_enable_hangs),
        cmocka_unit_test(test_faults_device_count),
    };
    return US_RUN_TESTS("test_faults", tests, NULL, NULL);
}
