"""strict_sample.py - the test file that tests/pytest_plugin runs with pytest
under the shim's strict mode and tools/pytest_unstall.py, over the simulated
runtime (tests/fakecuda) through ctypes. Each test says what the plugin must
make of it; the driver (test_pytest_unstall.py) finds the lines by the
"LINE:" markers. Not collected by a plain pytest run (not named test_*.py).
"""
import ctypes
import os

import pytest

MiB = 1 << 20
D2H = 2
H2D = 1
NON_BLOCKING = 1


@pytest.fixture(scope="module")
def cuda():
    """The runtime through the global scope, so that a preloaded shim's
    symbols come first, as they do for PyTorch's libtorch_cuda.so."""
    fake = os.environ.get("UNSTALL_FAKECUDA")
    if not fake:
        pytest.skip("UNSTALL_FAKECUDA (the simulated libcudart.so.13) not set")
    ctypes.CDLL(fake, mode=ctypes.RTLD_GLOBAL)
    api = ctypes.CDLL(None)
    for name in ("cudaMemcpy", "cudaMemcpyAsync"):
        getattr(api, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int] + \
            ([ctypes.c_void_p] if name.endswith("Async") else [])
    api.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
    api.cudaMemset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    return api


@pytest.fixture(scope="module")
def buffers(cuda):
    dev = ctypes.c_void_p()
    pinned = ctypes.c_void_p()
    stream = ctypes.c_void_p()
    assert cuda.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(4 * MiB)) == 0
    assert cuda.cudaMallocHost(ctypes.byref(pinned), ctypes.c_size_t(4 * MiB)) == 0
    assert cuda.cudaStreamCreateWithFlags(ctypes.byref(stream), NON_BLOCKING) == 0
    assert cuda.cudaMemset(dev, 7, 4 * MiB) == 0  # sync_memset: low, allowed at strict_severity=medium
    # the memset may still run on the legacy stream, which the non-blocking stream does not wait for
    assert cuda.cudaDeviceSynchronize() == 0  # explicit_sync: low
    return dev, pinned, stream


def copy_into_pinned(cuda, buffers):
    dev, pinned, stream = buffers
    assert cuda.cudaMemcpyAsync(pinned, dev, 4 * MiB, D2H, stream) == 0
    assert cuda.cudaStreamSynchronize(stream) == 0  # explicit_sync: low
    assert ctypes.string_at(pinned.value, 4) == b"\x07" * 4


def test_clean(cuda, buffers):
    copy_into_pinned(cuda, buffers)  # must pass


def test_pageable_d2h_ignored(cuda, buffers):
    host = ctypes.create_string_buffer(MiB)
    cuda.cudaMemcpy(host, buffers[0], MiB, D2H)  # LINE:ignored (the error is dropped: only the plugin fails it)


def test_pageable_d2h_checked(cuda, buffers):
    host = ctypes.create_string_buffer(MiB)
    rc = cuda.cudaMemcpy(host, buffers[0], MiB, D2H)  # LINE:checked
    assert rc == 0  # fails on its own too: the plugin adds its section


def helper_copies_pageable(cuda, dev):
    host = ctypes.create_string_buffer(MiB)
    cuda.cudaMemcpyAsync(host, dev, MiB, D2H, None)  # LINE:helper


def test_through_helper(cuda, buffers):
    helper_copies_pageable(cuda, buffers[0])  # LINE:caller


@pytest.fixture
def dirty_teardown(cuda, buffers):
    yield
    host = ctypes.create_string_buffer(MiB)
    cuda.cudaMemcpy(host, buffers[0], MiB, D2H)  # LINE:teardown


def test_dirty_teardown(dirty_teardown):
    pass  # passes; its fixture's teardown errors


def test_clean_after(cuda, buffers):
    copy_into_pinned(cuda, buffers)  # the failures before do not leak into this one
