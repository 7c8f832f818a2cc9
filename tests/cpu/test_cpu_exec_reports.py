"""The CPU executor reports the bugs it must report (CPU-EXEC.md's list), at warpSize 64 and 32, with
the kernel's file and line; the next launch always works (no sticky state)."""

from __future__ import annotations

import os
import shutil
import warnings

import pytest

np = pytest.importorskip("numpy")

from _checkout import CPU_KERNELS  # noqa: E402

from pytest_gpuenv import rtc  # noqa: E402
from pytest_gpuenv.rtc import KernelCompileError, KernelLaunchError, compile_kernel  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
SOURCE = os.path.join(CPU_KERNELS, "reports.hip")


def line_of(tag: str) -> str:
    with open(SOURCE) as f:
        for i, line in enumerate(f, 1):
            if f"// {tag}" in line:
                return f"reports.hip:{i}"
    raise AssertionError(tag)


def raises(cls: type, k: rtc.Kernel, *args: object, **kw: object) -> str:
    with pytest.raises(cls) as info:
        k(*args, **kw)
    assert isinstance(info.value, KernelLaunchError) and not info.value.sticky
    msg = str(info.value)
    assert f"kernel {k.name!r}" in msg and "block (" in msg and "thread (" in msg
    return msg


def test_missing_barrier_is_a_race(cpu_kernel, warp):
    out = np.zeros(256, np.float32)
    with pytest.raises(rtc.KernelRaceError) as info:  # between waves: not only a lockstep reliance
        cpu_kernel("missing_barrier")(1, 256, out)
    msg = str(info.value)
    assert type(info.value) is rtc.KernelRaceError
    assert f"__shared__ variable 's' element {warp}" in msg and "reports.hip:7" in msg


def test_matmul_without_second_barrier_is_a_race(cpu_kernel):
    a, c = np.ones(64 * 64, np.float32), np.zeros(64 * 64, np.float32)
    msg = raises(rtc.KernelRaceError, cpu_kernel("matmul_no_second_barrier"), (4, 4), (16, 16), c, a, a, 64)
    assert ("'As'" in msg or "'Bs'" in msg) and "same barrier interval" in msg


def test_a_barrier_that_threads_skip_and_return_warns(cpu_kernel):
    """Threads 32-255 skip the barrier and return: the GPU releases threads 0-31 without them (AMD does not
    wait for ended wavefronts, NVIDIA since Volta counts exited threads as arrived); checked mode warns."""
    out = np.zeros(256, np.float32)
    with pytest.warns(rtc.KernelBarrierWarning) as seen:
        cpu_kernel("divergent_barrier")(1, 256, out)
    msg = str(seen[0].message)
    assert line_of("DIVERGENT") in msg and "threads 32-255 of block (0,0,0) returned before" in msg
    assert np.all(out == 1.0)


def test_return_before_barrier_warns(cpu_kernel):
    out = np.zeros(512, np.float32)
    with pytest.warns(rtc.KernelBarrierWarning) as seen:
        cpu_kernel("exited_at_barrier")(2, 256, out, 300)
    msg = str(seen[0].message)
    assert line_of("EXITED") in msg and "block (1,0,0)" in msg and "threads 44-255 of block (1,0,0) returned" in msg
    np.testing.assert_array_equal(out[:300], np.arange(300))


def test_barriers_at_two_sites(cpu_kernel):
    msg = raises(rtc.KernelBarrierError, cpu_kernel("if_else_barriers"), 1, 256, np.zeros(256, np.float32))
    assert line_of("IF") in msg and line_of("ELSE") in msg and "different barriers" in msg


def test_out_of_bounds_write_leaves_memory_intact(cpu_kernel):
    buf = np.full(1024, 5.0, np.float32)
    msg = raises(rtc.KernelBoundsError, cpu_kernel("unguarded_write"), 4, 256, buf[:256], 256)
    assert line_of("OOB-WRITE") in msg and "argument 'out' (float* out) element 256" in msg
    assert (buf[256:] == 5.0).all() and (buf[:256] == 1.0).all()


