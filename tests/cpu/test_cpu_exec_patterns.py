"""Correct kernels in the patterns of published HIP code run without a false report on the CPU executor,
at warpSize 64 and 32, checked and unchecked (tests/data/cpu_kernels/patterns.hip): ``__shared__`` in
templates, inline helpers and at namespace scope; one barrier the compiler duplicates; per-thread bytes,
shorts and halves of shared memory; and a reduction that relies on wavefront lockstep (reported as
``KernelWarpSyncError``, correct with ``lockstep=True``)."""

from __future__ import annotations

import os
import shutil

import pytest

np = pytest.importorskip("numpy")

from _checkout import CPU_KERNELS  # noqa: E402
from _cpu_exec_fixtures import CHECK  # noqa: E402

from pytest_gpuenv import rtc  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
SOURCE = os.path.join(CPU_KERNELS, "patterns.hip")


def line_of(tag: str) -> str:
    with open(SOURCE) as f:
        for i, line in enumerate(f, 1):
            if f"// {tag}" in line:
                return f"patterns.hip:{i}"
    raise AssertionError(tag)


@CHECK
@pytest.mark.parametrize("tile", [8, 16])
def test_shared_in_a_template(cpu_kernel, check, tile):
    n = 32
    x = np.random.rand(n, n).astype(np.float32)
    out = np.full((n, n), np.nan, np.float32)
    cpu_kernel(f"transpose{tile}", check=check)((n // tile, n // tile), (tile, tile), out, x, n)
    np.testing.assert_array_equal(out, x.T)


@pytest.mark.parametrize("opt", ["-O0", "-O2"])  # g++ emits the red zones after the variable at -O2, before at -O0
def test_overflow_of_a_template_shared_variable_is_reported(cpu_kernel, opt):
    """Stopped before the write at every level; the variable is named where the compiler puts red zones or
    padding after it (g++ 12 at -O0 and -O2; the H200 image's g++ at -O0 packed the next symbol right after
    it, and the report named the nearest argument instead)."""
    with pytest.raises(rtc.KernelBoundsError) as info:
        cpu_kernel("template_overflow", options=[opt])(1, 64, np.zeros(64, np.float32))
    msg = str(info.value)
    assert line_of("TEMPLATE-OOB") in msg
    if opt == "-O2":
        assert "__shared__ variable 'tile' element 32" in msg


@CHECK
def test_shared_in_an_inline_helper(cpu_kernel, check):
    x = np.random.rand(512).astype(np.float32)
    out = np.zeros(512, np.float32)
    cpu_kernel("moving_sum", check=check)(2, 256, out, x, 2)
    want = [sum(x[b * 256 + j] for j in range(t - 2, t + 3) if 0 <= j < 256) + 1 for b in range(2) for t in range(256)]
    np.testing.assert_allclose(out, want, rtol=1e-5)


@CHECK
def test_shared_at_namespace_scope(cpu_kernel, check):
    out = np.zeros(128, np.int32)
    cpu_kernel("namespace_shared", check=check)(2, 64, out)
    assert out.tolist() == [2 * (63 - t) for t in range(64)] * 2


@CHECK
def test_one_barrier_duplicated_by_the_compiler(cpu_kernel, check):
    x = np.random.rand(1024).astype(np.float32)
    out = np.zeros(4, np.float32)
    cpu_kernel("unrolled_reduce", check=check)(4, 256, out, x)
    np.testing.assert_allclose(out, x.reshape(4, 256).sum(axis=1), rtol=1e-5)


@CHECK
def test_per_thread_bytes_of_shared_memory(cpu_kernel, check):
    data = np.random.randint(0, 256, 2 * 256 * 8).astype(np.uint8)
    out = np.zeros(4, np.uint32)
    cpu_kernel("byte_bins", check=check)(2, 256, out, data, 8)
    assert out.tolist() == np.bincount(data & 3, minlength=4).tolist()


@CHECK
def test_per_thread_shorts_and_halves(cpu_kernel, check):
    data = np.random.randint(0, 256, 256 * 8).astype(np.uint8)
    out = np.zeros(4, np.float32)
    cpu_kernel("narrow_bins", check=check)(1, 256, out, data, 8)
    n = np.bincount(data & 1, minlength=2)
    assert out.tolist() == [n[0], n[0] / 2, n[1], n[1] / 2]


def test_lockstep_reliance_is_reported(cpu_kernel, warp):
    x = np.ones(512, np.float32)
    with pytest.raises(rtc.KernelWarpSyncError) as info:
        cpu_kernel("reduce_v5")(2, 256, np.zeros(2, np.float32), x)
    msg = str(info.value)
    assert isinstance(info.value, rtc.KernelRaceError) and line_of("LOCKSTEP") in msg
    assert "same wavefront (wave 0 of the block)" in msg and "lockstep" in msg and "NVIDIA" in msg and "lockstep=True" in msg


@CHECK
def test_lockstep_runs_as_amd_hardware_does(cpu_kernel, check):
    x = np.random.rand(1024).astype(np.float32)
    out = np.zeros(4, np.float32)
    k = cpu_kernel("reduce_v5", check=check, lockstep=True)
    assert k.lockstep and "lockstep" in repr(k)
    k(4, 256, out, x)
    np.testing.assert_allclose(out, x.reshape(4, 256).sum(axis=1), rtol=1e-5)


def test_warp_sync_error_is_exported():
    import pytest_gpuenv

    assert pytest_gpuenv.KernelWarpSyncError is rtc.KernelWarpSyncError
    assert issubclass(rtc.KernelWarpSyncError, rtc.KernelRaceError)
