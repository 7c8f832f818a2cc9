"""Cooperative launches on the CPU executor (``kernel(grid, block, ..., cooperative=True)``), at wave64 and
wave32, checked and unchecked (tests/data/cpu_kernels/cooperative.hip): ``cooperative_groups::this_grid()
.sync()`` waits for every block, each block keeps its own ``__shared__`` memory across it and the grid shares
its ``__device__`` variables (runtime/cpu/src/coop.cpp). A grid.sync() that some block never reaches, or one
outside a cooperative launch, is reported, never a hang; so are a fault and a hang in one block while the
others wait."""

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
SOURCE = os.path.join(CPU_KERNELS, "cooperative.hip")


@CHECK
def test_each_block_reads_its_neighbours_write_after_grid_sync(cpu_kernel, check):
    blocks, threads = 8, 64
    slot, got, valid = np.zeros(blocks, np.int32), np.zeros(blocks * threads, np.int32), np.zeros(blocks, np.int32)
    cpu_kernel("neighbours", check=check)(blocks, threads, slot, got, valid, cooperative=True)
    b, t = np.arange(blocks).repeat(threads), np.tile(np.arange(threads), blocks)
    # the neighbour's slot (written before grid.sync), then this block's own __shared__ value
    np.testing.assert_array_equal(got, ((b + 1) % blocks + 1) * 100000 + b * 1000 + (t + 1) % threads)
    assert valid.tolist() == [1 + 10 * blocks * threads] * blocks  # is_valid(), group_size()


@CHECK
def test_phases_keep_dynamic_shared_memory_and_share_device_variables(cpu_kernel, check):
    blocks, threads, rounds = 5, 32, 3
    out = np.zeros(rounds * blocks * threads, np.int32)
    cpu_kernel("phases", check=check)(blocks, threads, out, rounds, cooperative=True, shared_mem=threads * 4)
    r, b = np.arange(rounds).repeat(blocks * threads), np.tile(np.arange(blocks).repeat(threads), rounds)
    np.testing.assert_array_equal(out, blocks * threads * 1000 + b + r)


def test_grid_sync_needs_a_cooperative_launch(cpu_kernel):
    slot, got, valid = np.zeros(2, np.int32), np.zeros(128, np.int32), np.zeros(2, np.int32)
    with pytest.raises(rtc.KernelBarrierError, match=r"grid barrier .*cooperative\.hip:12 needs a cooperative launch"):
        cpu_kernel("neighbours")(2, 64, slot, got, valid)


@CHECK
def test_a_block_that_returns_before_grid_sync_is_reported(cpu_kernel, check):
    out = np.zeros(8, np.int32)
    with pytest.raises(rtc.KernelBarrierError, match=r"block \(2,0,0\).*block 2 of a cooperative launch returned "
                                                     r"without reaching the grid\.sync\(\) at line 38, where blocks 0-1"):
        cpu_kernel("early", check=check)(6, 16, out, cooperative=True)
    with pytest.raises(rtc.KernelBarrierError, match=r"block \(1,0,0\).*cooperative\.hip:44: block 0 of this "
                                                     r"cooperative launch returned without reaching it"):
        cpu_kernel("late", check=check)(6, 16, out, cooperative=True)


@CHECK
def test_a_fault_while_other_blocks_wait_fails_the_launch_and_the_next_one_runs(cpu_kernel, check):
    out = np.zeros(8, np.int32)
    with pytest.raises(rtc.KernelLaunchError, match=r"cooperative\.hip:50, block \(3,0,0\), thread \(5,0,0\)"):
        cpu_kernel("faulty", check=check)(6, 16, out, cooperative=True)
    slot, got, valid = np.zeros(3, np.int32), np.zeros(3 * 64, np.int32), np.zeros(3, np.int32)
    cpu_kernel("neighbours", check=check)(3, 64, slot, got, valid, cooperative=True)
    assert slot.tolist() == [1, 2, 3]


@CHECK
def test_a_hang_while_other_blocks_wait_is_the_watchdog(cpu_kernel, check, monkeypatch):
    monkeypatch.setenv("GPUENV_CPU_WATCHDOG", "0.3")
    with pytest.raises(rtc.KernelWatchdogError, match=r"cooperative\.hip:57, block \(2,0,0\).*a cooperative launch "
                                                      r"runs one block at a time between grid\.sync\(\) calls"):
        cpu_kernel("spins", check=check)(4, 8, np.zeros(8, np.int32), cooperative=True)


def test_printf_comes_in_block_order(cpu_kernel, capsys):
    cpu_kernel("prints")(3, 2, np.zeros(1, np.int32), cooperative=True)
    blocks = [f"block {b} before\nblock {b} before\nblock {b} after\n" for b in range(3)]
    assert capsys.readouterr().out == "".join(blocks)


def test_at_most_64_blocks_and_16384_threads_and_the_next_launch_runs(cpu_kernel):
    with pytest.raises(rtc.KernelLaunchError, match=r"a cooperative launch of 65 blocks of 16 threads: the CPU executor "
                                                    r"holds at most 64 blocks and 16384 threads at once"):
        cpu_kernel("early")(65, 16, np.zeros(1, np.int32), cooperative=True)
    with pytest.raises(rtc.KernelLaunchError, match=r"of 32 blocks of 1024 threads"):
        cpu_kernel("early")(32, 1024, np.zeros(1, np.int32), cooperative=True)
    for _ in range(3):  # the largest: each helper gives its fibers (two mappings each) back after it
        out = np.zeros(16 * 1024, np.int32)
        cpu_kernel("phases")(16, 1024, out, 1, cooperative=True, shared_mem=1024 * 4)
        np.testing.assert_array_equal(out, 16 * 1024 * 1000 + np.arange(16).repeat(1024))


def test_a_failed_launch_keeps_the_output_of_every_block_that_ran(cpu_kernel, capsys):
    with pytest.raises(rtc.KernelLaunchError):
        cpu_kernel("faulty_prints")(4, 2, np.zeros(8, np.int32), cooperative=True)
    # every block printed before the grid.sync(); block 1 faulted after it, before blocks 2 and 3 went on
    assert capsys.readouterr().out == "".join(f"block {b} before\n" for b in range(4))


def test_cooperative_must_be_a_bool(cpu_kernel):
    with pytest.raises(TypeError, match="cooperative must be True or False, got 1"):
        cpu_kernel("early")(1, 16, np.zeros(1, np.int32), cooperative=1)
