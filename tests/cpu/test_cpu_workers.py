"""Unchecked CPU launches run their blocks on several worker threads (one per core, GPUENV_CPU_WORKERS caps
them): results, reports and printf output are the same whichever thread ran which block."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from _checkout import KERNELS

from pytest_gpuenv import rtc
from pytest_gpuenv.rtc import compile_kernel
from pytest_gpuenv.runtime.cpu import worker_limit

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
HEAD = '#include <hip/hip_runtime.h>\nextern "C" __global__ void k(int* p) {\n'  # the body starts on line 3


def kernel(cache: str, body: str) -> rtc.Kernel:
    return compile_kernel(HEAD + body + "}\n", "k", arch="cpu", check=False, cache_dir=cache)


def test_the_lowest_failing_block_is_reported(cpu_cache):
    k = kernel(cpu_cache, "    assert(blockIdx.x < 3 || blockIdx.x % 2 == 0);\n    p[blockIdx.x] = 1;\n")
    for _ in range(4):  # whichever worker reaches a failing block first
        with pytest.raises(rtc.KernelAssertError, match=r"block \(3,0,0\), thread \(0,0,0\)"):
            k(64, 32, np.zeros(64, np.int32))


def test_printf_comes_in_block_order(cpu_cache, capsys):
    k = kernel(cpu_cache, '    if (threadIdx.x == 0) printf("block %d\\n", (int)blockIdx.x);\n')
    k(1, 64, np.zeros(1, np.int32))  # one block, one worker: printf goes straight to the shared buffer
    assert capsys.readouterr().out == "block 0\n"
    for _ in range(2):
        k(40, 64, np.zeros(1, np.int32))
        assert capsys.readouterr().out == "".join(f"block {b}\n" for b in range(40))


def test_atomics_from_every_block_add_up(cpu_cache):
    k = kernel(cpu_cache, "    atomicAdd(&p[0], 1);\n    atomicMax(&p[1], (int)(blockIdx.x * blockDim.x + threadIdx.x));\n")
    p = np.zeros(2, np.int32)
    k(128, 256, p)
    assert p.tolist() == [128 * 256, 128 * 256 - 1]


def test_a_fault_in_a_later_block_fails_the_launch_only(cpu_cache):
    k = kernel(cpu_cache, "    if (blockIdx.x == 9 && threadIdx.x == 0) *(volatile int*)(8 + p[1]) = 1;\n    p[0] = 1;\n")
    with pytest.raises((rtc.KernelFaultError, rtc.KernelBoundsError), match=r"block \(9,0,0\)"):
        k(32, 64, np.zeros(2, np.int32))
    p = np.zeros(2, np.int32)
    kernel(cpu_cache, "    p[0] = 7;\n")(32, 64, p)  # the executor goes on
    assert p[0] == 7


def test_one_worker_and_several_give_the_same_result(cpu_cache, monkeypatch):
    k = compile_kernel(os.path.join(KERNELS, "matmul_tiled.hip"), "matmul_tiled", arch="cpu", check=False,
                       cache_dir=cpu_cache)
    m = 64
    A, B = np.random.rand(m, m).astype(np.float32), np.random.rand(m, m).astype(np.float32)
    several, one = np.empty((m, m), np.float32), np.empty((m, m), np.float32)
    k((m // 16, m // 16), (16, 16), several, A, B, m, m, m)
    monkeypatch.setenv("GPUENV_CPU_WORKERS", "1")
    k((m // 16, m // 16), (16, 16), one, A, B, m, m, m)
    np.testing.assert_array_equal(several, one)
    np.testing.assert_allclose(one, A @ B, rtol=1e-5)


def test_joined_worker_threads_are_not_taken_for_the_kernels(cpu_cache, monkeypatch):
    """Each parallel launch starts and joins its worker threads; a joined thread can still be listed in
    /proc/self/task for a moment, which must not read as a thread the kernel left running (it did, now and
    then, on a 16-core machine)."""
    monkeypatch.setenv("GPUENV_CPU_WORKERS", "8")
    k = kernel(cpu_cache, "    atomicAdd(&p[0], 1);\n")
    for _ in range(300):
        p = np.zeros(1, np.int32)
        k(8, 32, p)
        assert p[0] == 256


@pytest.mark.parametrize("raw", ["-1", "two", "65", "", "\u00b2"])  # (a superscript two is a digit to str.isdigit)
def test_a_bad_worker_limit_names_the_variable(raw):
    with pytest.raises(ValueError, match=f"GPUENV_CPU_WORKERS={raw!r}"):
        worker_limit({"GPUENV_CPU_WORKERS": raw})
    assert worker_limit({}) == 0 and worker_limit({"GPUENV_CPU_WORKERS": "3"}) == 3


def test_exit_in_a_later_block_ends_the_executor_not_pytest(cpu_cache):
    src = "#include <stdlib.h>\n" + HEAD + "    if (blockIdx.x == 5) exit(3);\n    p[0] = 1;\n}\n"
    k = compile_kernel(src, "k", arch="cpu", check=False, cache_dir=cpu_cache)
    with pytest.raises(rtc.KernelExitError, match="exit"):
        k(16, 32, np.zeros(1, np.int32))
    p = np.zeros(1, np.int32)
    kernel(cpu_cache, "    p[0] = 7;\n")(16, 32, p)  # a fresh executor process
    assert p[0] == 7


#: the body's start: block 0's first thread spins, then fails where p[0] is set; meanwhile the other
#: workers run later blocks, which a launch on one worker never reaches
LATE_FAILURE = ("    if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
                "        for (volatile long i = 0; i < 200000000; i = i + 1) {}\n"
                "        assert(!p[0]);\n    }\n")


def test_printf_of_blocks_after_the_failing_one_is_left_out(cpu_cache, capsys):
    # block 0 fails late; the other workers meanwhile run (and print from) later blocks, which a launch
    # on one worker never reaches: their output is not the launch's
    k = kernel(cpu_cache, LATE_FAILURE + '    if (threadIdx.x == 0) printf("block %d\\n", (int)blockIdx.x);\n')
    with pytest.raises(rtc.KernelAssertError, match=r"block \(0,0,0\)"):
        k(64, 1, np.ones(1, np.int32))
    assert capsys.readouterr().out == ""


def test_warnings_of_blocks_after_the_failing_one_are_left_out(cpu_cache, recwarn):
    # as for printf: a warning first seen in a block after the failing one is not the launch's (one worker
    # never runs that block; others may, by timing)
    k = kernel(cpu_cache, LATE_FAILURE + "    if (blockIdx.x > 0) p[1] = __shfl_xor((int)threadIdx.x, 64);\n")
    with pytest.raises(rtc.KernelAssertError, match=r"block \(0,0,0\)"):
        k(64, 64, np.ones(2, np.int32))
    assert not [w for w in recwarn if "__shfl_xor mask" in str(w.message)]
    k(64, 64, np.zeros(2, np.int32))  # no failure: the later blocks' warning is the launch's
    assert [w for w in recwarn if "__shfl_xor mask" in str(w.message)]


def test_a_block_that_never_ends_on_a_helper_hits_the_watchdog(cpu_cache):
    # block 0 ends at once and its worker waits for the others: the one that spins is still stopped
    # by the watchdog, naming its line (not killed by pytest after the grace period)
    k = kernel(cpu_cache, "    if (blockIdx.x == 1) { __atomic_store_n(p, 1, __ATOMIC_SEQ_CST); for (;;) {} }\n"
                          "    while (!__atomic_load_n(p, __ATOMIC_SEQ_CST)) {}\n")  # block 0: until block 1 runs
    k.watchdog = 0.5
    with pytest.raises(rtc.KernelWatchdogError, match=r"block \(1,0,0\)") as info:
        k(2, 1, np.zeros(1, np.int32))
    assert info.value.line == 3


@pytest.mark.parametrize("flag, unique", [("-fgnu-unique", True), ("-fno-gnu-unique", False)])
def test_a_module_with_a_gnu_unique_symbol_stays_on_one_worker(tmp_path, flag, unique):
    # a compiler that ignores -fno-gnu-unique leaves a template's static __shared__ STB_GNU_UNIQUE: the
    # loader binds it process-wide, so every copy of the module (one per worker) would share it
    from pytest_gpuenv.rtc._cpu import binutil, find_cxx, module_symbols

    cxx = find_cxx()
    if cxx is None or "clang" in os.path.basename(cxx):
        pytest.skip("needs g++ (clang makes no GNU unique symbols)")
    src = tmp_path / "m.cpp"
    src.write_text("template <int N> int* f() { static int x[N]; return x; }\nint* g() { return f<3>(); }\n")
    so = tmp_path / "m.so"
    subprocess.run([cxx, "-shared", "-fPIC", flag, "-o", str(so), str(src)], check=True)
    assert module_symbols(binutil(cxx, "nm"), str(so))[2] is unique