def test_out_of_bounds_read_at_minus_one(cpu_kernel):
    msg = raises(rtc.KernelBoundsError, cpu_kernel("read_before_start"), 1, 256, np.zeros(256, np.float32),
                 np.ones(256, np.float32), 256)
    assert line_of("OOB-READ") in msg and "argument 'a' (const float* a) element -1" in msg and "thread (0,0,0)" in msg


def test_wave64_partials_array(cpu_kernel, warp):
    x, out = np.ones(256, np.float32), np.zeros(1, np.float32)
    if warp == 64:
        cpu_kernel("wave64_partials")(1, 256, out, x)
        assert out[0] == 256
    else:  # 8 warps write partial[0..7] of a 4-element array
        msg = raises(rtc.KernelBoundsError, cpu_kernel("wave64_partials"), 1, 256, out, x)
        assert line_of("WAVE64-PARTIAL") in msg and "'partial' element 4" in msg


def test_wave64_reduction_offset(cpu_kernel, warp):
    x, out = np.ones(64, np.float32), np.zeros(1, np.float32)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        cpu_kernel("wave64_offsets")(1, 64, out, x)
    if warp == 64:
        assert out[0] == 64 and not seen
    else:
        assert out[0] != 32  # wrong: the offset-32 step adds each lane to itself
        assert any(issubclass(w.category, rtc.KernelWarning) and line_of("OFFSET32") in str(w.message)
                   and "warpSize 32" in str(w.message) for w in seen)


def test_wave32_ballot_mask(cpu_kernel, warp):
    count = np.zeros(1, np.int32)
    cpu_kernel("wave32_ballot")(1, 64, count, np.ones(64, np.int32))
    assert (count[0] == warp) == (warp == 32)  # at 64 the 32-bit mask drops half the wave


def test_wave32_shuffle_inside_lane_below_32(cpu_kernel, warp):
    x, out = np.ones(64, np.float32), np.zeros(2, np.float32)
    if warp == 32:
        cpu_kernel("wave32_lanes")(1, 64, out, x)
        assert out.tolist() == [32, 32]
    else:
        msg = raises(rtc.KernelWarpError, cpu_kernel("wave32_lanes"), 1, 64, out, x)
        assert line_of("SHFL32") in msg and "reads lane 32, which is not active" in msg


def test_half_initialised_shared(cpu_kernel):
    msg = raises(rtc.KernelUninitializedError, cpu_kernel("half_initialised"), 1, 256, np.zeros(256, np.float32))
    assert line_of("UNINIT") in msg and "'s' element 255" in msg and "no thread of this block has written" in msg


def test_unbounded_recursion_then_next_launch_works(cpu_kernel):
    raises(rtc.KernelStackOverflowError, cpu_kernel("unbounded_recursion"), 1, 1, np.zeros(1, np.int32))
    out = np.zeros(256, np.float32)
    cpu_kernel("unguarded_write")(1, 256, out, 256)
    assert (out == 1).all()


def test_failing_device_assert(cpu_kernel):
    v = np.zeros(64, np.int32)
    v[5] = -1
    msg = raises(rtc.KernelAssertError, cpu_kernel("failing_assert"), 1, 64, v)
    assert line_of("ASSERT") in msg and "thread (5,0,0)" in msg and "v[threadIdx.x] >= 0" in msg


def test_write_through_cast_away_const(cpu_kernel):
    a = np.ones(64, np.float32)
    msg = raises(rtc.KernelBoundsError, cpu_kernel("const_cast_write"), 1, 64, a)
    assert line_of("CONST-WRITE") in msg and "const argument" in msg and (a == 1).all()


