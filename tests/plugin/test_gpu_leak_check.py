"""``--gpuenv-leak-check`` on a real NVIDIA GPU (scripts/gpu-check.sh, the H200): a tensor kept alive past
its test and a raw ``cuMemAlloc`` never freed are caught, naming the device and the bytes; a clean test
and a test whose memory only moves into torch's cache are not."""

from __future__ import annotations

import pytest

from pytest_gpuenv import requires_cuda

SUITE = """
import ctypes
import pytest
import torch

KEEP = []

def test_clean():
    x = torch.randn(1024, 1024, device="cuda")
    assert float((x @ x).sum()) == float((x @ x).sum())  # cuBLAS workspace: released, not a leak

def test_cached_is_not_leaked():
    x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    del x  # back in torch's cache: memory_reserved grows, memory_allocated does not

def test_torch_leak():
    KEEP.append(torch.empty(4 << 20, dtype=torch.uint8, device="cuda"))

def test_raw_driver_leak():
    torch.zeros(1, device="cuda")
    lib = ctypes.CDLL("libcuda.so.1")
    ptr = ctypes.c_uint64()
    assert lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(256 << 20)) == 0

@pytest.mark.gpuenv_leak_check(mode="off")
def test_opted_out():
    KEEP.append(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
"""


@requires_cuda
def test_leaks_are_caught(pytester):
    pytest.importorskip("torch")
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--gpuenv-leak-check", "--gpuenv-leak-threshold=64MiB",
                                           "-rE")
    result.assert_outcomes(passed=5, errors=2)
    result.stdout.fnmatch_lines_random([
        "*test_torch_leak leaked GPU memory: cuda:0: 4.0 MiB (4194304 bytes) still allocated through torch*",
        "*test_raw_driver_leak leaked GPU memory: cuda:0: 256.0 MiB more in use outside torch*",
    ])
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--gpuenv-leak-check=warn",
                                           "--gpuenv-leak-threshold=64MiB")
    assert result.parseoutcomes().get("passed") == 5 and "error" not in result.parseoutcomes()
    result.stdout.fnmatch_lines_random(["*PytestWarning: gpuenv leak check:*test_torch_leak leaked*",
                                        "*PytestWarning: gpuenv leak check:*test_raw_driver_leak leaked*"])


@requires_cuda
def test_marker_alone_turns_it_on(pytester):
    pytest.importorskip("torch")
    pytester.makepyfile(SUITE.replace("def test_torch_leak", "@pytest.mark.gpuenv_leak_check\ndef test_torch_leak"))
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    result.assert_outcomes(passed=5, errors=1)  # (the raw leak is under the default threshold)
