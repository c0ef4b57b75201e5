/* test_driver.c - the simulated driver (libcuda.so.1): cuGetProcAddress's
 * version and flag semantics, contexts and their ownership rules, and the
 * runtime reaching the driver for its copies. */
#include "fc_test.h"

#include <cuda.h>
#include <dlfcn.h>

#define CU_OK(call) assert_int_equal((call), CUDA_SUCCESS)

static void *driver_symbol(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    void *fn = dlsym(h, name);
    dlclose(h);
    assert_non_null(fn);
    return fn;
}

static void *proc(const char *name, int version, cuuint64_t flags, CUresult want, CUdriverProcAddressQueryResult want_status)
{
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)-1;
    assert_int_equal(cuGetProcAddress(name, &fn, version, flags, &status), want);
    assert_int_equal(status, want_status);
    if (want != CUDA_SUCCESS)
        assert_null(fn);
    return fn;
}

/* The runtime's own sequence: cuGetProcAddress through itself (11030: the
 * 4-argument form, 12000: the 5-argument _v2), then entry points of the
 * newest version the caller knows, the per-thread flag picking _ptsz/_ptds. */
static void test_get_proc_address(void **state)
{
    (void)state;
    const CUdriverProcAddressQueryResult ok = CU_GET_PROC_ADDRESS_SUCCESS;
    assert_ptr_equal(proc("cuGetProcAddress", 11030, 0, CUDA_SUCCESS, ok), driver_symbol("cuGetProcAddress"));
    assert_ptr_equal(proc("cuGetProcAddress", 12000, 0, CUDA_SUCCESS, ok), driver_symbol("cuGetProcAddress_v2"));
    assert_ptr_equal(proc("cuGetProcAddress", 13000, 0, CUDA_SUCCESS, ok), driver_symbol("cuGetProcAddress_v2"));
    assert_ptr_equal(proc("cuMemcpyHtoDAsync", 13000, 0, CUDA_SUCCESS, ok), driver_symbol("cuMemcpyHtoDAsync_v2"));
    assert_ptr_equal(proc("cuMemcpyHtoDAsync", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, CUDA_SUCCESS, ok),
                     driver_symbol("cuMemcpyHtoDAsync_v2"));
    assert_ptr_equal(proc("cuMemcpyHtoDAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CUDA_SUCCESS, ok),
                     driver_symbol("cuMemcpyHtoDAsync_v2_ptsz"));
    assert_ptr_equal(proc("cuMemcpyDtoH", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CUDA_SUCCESS, ok),
                     driver_symbol("cuMemcpyDtoH_v2_ptds"));
    /* no per-thread variant: the same function either way */
    assert_ptr_equal(proc("cuMemAlloc", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CUDA_SUCCESS, ok),
                     driver_symbol("cuMemAlloc_v2"));
    assert_ptr_equal(proc("cuCtxCreate", 3020, 0, CUDA_SUCCESS, ok), driver_symbol("cuCtxCreate_v2"));
    assert_ptr_equal(proc("cuCtxCreate", 13000, 0, CUDA_SUCCESS, ok), driver_symbol("cuCtxCreate_v4"));
    assert_ptr_equal(proc("cuCtxSynchronize", 12080, 0, CUDA_SUCCESS, ok), driver_symbol("cuCtxSynchronize"));
    assert_ptr_equal(proc("cuCtxSynchronize", 13000, 0, CUDA_SUCCESS, ok), driver_symbol("cuCtxSynchronize_v2"));
    proc("cuMemAlloc", 2000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    proc("cuGetProcAddress", 11000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    proc("cuNoSuchFunction", 13000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

/* A created context: current after creation, its own streams; a stream or
 * event of it used from the device's primary context is an invalid handle,
 * and the other way round; waiting on an event of another context is fine;
 * after cuCtxDestroy its handles are gone and the thread is back in the
 * primary context. */
static void test_contexts_and_ownership(void **state)
{
    (void)state;
    CU_OK(cuInit(0));
    CUdevice dev;
    CU_OK(cuDeviceGet(&dev, 0));
    CUcontext primary, created, cur;
    CU_OK(cuDevicePrimaryCtxRetain(&primary, dev));
    CU_OK(cuCtxSetCurrent(primary));
    CUstream primary_stream;
    CUevent primary_event;
    CU_OK(cuStreamCreate(&primary_stream, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&primary_event, CU_EVENT_DISABLE_TIMING));

    CU_OK(cuCtxCreate(&created, NULL, 0, dev));
    CU_OK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, created);
    assert_ptr_not_equal(created, primary);
    CUstream stream;
    CUevent event;
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));

    enum { N = 1 << 16 };
    unsigned char *host = malloc(N), *back = malloc(N);
    fill_pattern(host, N, 7);
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, N));
    CU_OK(cuMemcpyHtoDAsync(d, host, N, stream));
    /* the primary context's stream and event are not this context's */
    assert_int_equal(cuMemcpyDtoHAsync(back, d, N, primary_stream), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuEventRecord(primary_event, stream), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cudaMemcpyAsync(back, (void *)d, N, cudaMemcpyDeviceToHost, (cudaStream_t)primary_stream),
                     cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();
    CU_OK(cuEventRecord(event, stream));
    CU_OK(cuStreamWaitEvent(NULL, event, 0));
    /* pageable D2H, synchronous, through the runtime in the created context */
    memset(back, 0, N);
    CUDA_OK(cudaMemcpy(back, (void *)d, N, cudaMemcpyDeviceToHost));
    assert_memory_equal(back, host, N);
    CU_OK(cuCtxSynchronize());

    /* from the primary context: its own stream works, the created one's does not */
    CU_OK(cuCtxPushCurrent(primary));
    assert_int_equal(cuMemcpyDtoHAsync(back, d, N, stream), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuEventRecord(event, primary_stream), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuStreamWaitEvent(primary_stream, event, 0)); /* an event of another context: allowed */
    memset(back, 0, N);
    CU_OK(cuMemcpyDtoHAsync(back, d, N, primary_stream));
    CU_OK(cuStreamSynchronize(primary_stream));
    assert_memory_equal(back, host, N);
    CU_OK(cuStreamSynchronize(stream)); /* looking at another context's stream is fine */
    CU_OK(cuCtxPopCurrent(&cur));
    assert_ptr_equal(cur, primary);
    CU_OK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, created);

    CU_OK(cuCtxDestroy(created));
    CU_OK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, primary);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuEventQuery(event), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuCtxSetCurrent(created), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxDestroy(primary), CUDA_ERROR_INVALID_CONTEXT);

    CU_OK(cuStreamDestroy(primary_stream));
    CU_OK(cuEventDestroy(primary_event));
    CU_OK(cuMemFree(d));
    CU_OK(cuDevicePrimaryCtxRelease(dev));
    free(host);
    free(back);
}

