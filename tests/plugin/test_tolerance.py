"""``gpu_assert_close``: each profile (torch's defaults, fp8, TF32 on sm_80+/gfx94x, CDNA fp16 denormals), the
overrides (ini, marker, call), the failure message, and the plugin wiring (pytester)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from pytest_gpuenv import gpu_assert_close
from pytest_gpuenv.base.tolerance import Context, choose, compare, parse_ini, rule

CPU = Context("cpu", None, False)


@pytest.mark.parametrize("dtype, rtol, atol", [
    ("float16", 1e-3, 1e-5), ("bfloat16", 1.6e-2, 1e-5), ("float32", 1.3e-6, 1e-5), ("float64", 1e-7, 1e-7),
    ("complex64", 1.3e-6, 1e-5), ("int32", 0.0, 0.0),
    ("float8_e4m3fn", 2**-3, 2**-6), ("float8_e5m2", 2**-2, 2**-14),
    ("float8_e4m3fnuz", 2**-3, 2**-7), ("float8_e5m2fnuz", 2**-2, 2**-15),
])
def test_defaults(dtype, rtol, atol):
    p = choose(dtype, CPU)
    assert (p.rtol, p.atol) == (rtol, atol)


def test_defaults_are_torchs():
    torch = pytest.importorskip("torch")
    from torch.testing._comparison import _DTYPE_PRECISIONS  # the table the docs describe

    for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        p = choose(str(dt).removeprefix("torch."), CPU)
        assert (p.rtol, p.atol) == _DTYPE_PRECISIONS[dt]


@pytest.mark.parametrize("arch, tf32, applies", [
    ("sm_80", True, True), ("sm_90", True, True), ("sm_100", True, True), ("gfx942", True, True),
    ("sm_80", False, False), ("sm_70", True, False), ("gfx90a", True, False), ("gfx950", True, False),
])
def test_tf32_profile(arch, tf32, applies):
    p = choose("float32", Context("nvidia" if arch.startswith("sm") else "amd", arch, tf32))
    assert (p.rtol == 1e-3) == applies
    if applies:
        assert "TF32 matmul on" in p.describe()


@pytest.mark.parametrize("arch, atol", [("gfx90a", 2**-14), ("gfx908", 2**-14), ("gfx942", 1e-5),
                                        ("sm_90", 1e-5)])
def test_cdna_fp16_denormal_profile(arch, atol):
    p = choose("float16", Context("amd", arch, False))
    assert p.atol == atol and p.rtol == 1e-3
    if atol != 1e-5:
        assert "MFMA flushes fp16 denormals" in p.atol_from


def test_ini_lines_and_precedence():
    rules = parse_ini(["float16: rtol=2e-3 atol=1e-4", "bfloat16 gfx9*: rtol=3e-2", "float* nvidia: atol=1e-3",
                       "# a comment", ""], "ini option gpuenv_tolerances in pytest.ini")
    p = choose("float16", CPU, rules)
    assert (p.rtol, p.atol) == (2e-3, 1e-4)
    assert "line 1: 'float16: rtol=2e-3 atol=1e-4'" in p.rtol_from
    p = choose("bfloat16", Context("amd", "gfx90a", False), rules)
    assert (p.rtol, p.atol) == (3e-2, 1e-5) and p.atol_from == "torch.testing default for bfloat16"
    assert choose("bfloat16", Context("amd", "gfx1100", False), rules).rtol == 1.6e-2
    assert choose("float32", Context("nvidia", "sm_90", False), rules).atol == 1e-3
    # a marker beats the ini, a call beats both
    marker = rule("float16", atol=5e-4, source="marker", label="@gpuenv_tolerance(...)")
    call = rule("*", rtol=0.5, source="call", label="args")
    p = choose("float16", CPU, rules + [marker, call])
    assert (p.rtol, p.atol) == (0.5, 5e-4)


@pytest.mark.parametrize("line, why", [
    ("float16 rtol=1", "expected 'DTYPE [ARCH]: rtol=X atol=Y'"),
    ("float16: rtol=abc", "rtol must be a finite number >= 0"),
    ("float16: rtol=-1", "rtol must be a finite number >= 0"),
    ("float16: rtol=1 tol=2", "unexpected 'tol=2'"),
    ("float16:", "give rtol, atol or both"),
    ("float16 gfx9x9!: rtol=1", "invalid arch pattern"),
])
def test_bad_ini_lines(line, why):
    with pytest.raises(ValueError, match="invalid line .* in ini option gpuenv_tolerances") as info:
        parse_ini([line], "ini option gpuenv_tolerances")
    assert why in str(info.value)


def test_failure_names_profile_worst_element_and_index():
    actual = np.ones((4, 5), np.float32)
    expected = actual.astype(np.float64)
    actual[1, 3] = 1.5
    actual[2, 2] = 1.001
    with pytest.raises(AssertionError) as info:
        gpu_assert_close(actual, expected)
    text = str(info.value)
    assert "2 of 20 element(s) are not close (10%)" in text
    assert "profile float32 on cpu: rtol=1.3e-06, atol=1e-05 (rtol and atol from torch.testing default for float32)" in text
    assert "worst element at index (1, 3): actual 1.5, expected 1.0, difference 0.5 (allowed 1.13e-05" in text


def test_nan_inf_and_shapes():
    gpu_assert_close(np.array([np.inf, 1.0]), np.array([np.inf, 1.0]))
    with pytest.raises(AssertionError, match=r"index \(0,\): actual nan"):
        gpu_assert_close(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))
    gpu_assert_close(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), equal_nan=True)
    with pytest.raises(AssertionError, match=r"shapes differ: actual \(2,\), expected \(3,\)"):
        gpu_assert_close(np.zeros(2), np.zeros(3))
    gpu_assert_close(np.zeros((0, 3)), np.zeros((0, 3)))


def test_call_overrides_and_arch():
    a, e = np.float16([1.0, 2.0]), np.float32([1.0, 2.004])
    with pytest.raises(AssertionError, match="profile float16 on cpu"):
        gpu_assert_close(a, e)
    gpu_assert_close(a, e, rtol=3e-3)
    p = compare(np.float32([1.0]), np.float32([1.0005]), arch="sm_90", tf32=True)
    assert p.rtol == 1e-3 and p.ctx.arch == "sm_90"


def test_torch_tensors_cpu():
    torch = pytest.importorskip("torch")
    x = torch.ones(8, dtype=torch.bfloat16)
    gpu_assert_close(x * 1.0078125, x)  # one bf16 ulp: within 1.6e-2
    with pytest.raises(AssertionError, match=r"profile bfloat16 on cpu.*\n.*index \(3,\): actual 1.125"):
        y = x.clone()
        y[3] = 1.125
        gpu_assert_close(y, x)
    f8 = torch.tensor([1.0, 2.0, 4.0]).to(torch.float8_e4m3fn)
    gpu_assert_close(f8, torch.tensor([1.1, 2.2, 4.4]))  # within 1/8 relative
    with pytest.raises(AssertionError, match="profile float8_e4m3fn on cpu"):
        gpu_assert_close(f8, torch.tensor([1.5, 2.0, 4.0]))
    gpu_assert_close(torch.arange(4), np.arange(4))


def test_numpy_never_imports_torch():
    code = ("import sys, numpy; from pytest_gpuenv import gpu_assert_close; "
            "gpu_assert_close(numpy.ones(3, numpy.float16), numpy.ones(3)); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"


SUITE = """
import numpy as np
import pytest

