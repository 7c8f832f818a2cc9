"""The CPU executor runs the kernels it must run, at warpSize 64 and 32 (CPU-EXEC.md's "must run" list).

Each kernel is compared with a numpy reference; the checks (races, bounds, uninitialised reads) are on.
"""

from __future__ import annotations

import os
import shutil

import pytest

np = pytest.importorskip("numpy")

from _checkout import CPU_KERNELS, KERNELS  # noqa: E402

from pytest_gpuenv import rtc  # noqa: E402
from pytest_gpuenv.rtc import compile_kernel  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
SOURCE = os.path.join(CPU_KERNELS, "runs.hip")


def test_kernel_attributes(cpu_kernel, warp):
    k = cpu_kernel("warp_size_out")
    assert (k.backend, k.arch, k.warp_size, k.check) == ("cpu", "cpu", warp, True)
    out = np.zeros(1, np.int32)
    k(1, 1, out)
    assert out[0] == warp


@pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
def test_vector_add_tail(cpu_kernel, check):
    n = 1_000_003
    k = cpu_kernel("vector_add", os.path.join(KERNELS, "vector_add.hip"), check=check)
    a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    k((n + 255) // 256, 256, out, a, b, n)
    np.testing.assert_array_equal(out, a + b)


def test_matmul_tiled_256(cpu_kernel):
    k = cpu_kernel("matmul_tiled", os.path.join(KERNELS, "matmul_tiled.hip"))
    a, b = np.random.randn(256, 256).astype(np.float32), np.random.randn(256, 256).astype(np.float32)
    c = np.full((256, 256), np.nan, np.float32)
    k((16, 16), (16, 16), c, a, b, 256, 256, 256)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n", [1, 1000, 100_003])
def test_reduce_sum(cpu_kernel, warp, n):
    k = cpu_kernel("reduce_sum", os.path.join(KERNELS, "reduce_sum.hip"))
    x = np.random.rand(n).astype(np.float32)
    out = np.zeros(1, np.float32)
    k(min((n + 255) // 256, 64), 256, out, x, n, shared_mem=(256 // warp) * 4)
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-4)


def test_grid_3d_grid_stride(cpu_kernel):
    g = np.zeros(37 * 11 * 5, np.float32)
    cpu_kernel("grid3d")((2, 2, 2), (4, 4, 2), g, 37, 11, 5)
    z, y, x = np.meshgrid(range(5), range(11), range(37), indexing="ij")
    np.testing.assert_array_equal(g, (x + 100 * y + 10000 * z).ravel())


@pytest.mark.parametrize("name", ["block_reduce_extern", "block_reduce_macro"])
def test_block_reduction_dynamic_shared(cpu_kernel, name):
    x = np.random.rand(1000).astype(np.float32)
    out = np.zeros(4, np.float32)
    cpu_kernel(name)(4, 256, out, x, 1000, shared_mem=256 * 4)
    np.testing.assert_allclose(out, [x[i * 256:(i + 1) * 256].sum() for i in range(4)], rtol=1e-5)


def test_warp_size_generic_shuffle_reduction(cpu_kernel):
    x = np.random.rand(1000).astype(np.float32)
    out = np.zeros(1, np.float32)
    cpu_kernel("shfl_reduce")(4, 256, out, x, 1000)
    np.testing.assert_allclose(out[0], x.sum(), rtol=1e-5)


def _hip_shuffles(t: int, width: int) -> list[int]:
    seg = t & ~(width - 1)
    up = t - 2 if t - 2 >= seg else t
    down = t + 2 if (t & (width - 1)) + 2 < width else t
    x = t ^ 1
    x = x if x < ((t + width) & ~(width - 1)) else t
    return [10 * ((3 & (width - 1)) + seg), 10 * x, 10 * up, 10 * down]


@pytest.mark.parametrize("width", [8, 16, None])
def test_shuffles_with_widths(cpu_kernel, warp, width):
    width = width or warp
    out = np.zeros(4 * 64, np.int32)
    cpu_kernel("shuffles")(1, 64, out, width)
    expect = [v for t in range(64) for v in _hip_shuffles(t % warp, width)]
    base = [(t // warp) * warp for t in range(64) for _ in range(4)]
    assert out.tolist() == [e + 10 * b if e % 10 == 0 else e for e, b in zip(expect, base)]


def test_ballot_any_all(cpu_kernel, warp):
    nw = 64 // warp
    ballots, anys, alls = np.zeros(2, np.uint64), np.zeros(2, np.int32), np.zeros(4, np.int32)
    cpu_kernel("votes")(1, 64, ballots, anys, alls)
    for w in range(nw):
        want = sum(1 << lane for lane in range(warp) if (w * warp + lane) % 3 == 0)
        assert int(ballots[w]) == want
        assert anys[w] == int(w * warp <= 5 < (w + 1) * warp)
        assert alls[2 * w] == 1 and alls[2 * w + 1] == int(not (w * warp <= 7 < (w + 1) * warp))


def test_histograms_and_atomics(cpu_kernel):
    data = (np.arange(1000) * 7).astype(np.int32)
    hist, fhist = np.zeros(16, np.int32), np.zeros(16, np.float32)
    cpu_kernel("histogram")(4, 256, hist, fhist, data, 1000)
    np.testing.assert_array_equal(hist, np.bincount(data & 15, minlength=16))
    np.testing.assert_array_equal(fhist, hist * 0.5)
    x = np.random.rand(1000).astype(np.float32)
    fmax, imax, exch, bits = np.full(1, -1e30, np.float32), np.zeros(1, np.int32), np.zeros(1, np.int32), \
        np.zeros(1, np.uint32)
    cpu_kernel("atomics_misc")(4, 256, fmax, imax, exch, bits, x, 1000)
    assert fmax[0] == x.max() and imax[0] == (x * 1000).astype(np.int32).max()
    assert exch[0] == 7 and bits[0] == 0xFFFFFFFF


def test_half_in_and_out(cpu_kernel):
    h = np.random.rand(100).astype(np.float16)
    out = np.zeros(100, np.float16)
    cpu_kernel("half_scale")(1, 128, out, h, 2.0, 100)
    np.testing.assert_allclose(out.astype(np.float32), h.astype(np.float32) * 2 + 1, rtol=1e-3)


def test_math_within_ulps(cpu_kernel):
    x = (np.random.rand(1000) + 0.5).astype(np.float32)
    out = np.zeros(6000, np.float32)
    cpu_kernel("mathfns")(4, 256, out, x, 1000)
    d = x.astype(np.float64)
    ref = np.stack([np.sin(d), np.exp(d), np.sqrt(d), 1 / np.sqrt(d), np.log(d), d**1.5], 1).ravel()
    np.testing.assert_allclose(out, ref, rtol=4e-7 * 4)


def test_device_counter_and_constant_table(cpu_kernel):
    out, count = np.zeros(256, np.float32), np.zeros(1, np.int32)
    cpu_kernel("device_vars")(1, 256, out, count)
    assert count[0] == 256
    np.testing.assert_array_equal(out, np.tile([1, 2, 4, 8], 64))


def test_printf_in_order(cpu_kernel, capsys):
    cpu_kernel("printer")(2, 3, 2)
    assert capsys.readouterr().out == "block 0 thread 0\nblock 0 thread 1\nblock 1 thread 0\nblock 1 thread 1\n"


def test_early_return_without_barrier(cpu_kernel):
    out = np.zeros(300, np.float32)
    cpu_kernel("early_return")(2, 256, out, 300)
    np.testing.assert_array_equal(out, 2 * np.arange(300))


@pytest.mark.parametrize("flag", [1, 0])
def test_barrier_under_uniform_condition(cpu_kernel, flag):
    out = np.zeros(256, np.float32)
    cpu_kernel("uniform_barrier")(1, 256, out, flag)
    np.testing.assert_array_equal(out, 255 - np.arange(256) if flag else -np.ones(256))


def test_barrier_in_device_helper(cpu_kernel):
    out = np.zeros(256, np.float32)
    cpu_kernel("helper_barrier")(1, 256, out)
    np.testing.assert_array_equal(out, 2 * ((np.arange(256) + 1) % 256))


def test_block_of_48(cpu_kernel, warp):
    out = np.zeros(96, np.int32)
    cpu_kernel("odd_block")(2, 48, out)
    t = np.tile(np.arange(48), 2)
    np.testing.assert_array_equal(out, 47 - t + 1000 * (t // warp))


def test_4k_local_array_in_1024_threads(cpu_kernel):
    out = np.zeros(2048, np.float32)
    cpu_kernel("big_locals")(2, 1024, out)
    t = np.tile(np.arange(1024), 2).astype(np.float64)
    np.testing.assert_allclose(out, sum(t + k for k in range(0, 1024, 97)), rtol=1e-6)


def test_header_from_an_option_include_dir_is_in_the_key(tmp_path, cpu_cache):
    """A header found through ``-I`` in ``options`` is part of the CPU kernel's cache key (issue 12 item 3)."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "value.h").write_text("#define VALUE 1.0f\n")
    src = '#include <hip/hip_runtime.h>\n#include <value.h>\nextern "C" __global__ void f(float* p) { p[0] = VALUE; }\n'
    first = compile_kernel(src, "f", arch="cpu", cache_dir=cpu_cache, options=[f"-I{inc}"])
    again = compile_kernel(src, "f", arch="cpu", cache_dir=cpu_cache, options=[f"-I{inc}"])
    (inc / "value.h").write_text("#define VALUE 2.0f\n")
    changed = compile_kernel(src, "f", arch="cpu", cache_dir=cpu_cache, options=[f"-I{inc}"])
    assert (first.cache_hit, again.cache_hit, changed.cache_hit) == (False, True, False)


@pytest.mark.parametrize("cooperative", [False, True])
@pytest.mark.parametrize("earlier_launch", [False, True])
def test_a_grid_whose_block_count_overflows_is_refused_before_anything_runs(cpu_cache, cooperative, earlier_launch):
    """(2**30, 2**30, 16) blocks wrapped to 0: after an earlier launch the launch ran no block and returned
    success (an asserting kernel passed), and as the executor's first launch it killed it with SIGSEGV."""
    src = '#include <hip/hip_runtime.h>\n#include <cassert>\nextern "C" __global__ void f(int* o) { assert(0); }\n'
    k = compile_kernel(src, "f", arch="cpu", cache_dir=cpu_cache)
    out = np.zeros(1, np.int32)
    if earlier_launch:
        with pytest.raises(rtc.KernelAssertError):
            k(1, 1, out)
    with pytest.raises(ValueError, match=r"grid \(1073741824, 1073741824, 16\) has 18446744073709551616 blocks"):
        k((2**30, 2**30, 16), 1, out, cooperative=cooperative)
    with pytest.raises(rtc.KernelAssertError):  # the executor still runs the next launch
        k(1, 1, out)