PASSED_REGIONS = """#include <hip/hip_runtime.h>
extern "C" __global__ void read_then_write(const float* a, float* o, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] + o[i];  // every thread reads both buffers whole
    o[threadIdx.x] = s;
    if (threadIdx.x == 5) ((float*)a)[0] = s;  // then a write to the const one
}
extern "C" __global__ void read_then_past(const float* a, float* o, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i];
    o[threadIdx.x] = s + (threadIdx.x == 7 ? a[n] : 0.0f);  // then one element past it
}
"""


def test_a_region_passed_before_still_bounds_later_accesses(cpu_cache):
    """Checked mode lets an access through when it lies inside a region an earlier access passed: a write
    to a const argument it read, and a read just past an argument it read whole, are still reported."""
    a, o = np.ones(64, np.float32), np.zeros(64, np.float32)
    k = compile_kernel(PASSED_REGIONS, "read_then_write", arch="cpu", cache_dir=cpu_cache)
    msg = raises(rtc.KernelBoundsError, k, 1, 64, a, o, 64)
    assert "const argument" in msg and "thread (5,0,0)" in msg and (a == 1).all()
    k = compile_kernel(PASSED_REGIONS, "read_then_past", arch="cpu", cache_dir=cpu_cache)
    msg = raises(rtc.KernelBoundsError, k, 1, 64, a, o, 64)
    assert "argument 'a' (const float* a) element 64" in msg and "thread (7,0,0)" in msg


@pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
def test_inter_block_spin_wait_hits_the_watchdog(cpu_kernel, check, monkeypatch):
    # unchecked launches run blocks on several threads where the machine has several cores, and then the
    # waiting block may see the other's write (as on a GPU that runs both); one worker waits for ever
    monkeypatch.setenv("GPUENV_CPU_WORKERS", "1")
    k = cpu_kernel("spin_wait", check=check)
    k.watchdog = 0.5
    raises(rtc.KernelWatchdogError, k, 2, 1, np.zeros(1, np.int32))


@pytest.mark.parametrize("code, what", [
    ('asm volatile("s_nop 0");', "inline assembly"),
    ("int v = __builtin_amdgcn_s_getreg(0);", "__builtin_amdgcn_s_getreg"),
    ("float v = tex1Dfetch<float>(0, 0);", "textures"),
])
def test_unsupported_constructs_are_compile_errors(cpu_cache, code, what):
    src = f'#include <hip/hip_runtime.h>\nextern "C" __global__ void k(float* o) {{\n    {code}\n}}\n'
    with pytest.raises(KernelCompileError, match=what) as info:
        compile_kernel(src, "k", arch="cpu", cache_dir=cpu_cache)
    assert info.value.line == 3 and "not supported by the CPU executor" in str(info.value)


def test_arguments_checked_before_the_launch(cpu_kernel):
    k = cpu_kernel("unguarded_write")
    with pytest.raises(TypeError, match=r"argument 'out' \(float\* out\) expects float elements"):
        k(1, 1, np.zeros(4, np.int32), 4)
    with pytest.raises(TypeError, match=r"argument 'n' \(int n\) expects an integer"):
        k(1, 1, np.zeros(4, np.float32), 4.0)
    with pytest.raises(TypeError, match=r"takes 2 arguments"):
        k(1, 1, np.zeros(4, np.float32))


def test_unchecked_wild_write_is_a_fault_not_a_crash(cpu_cache, warp):
    src = '#include <hip/hip_runtime.h>\nextern "C" __global__ void wild(float* o, long off) {\n    o[off] = 1.0f;\n}\n'
    k = compile_kernel(src, "wild", arch="cpu", warp_size=warp, check=False, cache_dir=cpu_cache)
    with pytest.raises(rtc.KernelFaultError, match=r"kernel 'wild' at <source>\.hip:3, .*segmentation fault"):
        k(1, 1, np.zeros(4, np.float32), 1 << 40)
    out = np.zeros(4, np.float32)
    k(1, 1, out, 2)
    assert out.tolist() == [0, 0, 1, 0]