/* A stream of another device's primary context is accepted (measured on
 * H200s: the runtime copies on a stream of a device that is not current). */
static void test_other_device_stream_accepted(void **state)
{
    (void)state;
    CUDA_OK(cudaSetDevice(1));
    cudaStream_t s1;
    CUDA_OK(cudaStreamCreate(&s1));
    void *d1;
    CUDA_OK(cudaMalloc(&d1, 4096));
    CUDA_OK(cudaSetDevice(0));
    char host[4096] = {1};
    CUDA_OK(cudaMemcpyAsync(d1, host, sizeof host, cudaMemcpyHostToDevice, s1));
    CUDA_OK(cudaStreamSynchronize(s1));
    CUDA_OK(cudaStreamDestroy(s1));
    CUDA_OK(cudaFree(d1));
}

/* The runtime's copies are the driver's: each direction, and the copy
 * the runtime's cudaMemcpyPeer names by primary contexts. */
static void test_runtime_copies_through_driver(void **state)
{
    (void)state;
    enum { N = 1 << 20 };
    unsigned char *host = malloc(N), *back = malloc(N);
    fill_pattern(host, N, 3);
    void *d0, *d1;
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaMalloc(&d0, N));
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaMalloc(&d1, N));
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaMemcpyAsync(d0, host, N, cudaMemcpyHostToDevice, 0));
    CUDA_OK(cudaMemcpyPeerAsync(d1, 1, d0, 0, N, 0));
    CUDA_OK(cudaMemcpy(back, d1, N, cudaMemcpyDefault));
    assert_memory_equal(back, host, N);
    assert_int_equal(cudaMemcpy(back, d1, N, (enum cudaMemcpyKind)7), cudaErrorInvalidMemcpyDirection);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);
    assert_int_equal(cudaMemcpyPeer(d1, 9, d0, 0, N), cudaErrorInvalidDevice);
    (void)cudaGetLastError();
    CUDA_OK(cudaFree(d0));
    CUDA_OK(cudaFree(d1));
    free(host);
    free(back);
}