def test_default(gpu_assert_close):
    gpu_assert_close(np.float16([1.0]), np.float16([1.0]))

def test_ini_loosens_float16(gpu_assert_close):
    gpu_assert_close(np.float16([1.0]), np.float32([1.0015]))

@pytest.mark.gpuenv_tolerance(dtype="float16", rtol=0.1)
def test_marker_loosens(gpu_assert_close):
    gpu_assert_close(np.float16([1.0]), np.float32([1.05]))

@pytest.mark.gpuenv_tolerance(dtype="float16", atol=0)
def test_marker_fails_with_its_name(gpu_assert_close):
    gpu_assert_close(np.float16([0.0, 1.0]), np.float32([0.0, 1.01]))

@pytest.mark.gpuenv_tolerance("float16", rtol=0.1)
def test_bad_marker(gpu_assert_close):
    pass
"""


def test_fixture_with_ini_and_markers(pytester):
    pytester.makeini("[pytest]\ngpuenv_tolerances =\n    float16: rtol=2e-3\n")
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess("--strict-markers", "-p", "no:xdist", "--gpuenv-backend=cpu")
    result.assert_outcomes(passed=3, failed=1, errors=1)
    result.stdout.fnmatch_lines([
        "*invalid marker @gpuenv_tolerance('float16', rtol=0.1): takes keyword arguments only*",
        "*1 of 2 element(s) are not close (50%)*",
        "*profile float16 on cpu: rtol=0.002, atol=0 (rtol from ini: ini option gpuenv_tolerances in tox.ini line 1: "
        "'float16: rtol=2e-3'; atol from marker: @gpuenv_tolerance(dtype='float16', atol=0))*",
        "*worst element at index (1,): actual 1.0, expected 1.0099999904632568, difference 0.00999999 (allowed 0.00202*",
    ])


def test_bad_ini_line_is_a_usage_error(pytester):
    pytester.makeini("[pytest]\ngpuenv_tolerances =\n    float16: rtol=lots\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*gpuenv: invalid line 'float16: rtol=lots' in ini option gpuenv_tolerances*"
                                 "rtol must be a finite number >= 0, got 'lots'*"])


KERNEL = """\
#include <hip/hip_runtime.h>
extern "C" __global__ void scale(float* out, const float* in, float s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i] * s + (i == 37 ? 0.5f : 0.0f);
}
"""
KERNEL_TEST = """
import numpy as np

def test_scale(hip_kernel, gpu_assert_close):
    k = hip_kernel("scale.hip", "scale")
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    k(1, 64, out, x, np.float32(3.0))
    gpu_assert_close(out, x * 3)
"""


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None, reason="no C++ compiler")
def test_cpu_executor_outputs(pytester, tmp_path_factory, monkeypatch):
    (pytester.path / "kernels").mkdir()
    (pytester.path / "kernels" / "scale.hip").write_text(KERNEL)
    pytester.makeini("[pytest]\ngpuenv_cpu_warp_sizes = 64\n")
    monkeypatch.setenv("GPUENV_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    pytester.makepyfile(KERNEL_TEST)
    result = pytester.runpytest_subprocess("--gpuenv-backend=cpu", "-p", "no:xdist", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*1 of 64 element(s) are not close*", "*profile float32 on cpu*",
                                 "*worst element at index (37,): actual 111.5, expected 111.0, difference 0.5*"])
    assert os.path.isdir(pytester.path / "kernels")
