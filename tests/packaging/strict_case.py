"""strict_case.py - a project's test file for the installed wheel's pytest
plugin (tests/packaging copies it into a temporary project as
test_strict_case.py): CUDA through ctypes into the simulated runtime
(FAKECUDA_LIB), one clean test and one that copies into pageable memory, which
pytest --unstall-strict must fail, naming the line marked "LINE:d2h"."""
import ctypes
import os

import pytest

MiB = 1 << 20
D2H = 2


@pytest.fixture(scope="module")
def cuda():
    lib = os.environ.get("FAKECUDA_LIB")
    if not lib:
        pytest.skip("FAKECUDA_LIB (the simulated libcudart.so.13) not set")
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    api = ctypes.CDLL(None)  # a preloaded shim's symbols first, as for PyTorch
    api.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    api.cudaMemcpyAsync.argtypes = api.cudaMemcpy.argtypes + [ctypes.c_void_p]
    api.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
    dev = ctypes.c_void_p()
    assert api.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(MiB)) == 0
    return api, dev


def test_clean(cuda):
    api, dev = cuda
    pinned = ctypes.c_void_p()
    assert api.cudaMallocHost(ctypes.byref(pinned), ctypes.c_size_t(MiB)) == 0
    stream = ctypes.c_void_p()
    assert api.cudaStreamCreateWithFlags(ctypes.byref(stream), 1) == 0  # non-blocking
    assert api.cudaMemcpyAsync(pinned, dev, MiB, D2H, stream) == 0
    assert api.cudaStreamSynchronize(stream) == 0  # explicit_sync: low, allowed by strict mode


def test_pageable_copy(cuda):
    api, dev = cuda
    host = ctypes.create_string_buffer(MiB)
    api.cudaMemcpy(host, dev, MiB, D2H)  # LINE:d2h (the error is dropped: only the plugin fails the test)
