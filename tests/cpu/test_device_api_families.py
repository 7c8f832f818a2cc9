"""ROCm's device API on the CPU executor, one kernel per family (tests/data/cpu_kernels/device_api.hip: half,
bf16, integer intrinsics, warp, atomics, math), at both wavefront widths, checked and unchecked, against
numpy: each reference is written from the ROCm header's definition (clr hipamd/include/hip/amd_detail).
tests/kernels/test_gpu_device_api.py runs the same kernels on an NVIDIA GPU against the executor."""

from __future__ import annotations

import functools
import math
import operator
import shutil
from fractions import Fraction

import pytest

np = pytest.importorskip("numpy")

from _device_api_cases import SOURCE, N, run  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")


@pytest.fixture(params=[True, False], ids=["checked", "unchecked"])
def family(request, cpu_kernel):
    """``family(name)``: the outputs of that family's kernel, at this test's width and checking mode."""
    return lambda name: run(cpu_kernel(f"{name}_family", path=SOURCE, check=request.param), name)


def _bf16(x):
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    r = np.where(np.isnan(x), bits | 0x400000, (bits + 0x7FFF + ((bits >> 16) & 1)))
    return ((r >> 16) << 16).astype(np.uint32).view(np.float32)


def _inputs(name):
    from _device_api_cases import inputs

    return inputs(name)


def test_half(family):
    out = family("half")["out"]
    x = _inputs("half")
    with np.errstate(over="ignore", invalid="ignore"):
        h, g = x["a"].astype(np.float16), x["b"].astype(np.float16)
        hf, gf = h.astype(np.float64), g.astype(np.float64)
        want = {0: np.fmax(h, g), 1: np.fmin(h, g), 2: (hf - gf).astype(np.float32).astype(np.float16),
                3: (gf * hf + gf).astype(np.float32).astype(np.float16), 5: np.isinf(h), 6: g,
                7: (x["a"] * np.float32(3)).astype(np.float16), 8: h > g,
                9: (gf * hf).astype(np.float32).astype(np.float16)}
        e = np.exp((x["a"] / np.float32(8)).astype(np.float16).astype(np.float32)).astype(np.float16)
    for f, w in want.items():
        np.testing.assert_array_equal(out[f], np.asarray(w, np.float32), err_msg=f"field {f}")
    np.testing.assert_allclose(out[4], e.astype(np.float32), rtol=2e-3, err_msg="h2exp")


def test_bf16_comparisons_and_arithmetic(family):
    out = family("bf16")["out"]
    x = _inputs("bf16")
    h, g = _bf16(x["a"]), _bf16(x["b"])
    hf, gf = h.astype(np.float64), g.astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = {0: h < g, 1: h > g, 2: h == g, 3: h >= g, 4: h <= g, 5: h != g, 6: np.isinf(h), 7: np.fmax(h, g),
                8: _bf16((hf - gf).astype(np.float32)), 9: _bf16((gf * hf + gf).astype(np.float32))}
    for f, w in want.items():
        np.testing.assert_array_equal(out[f], np.asarray(w, np.float32), err_msg=f"field {f}")


def _fns(mask, bits, base, offset):
    """ROCm's __fns32/__fns64 (amd_device_functions.h): the offset-th set bit from base up (offset > 0),
    down (offset < 0), or base itself (offset 0); -1 when there is none."""
    order = range(base, bits) if offset >= 0 else range(base, -1, -1)
    want = max(abs(offset), 1)
    for b in order:
        if (mask >> b) & 1:
            want -= 1
            if want == 0:
                return b
        if offset == 0:
            break
    return -1


