/* test_classify.c - pointer and copy classification: from the pointer table
 * first, the runtime's answer for unknown pointers, never from `kind` alone;
 * anything uncertain is US_PATH_UNKNOWN (native). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "summary.h"

#include <string.h>

#include "classify.h"
#include "device_state.h"
#include "real.h"

/* The fake runtime knows pointers by their address bands. */
#define DEV0 ((uintptr_t)0x10000000)
#define DEV1 ((uintptr_t)0x20000000)
#define VMM1 ((uintptr_t)0x30000000) /* device 1 memory unknown to the table */
#define MANAGED ((uintptr_t)0x40000000)
#define BROKEN ((uintptr_t)0x50000000) /* the runtime fails on it */
static char pageable[4096];
static char pinned[4096];

static cudaError_t fake_pointer_attributes(struct cudaPointerAttributes *attr, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    memset(attr, 0, sizeof *attr);
    if (p >= BROKEN && p < BROKEN + 0x1000000)
        return cudaErrorInvalidValue;
    if (p >= VMM1 && p < VMM1 + 0x1000000) {
        attr->type = cudaMemoryTypeDevice;
        attr->device = 1;
    } else if (p >= MANAGED && p < MANAGED + 0x1000000) {
        attr->type = cudaMemoryTypeManaged;
    } else {
        attr->type = cudaMemoryTypeUnregistered;
    }
    return cudaSuccess;
}

static cudaError_t fake_get_device(int *device)
{
    *device = 0;
    return cudaSuccess;
}

static struct us_real_api fake_api = {
    .cudaPointerGetAttributes = fake_pointer_attributes,
    .cudaGetDevice = fake_get_device,
};

static int setup(void **state)
{
    (void)state;
    us_real_install(&fake_api);
    us_ptrtable_clear();
    us_device_state_reset();
    us_ptrtable_insert(DEV0, 1u << 20, US_MEM_DEVICE, 0);
    us_ptrtable_insert(DEV1, 1u << 20, US_MEM_DEVICE, 1);
    us_ptrtable_insert((uintptr_t)pinned, sizeof pinned, US_MEM_PINNED, -1);
    return 0;
}

static enum us_copy_path path_of(enum us_copy_api api, uintptr_t dst, uintptr_t src, size_t bytes,
                                 enum cudaMemcpyKind kind)
{
    struct us_copy c = { .api = api, .dst = (void *)dst, .src = (const void *)src, .bytes = bytes, .kind = kind,
                         .peer_dst_device = -1, .peer_src_device = -1 };
    us_classify_copy(&c, false);
    return c.path;
}

static void test_classify_host_device_paths(void **state)
{
    (void)state;
    uintptr_t page = (uintptr_t)pageable, pin = (uintptr_t)pinned;
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, DEV0, page, 100, cudaMemcpyHostToDevice), US_PATH_H2D_PAGEABLE);
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, DEV0, pin, 100, cudaMemcpyDefault), US_PATH_H2D_PINNED);
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, page, DEV0, 100, cudaMemcpyDefault), US_PATH_D2H_PAGEABLE);
    assert_int_equal(path_of(US_API_MEMCPY, pin + 10, DEV0 + 10, 100, cudaMemcpyDeviceToHost), US_PATH_D2H_PINNED);
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, page, pin, 100, cudaMemcpyHostToHost), US_PATH_H2H);
}

static void test_classify_ignores_kind_for_cross_device(void **state)
{
    (void)state;
    /* DeviceToDevice between two devices is a cross-GPU copy: staged without peer access */
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, DEV1, DEV0, 4096, cudaMemcpyDeviceToDevice), US_PATH_D2D_STAGED);
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, DEV0 + 64, DEV0, 4096, cudaMemcpyDefault), US_PATH_D2D_SAME);
    us_device_note_peer(1, 0, true); /* either direction enabled: the driver copies directly */
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, DEV1, DEV0, 4096, cudaMemcpyDefault), US_PATH_D2D_PEER);
    us_device_note_peer(1, 0, false);
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, DEV1, DEV0, 4096, cudaMemcpyDefault), US_PATH_D2D_STAGED);
}

static void test_classify_unknown_to_table_asks_runtime(void **state)
{
    (void)state;
    /* VMM memory (PyTorch expandable segments) is not in the table */
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, VMM1, DEV0, 4096, cudaMemcpyDefault), US_PATH_D2D_STAGED);
    struct us_mem mem;
    us_classify_pointer((void *)(VMM1 + 5), &mem);
    assert_int_equal(mem.kind, US_MEM_DEVICE);
    assert_int_equal(mem.device, 1);
}

static void test_classify_uncertain_goes_native(void **state)
{
    (void)state;
    uintptr_t page = (uintptr_t)pageable;
    /* kind that contradicts the pointers */
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, DEV0, page, 100, cudaMemcpyDeviceToHost), US_PATH_UNKNOWN);
    /* past the end of the known allocation */
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, page, DEV0 + (1u << 20) - 10, 11, cudaMemcpyDefault),
                     US_PATH_UNKNOWN);
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, page, DEV0 + (1u << 20) - 10, 10, cudaMemcpyDefault),
                     US_PATH_D2H_PAGEABLE);
    /* managed memory, runtime failures, zero bytes, NULL */
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, MANAGED, DEV0, 100, cudaMemcpyDefault), US_PATH_UNKNOWN);
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, BROKEN, DEV0, 100, cudaMemcpyDefault), US_PATH_UNKNOWN);
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, DEV1, DEV0, 0, cudaMemcpyDefault), US_PATH_UNKNOWN);
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, 0, DEV0, 100, cudaMemcpyDefault), US_PATH_UNKNOWN);
    /* an invalid kind value */
    assert_int_equal(path_of(US_API_MEMCPY_ASYNC, DEV1, DEV0, 100, (enum cudaMemcpyKind)42), US_PATH_UNKNOWN);
}

