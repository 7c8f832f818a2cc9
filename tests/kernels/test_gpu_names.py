"""Name expressions, modules with globals and by-value vectors/structs launched on a real NVIDIA GPU, with
NVRTC and with nvcc (skipped elsewhere; scripts/gpu-check.sh runs them). The same test file runs on the
CPU executor in tests/kernels/test_rtc_names_cpu.py. A pytest subprocess, so no GPU runtime starts in this process."""

from __future__ import annotations

import os

import pytest
from _checkout import REPO
from _rtc_names import GPU_SOURCE, MODULE_TEST

from pytest_gpuenv import requires_cuda

pytestmark = requires_cuda


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_names_modules_and_globals_on_the_gpu(pytester, tmp_path_factory, monkeypatch, compiler):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("GPUENV_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    (pytester.path / "kernels").mkdir()
    (pytester.path / "kernels" / "names.hip").write_bytes(GPU_SOURCE)
    pytester.makeini("[pytest]\n")
    pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.plugin"]\n')
    pytester.makepyfile(test_names=MODULE_TEST.replace("OPTS = {}", f"OPTS = {{'compiler': {compiler!r}}}"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:gpuenv", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_module?cuda:0? PASSED*", "*test_template_kernel?cuda:0? PASSED*"])