def _int_reference(a, b):
    m32, m64 = (1 << 32) - 1, (1 << 64) - 1
    x, y = a & m32, b & m32
    sx, sy = x - (1 << 32) * (x >> 31), y - (1 << 32) * (y >> 31)
    sa, sb = a - (1 << 64) * (a >> 63), b - (1 << 64) * (b >> 63)
    s = (b >> 32) & 0x7777
    both = (y << 32) | x
    shift = (a >> 40) & 31
    d = np.array([float(sa)]).view(np.uint64)[0].item()
    return [
        sum(((both >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4)),
        int(f"{a:064b}"[::-1], 2),
        (((y << 32) | x) << shift >> 32) & m32,
        (((y << 32) | x) >> shift) & m32,
        ((sa * sb) >> 64) & m64,
        (abs(sx - sy) + 7) & m32,
        d >> 32,
        d & m32,
        (x + y) >> 1,
        ((sx + sy + 1) >> 1) & m32,
        (abs(x - y) + 3) & m32,
        math.floor(sx / 3.0) & m32,
        math.ceil(sy / 7.0) & m64,
        _fns(x, 32, b & 31, ((a >> 8) & 7) - 3) & m32,
        ((a & b) & -(a & b)).bit_length() - 1 & m32 if a & b else m32,
        _fns(a, 64, b & 63, 2) & m32,
    ]


def test_integer_intrinsics(family):
    out = family("int")["out"]
    x = _inputs("int")
    for i in range(N):
        want = _int_reference(int(x["a"][i]), int(x["b"][i]))
        assert [int(v) for v in out[:, i]] == want, i


def test_warp_functions(family, warp):
    out = family("warp")["out"].astype(object)
    v = _inputs("warp")["v"]
    full = (1 << warp) - 1
    for i in range(N):
        base, lane = i - i % warp, i % warp
        w = [int(t) for t in v[base:base + warp]]
        same_all = all(t // 1000 == w[0] // 1000 for t in w)
        want = [
            sum(1 << j for j in range(warp) if w[j] % 3 == w[lane] % 3),
            full if same_all else 0,
            int(same_all),
            sum(1 << j for j in range(warp) if w[j] & 1),
            sum(1 << j for j in range(warp) if w[j] & 2),
            lane,
            w[lane ^ 1],
            w[lane ^ 1],
            w[0],
            w[(lane & ~3) | (3 - (lane & 3))],
            (1 << lane) - 1,
            w[(lane - 1) % warp],
            0 if lane % 16 == 0 else w[lane - 1],
            sum(t - 2000 for t in w) & 0xFFFFFFFF,
            functools.reduce(operator.or_, w),
            max(w),
        ]
        assert [int(t) for t in out[:, i]] == want, (i, lane)


def test_atomics(family):
    r = family("atomic")
    a = _inputs("atomic")["a"].reshape(-1, 16)
    cells = N // 16
    h = r["h2"].view(np.float16).reshape(cells, 2)
    np.testing.assert_array_equal(h, np.tile(np.float16([16, 8]), (cells, 1)))
    # ROCm orders -0.0 below +0.0 (amd_hip_atomic.h atomicMin/atomicMax(float*)): both zero cells agree
    want_min, want_max = a.min(axis=1), a.max(axis=1)
    want_min[:2], want_max[:2] = -0.0, 0.0
    np.testing.assert_array_equal(r["fmin"][:cells], want_min)
    assert np.signbit(r["fmin"][:2]).all() and not np.signbit(r["fmax"][:2]).any()
    np.testing.assert_array_equal(r["fmax"], want_max)
    np.testing.assert_array_equal(r["fmin"][cells:], np.full(cells, 16, np.float32))
    np.testing.assert_array_equal(r["u"], np.full(cells, 32, np.uint32))


def _round(exact: Fraction, mode: str, dtype) -> float:
    """``exact`` rounded to ``dtype`` downward, upward or towards zero."""
    c = dtype(float(exact))
    if mode == "rz":
        mode = "rd" if exact > 0 else "ru"
    if mode == "rd" and Fraction(float(c)) > exact:
        c = np.nextafter(c, dtype(-np.inf))
    if mode == "ru" and Fraction(float(c)) < exact:
        c = np.nextafter(c, dtype(np.inf))
    return float(c)


def test_math(family):
    torch = pytest.importorskip("torch")
    out = family("math")["out"]
    x = _inputs("math")["a"]
    f = x.astype(np.float32)
    t = torch.from_numpy(x)
    t1 = torch.from_numpy((f + np.float32(1)).astype(np.float64))  # erfcinvf's argument, rounded to float
    sp = torch.special
    want = {
        0: (np.sin(np.pi * x), 1e-13), 1: (np.cos(np.pi * f.astype(np.float64)), 1e-6),
        2: (sp.erfinv(t).numpy(), 1e-13), 3: (sp.erfinv(1 - t1).numpy(), 1e-5),
        4: (sp.ndtr(3 * t).numpy(), 1e-13), 5: (sp.ndtri(0.5 + t / 2.1).numpy(), 1e-10),
        6: (1 / np.sqrt(x * x + 13), 1e-14), 7: (1 / np.hypot(f.astype(np.float64), 2), 1e-6),
        8: (np.cbrt(x + 2) ** -1, 1e-14), 9: (sp.erfcx(4 * t).numpy(), 1e-12),
        10: (sp.i0(5 * t).numpy(), 1e-12), 15: (x, 0),
    }
    for k, (w, rtol) in want.items():
        np.testing.assert_allclose(out[k], w, rtol=rtol, atol=1e-300, err_msg=f"field {k}")
    tiny = Fraction(float(np.float32(1e-9)))
    for i in range(N):
        assert out[11, i] == _round(Fraction(float(f[i])) + tiny, "rd", np.float32)
        assert out[12, i] == _round(Fraction(float(f[i])) + tiny, "ru", np.float32)
        assert out[13, i] == _round(Fraction(float(x[i])) * 3, "rz", np.float64)
        assert out[14, i] == _round(Fraction(float(x[i] / 3)), "ru", np.float32)


def test_shfl_takes_what_rocm_overloads_and_refuses_a_float2(cpu_cache, warp):
    """ROCm's __shfl has overloads for arithmetic types (amd_warp_functions.h) and __half/__half2
    (amd_hip_fp16.h), none for float2: a compile error there, and so here."""
    from pytest_gpuenv.rtc import KernelCompileError, compile_kernel

    ok = ('#include <hip/hip_runtime.h>\n#include <hip/hip_bf16.h>\nextern "C" __global__ void k(float* o) {\n'
          '    o[0] = __shfl(1.5f, 0) + __shfl(2, 0) + (float)__shfl(__half(1.0f), 0) + __shfl(3.0, 0)\n'
          '         + (float)__shfl(__float2bfloat16(1.0f), 0) + __shfl((unsigned char)1, 0) + __shfl(4ll, 0);\n}\n')
    k = compile_kernel(ok, "k", arch="cpu", warp_size=warp, cache_dir=cpu_cache)
    out = np.zeros(1, np.float32)
    k(1, 1, out)
    assert out[0] == 1.5 + 2 + 1 + 3 + 1 + 1 + 4
    bad = ('#include <hip/hip_runtime.h>\nextern "C" __global__ void k(float* o) {\n'
           '    float2 v = make_float2(o[0], o[1]);\n    v = __shfl(v, 0);\n    o[0] = v.x;\n}\n')
    with pytest.raises(KernelCompileError, match="ROCm has no overload for this type"):
        compile_kernel(bad, "k", arch="cpu", warp_size=warp, cache_dir=cpu_cache)


def test_clocks_and_compiler_builtins(cpu_cache, warp):
    """clock64 / __clock64 / wall_clock64 / s_memtime count up (wall_clock64 at 100 MHz, the rate ROCm reports
    for CDNA); clang's __builtin_nontemporal_load/store and __builtin_assume compile under g++ too."""
    from pytest_gpuenv.rtc import compile_kernel

    src = r'''#include <hip/hip_runtime.h>
extern "C" __global__ void k(long long* t, float* x) {
    long long c0 = clock64(), w0 = wall_clock64(), m0 = (long long)__builtin_amdgcn_s_memtime();
    __builtin_assume(threadIdx.x < 1024);
    float v = __builtin_nontemporal_load(&x[threadIdx.x]);
    __builtin_nontemporal_store(v * 2, &x[threadIdx.x]);
    __builtin_amdgcn_s_sleep(1);
    for (volatile int i = 0; i < 200000; i++) {}
    t[0] = clock64() - c0; t[1] = wall_clock64() - w0; t[2] = __clock64() - c0;
    t[3] = (long long)__builtin_amdgcn_s_memtime() - m0;
}
'''
    k = compile_kernel(src, "k", arch="cpu", warp_size=warp, cache_dir=cpu_cache)
    t, x = np.zeros(4, np.int64), np.arange(4, dtype=np.float32)
    k(1, 4, t, x)
    assert (t > 0).all() and t[1] < 10**9, t  # under 10 s of 100 MHz ticks
    np.testing.assert_array_equal(x, np.arange(4, dtype=np.float32) * 2)
