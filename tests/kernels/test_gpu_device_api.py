"""ROCm's device API on an NVIDIA GPU against the CPU executor (skipped elsewhere; scripts/gpu-check.sh runs
it): the kernels of tests/data/cpu_kernels/device_api.hip, one per family (half, bf16, integer intrinsics,
warp, atomics, math), compiled for the GPU by ``compile_kernel`` (NVRTC through the shipped HIP-on-CUDA
headers) and for the executor at warpSize 32, on the same inputs (tests/cpu/_device_api_cases.py). Only
what CUDA has a counterpart for is compared: the fields a kernel writes under __HIP_PLATFORM_AMD__ keep the
test's fill on the GPU. The GPU run is in a subprocess (``runpytest_subprocess``)."""

from __future__ import annotations

import os
import shutil

import pytest
from _checkout import REPO, plugin_installed

from pytest_gpuenv import requires_cuda

pytestmark = requires_cuda

SUITE = r'''
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, {cases!r})
from _device_api_cases import AMD_ONLY, FAMILIES, SOURCE, run

from pytest_gpuenv.rtc import compile_kernel

#: relative tolerance per family and field, where the two may differ: CUDA's libdevice and the C library by a
#: few ulps; a fused 16-bit fma (the GPU) and fmaf rounded to 16 bits (the executor) by one 16-bit ulp where the
#: float result lies on a tie; CUDA's h2exp is an approximation. Every other field is compared exactly.
RTOL = {{
    "half": {{2: 1e-3, 3: 1e-3, 4: 2e-3, 9: 1e-3}},
    "bf16": {{8: 8e-3, 9: 8e-3}},
    "math": {{0: 1e-14, 1: 1e-6, 2: 1e-13, 3: 1e-5, 4: 1e-13, 5: 1e-12, 6: 1e-14, 7: 1e-6, 8: 1e-14, 9: 1e-12,
             10: 1e-13}},
}}


_DTYPES = {{}}  # a device tensor's numpy dtype (unsigned arrays travel as the signed type of their size)


def to_dev(x):
    x = np.ascontiguousarray(x)
    signed = {{np.dtype(np.uint32): np.int32, np.dtype(np.uint64): np.int64}}.get(x.dtype, x.dtype)
    t = torch.from_numpy(x.view(signed)).cuda()
    _DTYPES[id(t)] = x.dtype
    return t


def to_host(t):
    torch.cuda.synchronize()
    return t.cpu().numpy().view(_DTYPES[id(t)])


@pytest.mark.parametrize("family", FAMILIES)
def test_gpu_matches_the_executor(family, tmp_path):
    gpu = compile_kernel(SOURCE, f"{{family}}_family")
    assert gpu.backend == "cuda"
    cpu = compile_kernel(SOURCE, f"{{family}}_family", arch="cpu", warp_size=32, cache_dir=str(tmp_path))
    g, c = run(gpu, family, to_dev, to_host), run(cpu, family)
    skip = AMD_ONLY.get(family, ())
    for key in g:
        if key in skip:
            continue
        if key != "out":
            np.testing.assert_array_equal(g[key], c[key], err_msg=key)
            continue
        for f in range(len(g[key])):
            if f in skip:
                continue
            rtol = RTOL.get(family, {{}}).get(f)
            if rtol is not None:
                np.testing.assert_allclose(g[key][f], c[key][f], rtol=rtol, err_msg=f"field {{f}}")
            else:
                np.testing.assert_array_equal(g[key][f], c[key][f], err_msg=f"field {{f}}")
'''


def test_device_api_on_the_gpu_matches_the_executor(pytester, monkeypatch, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("numpy")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    pytester.makeini("[pytest]\n")
    if not plugin_installed():
        monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.plugin"]\n')
    pytester.makepyfile(test_device_api_gpu=SUITE.format(cases=os.path.join(REPO, "tests", "cpu")))
    cache = tmp_path / "cache"
    try:
        result = pytester.runpytest_subprocess("-rsf", "-v", f"--gpuenv-cache-dir={cache}", timeout=600)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    result.assert_outcomes(passed=6)
