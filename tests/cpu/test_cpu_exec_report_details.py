"""What the checked mode's reports say beyond their kind: a race names both accesses (thread and line, as
compute-sanitizer's racecheck does) and is no race when a write after write leaves the same bytes; an
out-of-bounds access counts the argument's elements in its declared type; an access in a loop is reported at
its own line."""

from __future__ import annotations

import ctypes
import os
import shutil

import pytest

np = pytest.importorskip("numpy")

from _checkout import CPU_KERNELS  # noqa: E402

from pytest_gpuenv import rtc  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
SOURCE = os.path.join(CPU_KERNELS, "report_details.hip")


class Params(ctypes.Structure):
    _fields_ = [("a", ctypes.c_float), ("b", ctypes.c_float)]


def _short(msg: str) -> str:
    """The message with the kernel file's folder left out."""
    return msg.replace(os.path.dirname(SOURCE) + "/", "")


def line_of(tag: str) -> str:
    with open(SOURCE) as f:
        for i, line in enumerate(f, 1):
            if f"// {tag}" in line:
                return f"report_details.hip:{i}"
    raise AssertionError(tag)


@pytest.mark.parametrize("lockstep", [False, True], ids=["independent", "lockstep"])
def test_a_write_after_write_of_the_same_value_is_no_race(cpu_kernel, lockstep):
    """hip-tests' ``sharedMem = 0;`` by every thread before a barrier: the same bytes whatever the order."""
    out = np.zeros(3, np.int32)
    cpu_kernel("same_value", lockstep=lockstep)(3, (32, 8), out)
    assert (out == 256).all()


def test_a_write_after_write_of_another_value_is_a_race(cpu_kernel):
    out = np.zeros(256, np.int32)
    with pytest.raises(rtc.KernelRaceError) as info:  # thread 63 wrote 8, thread 64 (the next wave) writes 7
        cpu_kernel("same_then_other")(1, 256, out, 63)
    msg = _short(str(info.value))
    assert f"at {line_of('SEVEN')}, block (0,0,0), thread (64,0,0): write of __shared__ variable 'flag'" in msg, msg
    assert f"conflicts with the write of thread (63,0,0) (linear id 63) at {line_of('OTHER-VALUE')}" in msg, msg
    out = np.zeros(256, np.int32)
    with pytest.raises(rtc.KernelRaceError) as info:  # each thread its own value
        cpu_kernel("thread_ids")(1, 256, out)
    assert str(info.value).count(line_of("OWN-ID")) == 2


def test_a_race_names_both_accesses(cpu_kernel, warp):
    with pytest.raises(rtc.KernelRaceError) as info:
        cpu_kernel("read_after_write")(1, (16, 8), np.zeros(128, np.float32))
    msg = _short(str(info.value))
    # the first read of what another wave wrote: the first lane of wave 1, from the row above
    y = warp // 16
    assert f"at {line_of('RAW-READ')}, block (0,0,0), thread (0,{y},0): read of __shared__ variable 's'" in msg, msg
    assert (f"conflicts with the write of thread (0,{y - 1},0) (linear id {warp - 16}) at "
            f"{line_of('RAW-WRITE')}") in msg, msg


def test_a_write_after_read_names_the_read(cpu_kernel, warp):
    with pytest.raises(rtc.KernelRaceError) as info:
        cpu_kernel("write_after_read")(1, 256, np.zeros(256, np.float32))
    msg = _short(str(info.value))
    assert f"at {line_of('WAR-WRITE')}, block (0,0,0), thread ({warp},0,0)" in msg, msg
    assert f"conflicts with the read of thread ({warp - 1},0,0) (linear id {warp - 1}) at {line_of('WAR-READ')}" in msg


def test_bounds_counted_in_the_declared_type(cpu_kernel):
    """A float4 read split into 4-byte loads is counted in float4s: element 1000 of 1000, not 4000 of 4000."""
    inp, out = np.ones(4000, np.float32), np.zeros(1024, np.float32)
    with pytest.raises(rtc.KernelBoundsError) as info:
        cpu_kernel("float4_helper")(4, 256, out, inp, Params(1, 2), 1.0)
    msg = str(info.value)
    assert "argument 'in' (const float4* in) element 1000; the buffer has 1000 elements of 16 bytes" in msg, msg
    assert line_of("FLOAT4-READ") in msg and "block (3,0,0), thread (232,0,0)" in msg


def test_a_store_in_a_loop_is_reported_at_its_line(cpu_kernel):
    """g++'s loop-invariant motion moved the store of an inlined helper's result to the loop's exit, where it
    was checked once, at the helper's line; the next loop's store went to that loop's ``for`` line."""
    inp, out = np.ones(16, np.float32), np.zeros(250, np.float32)
    with pytest.raises(rtc.KernelBoundsError) as info:
        cpu_kernel("helper_in_loop")(1, 256, out, inp, Params(1, 2), 1.0, 4)
    msg = _short(str(info.value))
    assert f"at {line_of('LOOP-STORE')}, block (0,0,0), thread (250,0,0): write of 4 bytes out of bounds: argument " \
           "'out' (float* out) element 250" in msg, msg
    assert info.value.line == int(line_of("LOOP-STORE").rsplit(":", 1)[1])