/* cuCtxDestroy releases the pinned memory the context allocated and the
 * ranges it registered; with FAKECUDA_CTX_REUSE=1 the next context gets the
 * destroyed one's address, with another id, and none of the old handles. */
static void test_destroy_releases_and_address_reuse(void **state)
{
    (void)state;
    setenv("FAKECUDA_CTX_REUSE", "1", 1);
    fakecuda_reload_config();
    CU_OK(cuInit(0));
    CUdevice dev;
    CU_OK(cuDeviceGet(&dev, 0));
    CUcontext first, second;
    unsigned long long first_id, second_id, primary_id;
    CU_OK(cuCtxCreate(&first, NULL, 0, dev));
    CU_OK(cuCtxGetId(first, &first_id));
    CU_OK(cuCtxGetId(NULL, &second_id)); /* the current one */
    assert_true(second_id == first_id);
    CUstream stream;
    CUevent event;
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
    void *pinned;
    CUDA_OK(cudaHostAlloc(&pinned, 1 << 20, cudaHostAllocPortable));
    static char registered[1 << 16];
    CUDA_OK(cudaHostRegister(registered, sizeof registered, cudaHostRegisterPortable));
    struct cudaPointerAttributes attr;
    CUDA_OK(cudaPointerGetAttributes(&attr, pinned));
    assert_int_equal(attr.type, cudaMemoryTypeHost);
    fakecuda_reset_stats();
    CU_OK(cuCtxDestroy(first));
    struct fakecuda_stats st;
    fakecuda_stats(&st);
    assert_int_equal(st.pinned_released_by_ctx_destroy, 2);
    CUDA_OK(cudaPointerGetAttributes(&attr, pinned));
    assert_int_equal(attr.type, cudaMemoryTypeUnregistered); /* freed */
    CUDA_OK(cudaPointerGetAttributes(&attr, registered));
    assert_int_equal(attr.type, cudaMemoryTypeUnregistered); /* no longer pinned */
    assert_int_equal(cuCtxGetId(first, &first_id), CUDA_ERROR_INVALID_CONTEXT);

    CU_OK(cuCtxCreate(&second, NULL, 0, dev));
    assert_ptr_equal(second, first); /* the same address */
    CU_OK(cuCtxGetId(second, &second_id));
    assert_true(second_id != first_id);
    CUcontext primary;
    CU_OK(cuDevicePrimaryCtxRetain(&primary, dev));
    CU_OK(cuCtxGetId(primary, &primary_id));
    assert_true(primary_id != second_id);
    /* the old context's handles stay invalid in the new one */
    assert_int_equal(cuStreamSynchronize(stream), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuEventRecord(event, NULL), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuCtxDestroy(second));
    CU_OK(cuDevicePrimaryCtxRelease(dev));
    unsetenv("FAKECUDA_CTX_REUSE");
    fakecuda_reload_config();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_proc_address),
        cmocka_unit_test(test_contexts_and_ownership),
        cmocka_unit_test(test_other_device_stream_accepted),
        cmocka_unit_test(test_runtime_copies_through_driver),
        cmocka_unit_test(test_destroy_releases_and_address_reuse),
    };
    return US_RUN_TESTS("test_driver", tests, NULL, NULL);
}