/* us_classify_host_unknown marks the host side it did not find, and the
 * classification that follows takes that answer rather than asking the table
 * again: memory registered between the two (another thread) is classified as
 * it was when the call began. */
static void test_classify_host_unknown_marks_the_side_it_looked_up(void **state)
{
    (void)state;
    static char later[4096];
    struct us_copy h2d = { .api = US_API_MEMCPY, .dst = (void *)DEV0, .src = later, .bytes = 100,
                           .kind = cudaMemcpyHostToDevice, .peer_dst_device = -1, .peer_src_device = -1 };
    assert_true(us_classify_host_unknown(&h2d));
    assert_true(h2d.src_unlisted);
    assert_false(h2d.dst_unlisted);
    us_ptrtable_insert((uintptr_t)later, sizeof later, US_MEM_PINNED, -1);
    us_classify_copy(&h2d, false);
    assert_int_equal(h2d.src_mem.kind, US_MEM_PAGEABLE);
    assert_int_equal(h2d.path, US_PATH_H2D_PAGEABLE);
    /* a copy that did not look it up finds it in the table */
    struct us_copy fresh = { .api = US_API_MEMCPY, .dst = (void *)DEV0, .src = later, .bytes = 100,
                             .kind = cudaMemcpyHostToDevice, .peer_dst_device = -1, .peer_src_device = -1 };
    assert_false(us_classify_host_unknown(&fresh));
    assert_false(fresh.src_unlisted);
    us_classify_copy(&fresh, false);
    assert_int_equal(fresh.path, US_PATH_H2D_PINNED);

    /* host to host: each side marked for itself */
    struct us_copy h2h = { .api = US_API_MEMCPY, .dst = pageable, .src = pinned, .bytes = 100,
                           .kind = cudaMemcpyHostToHost, .peer_dst_device = -1, .peer_src_device = -1 };
    assert_true(us_classify_host_unknown(&h2h));
    assert_true(h2h.dst_unlisted);
    assert_false(h2h.src_unlisted);
    us_classify_copy(&h2h, false);
    assert_int_equal(h2h.path, US_PATH_H2H);
    assert_int_equal(h2h.src_mem.kind, US_MEM_PINNED);
}

static void test_classify_peer_api_devices_must_agree(void **state)
{
    (void)state;
    struct us_copy c = { .api = US_API_MEMCPY_PEER_ASYNC, .dst = (void *)DEV1, .src = (void *)DEV0, .bytes = 64,
                         .kind = cudaMemcpyDeviceToDevice, .peer_dst_device = 1, .peer_src_device = 0 };
    us_classify_copy(&c, false);
    assert_int_equal(c.path, US_PATH_D2D_STAGED);
    c.peer_dst_device = 0; /* contradicts the pointer: the runtime decides */
    us_classify_copy(&c, false);
    assert_int_equal(c.path, US_PATH_UNKNOWN);
}

static void test_classify_stream_kinds(void **state)
{
    (void)state;
    struct us_copy c = { .api = US_API_MEMCPY_ASYNC, .stream = NULL };
    us_classify_copy(&c, false);
    assert_int_equal(c.stream_kind, US_STREAM_LEGACY);
    assert_ptr_equal(us_copy_stream(&c), cudaStreamLegacy);
    c.api = US_API_MEMCPY_ASYNC_PTSZ;
    us_classify_copy(&c, false);
    assert_int_equal(c.stream_kind, US_STREAM_PER_THREAD);
    assert_ptr_equal(us_copy_stream(&c), cudaStreamPerThread);
    c.api = US_API_MEMCPY_ASYNC;
    c.stream = cudaStreamPerThread;
    us_classify_copy(&c, false);
    assert_int_equal(c.stream_kind, US_STREAM_PER_THREAD);
    c.stream = cudaStreamLegacy;
    us_classify_copy(&c, false);
    assert_int_equal(c.stream_kind, US_STREAM_LEGACY);
    c.stream = (cudaStream_t)0x1234;
    us_classify_copy(&c, false);
    assert_int_equal(c.stream_kind, US_STREAM_USER);
    assert_ptr_equal(us_copy_stream(&c), (cudaStream_t)0x1234);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_classify_host_device_paths, setup),
        cmocka_unit_test_setup(test_classify_ignores_kind_for_cross_device, setup),
        cmocka_unit_test_setup(test_classify_unknown_to_table_asks_runtime, setup),
        cmocka_unit_test_setup(test_classify_uncertain_goes_native, setup),
        cmocka_unit_test_setup(test_classify_host_unknown_marks_the_side_it_looked_up, setup),
        cmocka_unit_test_setup(test_classify_peer_api_devices_must_agree, setup),
        cmocka_unit_test_setup(test_classify_stream_kinds, setup),
    };
    return US_RUN_TESTS("test_classify", tests, NULL, NULL);
}
