"""Speed of the CPU executor on this machine: vector add (1M floats, 256-thread blocks), tiled matmul
256x256, a shared-memory block sum of 1M floats (256-thread blocks, 9 barriers each), unchecked and
checked; a cold compile and a cache hit; the speed-up from one core to two; and, where a HIP-CPU checkout
is given, AMD's HIP-CPU on the same kernels beside ours (timed around its launch alone, and around what a
user's call does: hipMemcpy of the inputs, the launch, hipMemcpy of the output back); a 4-byte launch's
round trip to the executor's child process; where a vector add call's time goes (the copies into the
executor's process and back, the request, Python).

    python3 benchmarks/cpu_exec.py
    HIP_CPU_DIR=/path/to/HIP-CPU python3 benchmarks/cpu_exec.py   # also the side-by-side (needs TBB)

Goals (2-core runner): vector add <= 50 ms unchecked / 150 ms checked; matmul <= 150 ms / 0.6 s; block sum
unchecked no slower than HIP-CPU on one core (142 ms measured there); cold compile <= 1 s; cache hit
<= 2 ms; 4-byte launch round trip <= 100 us (the median of 2,000); two cores at least 1.7x faster than
one for vector add, matmul and the block sum. The first figures are the best of a few runs; the 1-core/2-core and HIP-CPU figures are medians of interleaved runs,
each in a fresh process pinned to its cores (``sched_setaffinity``); ours are timed around the Python call
(the argument copies included), HIP-CPU's around its launch alone and around the launch with its hipMemcpys.
Unchecked launches run their blocks on one worker thread per core the process may use (``GPUENV_CPU_WORKERS``
caps them), so the first unchecked figures use every core here; the "1 core" rows are the one-core ones.
For one-core comparisons on a busy machine, count instructions instead (``valgrind --tool=callgrind``).
Last measured on a shared 2-core VM, one core, the kernels alone (a C++ driver calling the executor library,
medians of interleaved pinned runs on a busy VM): block sum about 0.9x HIP-CPU's time (146 against 159 ms),
matmul about 0.7x (44 against 63 ms), vector add about 0.5x; callgrind: 613M against 749M, 280M against
341M and 48M against 93M instructions (docs/explanation/cpu-executor.md).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# numpy's reference matmul (A @ B) must not leave BLAS threads spinning on the cores the launches are timed on:
# on two pinned cores they took one of them for the first launches after it (the measured processes inherit this)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _hipcpu_driver import HIP_CPU_DRIVER

from pytest_gpuenv.rtc import compile_kernel

KERNELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels")
GOALS = {"vector_add unchecked": 0.050, "vector_add checked": 0.150, "matmul_tiled unchecked": 0.150,
         "matmul_tiled checked": 0.6, "block_sum unchecked": 0.142, "block_sum checked": None,
         "cold compile": 1.0, "cache hit": 0.002, "4-byte launch round trip": 1e-4}
SPEEDUP_GOAL = 1.7
#: a shared-memory tree sum per 256-thread block: one barrier after the load and 8 in the loop
BLOCK_SUM = """#include <hip/hip_runtime.h>

extern "C" __global__ void block_sum(float* out, const float* in, int n) {
    __shared__ float s[256];
    const int tid = threadIdx.x;
    const int i = blockIdx.x * 256 + tid;
    s[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int stride = 128; stride > 0; stride /= 2) {
        if (tid < stride) s[tid] += s[tid + stride];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = s[0];
}
"""
N, M = 1 << 20, 256
TINY = """#include <hip/hip_runtime.h>
extern "C" __global__ void one(int* p) { p[0] = 1; }
"""


def best(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def line(name: str, seconds: float, extra: str = "") -> None:
    goal = GOALS[name]
    if goal is None:
        print(f"{name:<24} {seconds * 1e3:9.2f} ms   {'no goal':<22}  {extra}")
        return
    verdict = "ok" if seconds <= goal else "OVER"
    print(f"{name:<24} {seconds * 1e3:9.3f} ms   goal {goal * 1e3:7.1f} ms  {verdict}  {extra}")


def kernel_path(name: str, tmp: str) -> str:
    if name == "block_sum":
        path = os.path.join(tmp, "block_sum.hip")
        with open(path, "w") as f:
            f.write(BLOCK_SUM)
        return path
    return os.path.join(KERNELS, name + ".hip")


def inputs(name: str) -> tuple:
    """(grid, block, args, expected output, the output array): the same inputs as the HIP-CPU driver."""
    i = np.arange(N)
    a, b = ((i % 7) * 0.5).astype(np.float32), ((i % 5) * 0.25).astype(np.float32)
    if name == "vector_add":
        out = np.empty_like(a)
        return N // 256, 256, (out, a, b, N), a + b, out
    if name == "matmul_tiled":
        j = np.arange(M * M)
        A, B = ((j % 7) * 0.5).astype(np.float32).reshape(M, M), ((j % 5) * 0.25).astype(np.float32).reshape(M, M)
        C = np.empty((M, M), np.float32)
        return (M // 16, M // 16), (16, 16), (C, A, B, M, M, M), A @ B, C
    out = np.empty(N // 256, np.float32)
    return N // 256, 256, (out, a, N), a.reshape(-1, 256).sum(axis=1), out


def measure_here(name: str, check: bool, reps: int, cache: str) -> list[float]:
    """Time ``reps`` launches of one kernel in this process (after a warm-up launch)."""
    src_dir = cache + "-src"  # one block_sum.hip per run, so every child hits the same cache entry
    os.makedirs(src_dir, exist_ok=True)
    k = compile_kernel(kernel_path(name, src_dir), name, arch="cpu", check=check, cache_dir=cache)
    grid, block, args, want, out = inputs(name)
    k(grid, block, *args)
    if not np.allclose(out, want, rtol=1e-4, atol=1e-3):
        raise SystemExit(f"{name}: wrong result")
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        k(grid, block, *args)
        times.append(time.perf_counter() - t)
    return times


def measure_parts(reps: int, cache: str) -> dict[str, float]:
    """Median seconds of a vector add call's parts, in this process: the copies in and back (the runtime's
    ``copy_all``), the request to the executor's process (the launch there and the round trip) and the call."""
    from pytest_gpuenv.runtime import cpu as runtime
    from pytest_gpuenv.runtime.cpu import child as _cpu_child
    from pytest_gpuenv.runtime.cpu import protocol

    parts: dict[str, list[float]] = {"copy in": [], "request": [], "copy out": []}
    copy_all, request = runtime.copy_all, _cpu_child.Child.request

    def timed_copy(moves, threads):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        copy_all(moves, threads)
        parts["copy out" if len(parts["copy in"]) > len(parts["copy out"]) else "copy in"].append(time.perf_counter() - t)

    def timed_request(self, *args):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return request(self, *args)
        finally:
            if args[0] == protocol.OP_LAUNCH:
                parts["request"].append(time.perf_counter() - t)

    runtime.copy_all, _cpu_child.Child.request = timed_copy, timed_request  # type: ignore[method-assign]
    calls = measure_here("vector_add", False, reps, cache)
    return {"call": statistics.median(calls), **{k: statistics.median(v[-reps:]) for k, v in parts.items()}}


def breakdown(cache: str, rounds: int = 5) -> None:
    """Where a vector add call's time goes, on one core and on two (medians over ``rounds`` fresh processes
    of 5 launches each, interleaved)."""
    cpus = sorted(os.sched_getaffinity(0))
    uses = [("1 core", {cpus[0]})] + ([("2 cores", set(cpus[:2]))] if len(cpus) > 1 else [])
    got: dict[str, dict[str, list[float]]] = {label: {} for label, _ in uses}
    for _ in range(rounds):
        for label, use in uses:
            out = pinned([sys.executable, os.path.abspath(__file__), "--parts", "5", cache], use)
            for k, v in json.loads(out.strip().splitlines()[-1]).items():
                got[label].setdefault(k, []).append(v)
    print("vector_add call, where the time goes (medians of interleaved fresh processes):")
    meds = {label: {k: statistics.median(v) * 1e3 for k, v in parts.items()} for label, parts in got.items()}
    for label, med in meds.items():
        rest = med["call"] - med["copy in"] - med["request"] - med["copy out"]
        print(f"  {label:<8} {med['call']:6.2f} ms: copy in (12 MB) {med['copy in']:.2f} ms, the executor's process "
              f"(the launch, the round trip) {med['request']:.2f} ms, copy back (4 MB) {med['copy out']:.2f} ms, "
              f"the rest (Python) {rest:.2f} ms")
    if len(meds) == 2:  # which parts two cores speed up: the copies are memory-bound, as memcpy_line shows
        one, two = meds.values()
        print("  2 cores against 1: " + ", ".join(f"{k} {one[k] / two[k]:.2f}x" for k in ("call", "copy in", "request",
                                                                                         "copy out")))


def pinned(cmd: list[str], cpus: set[int]) -> str:
    """Run ``cmd`` in a fresh process limited to ``cpus``; its stdout."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    if p.returncode:
        raise RuntimeError(f"{cmd[0]} failed ({p.returncode}): {p.stderr[-2000:]}")
    return p.stdout


def ours(name: str, cpus: set[int], reps: int, cache: str) -> list[float]:
    out = pinned([sys.executable, os.path.abspath(__file__), "--measure", name, str(reps), cache], cpus)
    return list(json.loads(out.strip().splitlines()[-1]))


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def memcpy_line(rounds: int = 20) -> None:
    """What two cores gain on a plain copy of 12 MB here (the vector add's inputs): the memory's limit."""
    from pytest_gpuenv.runtime.cpu.copies import copy_all

    n = 12 << 20
    src, dst = np.ones(n, np.uint8), np.zeros(n, np.uint8)
    moves = [(dst.ctypes.data, src.ctypes.data, n)]
    t1, t2 = [], []
    for _ in range(rounds):
        for threads, times in ((1, t1), (2, t2)):
            t = time.perf_counter()
            copy_all(moves, threads)
            times.append(time.perf_counter() - t)
    print(f"  memcpy 12 MB   1 thread {median_ms(t1):8.2f} ms  2 threads {median_ms(t2):8.2f} ms  "
          f"{median_ms(t1) / median_ms(t2):4.2f}x  (the memory's own 2-core gain here)")


def speedup(cache: str, rounds: int = 5) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        print(f"2-core speed-up: skipped (this process may use {len(cpus)} core)")
        return
    one, two = {cpus[0]}, set(cpus[:2])
    print(f"2-core speed-up (unchecked; medians of {rounds} interleaved rounds of 3 launches, fresh process each):")
    for name in ("vector_add", "matmul_tiled", "block_sum"):
        t1, t2 = [], []
        for _ in range(rounds):
            t1 += ours(name, one, 3, cache)
            t2 += ours(name, two, 3, cache)
        ratio = median_ms(t1) / median_ms(t2)
        verdict = "ok" if ratio >= SPEEDUP_GOAL else "UNDER"
        note = "" if ratio >= 1.2 else "  (one worker thread? GPUENV_CPU_WORKERS, or a busy machine)"
        print(f"  {name:<14} 1 core {median_ms(t1):8.2f} ms  2 cores {median_ms(t2):8.2f} ms  "
              f"{ratio:4.2f}x  goal {SPEEDUP_GOAL}x {verdict}{note}")
    memcpy_line()


def build_hip_cpu(hip_cpu_dir: str, tmp: str) -> str:
    """Build the HIP-CPU driver (the same kernel sources) in ``tmp``; the executable's path."""
    for name in ("vector_add", "matmul_tiled"):
        shutil.copy(os.path.join(KERNELS, name + ".hip"), tmp)
    kernel_path("block_sum", tmp)
    with open(os.path.join(tmp, "driver.cpp"), "w") as f:
        f.write(HIP_CPU_DRIVER)
    exe = os.path.join(tmp, "driver")
    cxx = os.environ.get("CXX", "g++")
    subprocess.run([cxx, "-std=c++17", "-O2", "-I", os.path.join(hip_cpu_dir, "include"), "-I", tmp,
                    os.path.join(tmp, "driver.cpp"), "-o", exe, "-ltbb", "-lpthread"],
                   check=True, capture_output=True, text=True, timeout=600)
    return exe


def hip_cpu(exe: str, name: str, cpus: set[int], reps: int, tmp: str, copies: bool = False) -> tuple[list[float], bool]:
    """(seconds per launch, whether HIP-CPU's result matches numpy); ``copies``: each time also covers the
    inputs' hipMemcpy to device buffers and the output's back, as our call copies its arguments."""
    out_file = os.path.join(tmp, name + ".out")
    times = [float(t) for t in pinned([exe, name, str(reps), out_file, "copies" if copies else "launch"], cpus).split()]
    *_, want, out = inputs(name)
    got = np.fromfile(out_file, np.float32).reshape(out.shape)
    return times, bool(np.allclose(got, want, rtol=1e-4, atol=1e-3))


def side_by_side(cache: str, rounds: int = 5) -> None:
    hip_cpu_dir = os.environ.get("HIP_CPU_DIR")
    if not hip_cpu_dir:
        print("HIP-CPU comparison: skipped (set HIP_CPU_DIR to a checkout of ROCm/HIP-CPU; needs TBB)")
        return
    tmp = tempfile.mkdtemp(prefix="gpuenv-hipcpu-")
    try:
        exe = build_hip_cpu(hip_cpu_dir, tmp)
    except (subprocess.CalledProcessError, OSError) as exc:
        err = getattr(exc, "stderr", "") or str(exc)
        print(f"HIP-CPU comparison: skipped (HIP-CPU did not build: {err.strip().splitlines()[-1:]})")
        return
    cpus = sorted(os.sched_getaffinity(0))
    print(f"HIP-CPU ({hip_cpu_dir}) beside ours, unchecked; medians of {rounds} interleaved rounds of 3 launches. Ours is "
          "a Python call (its arguments copied to the executor's process and back); HIP-CPU's 'launch' is timed around "
          "the launch alone, its '+copies' around what a user's call does (hipMemcpy of the inputs, the launch, "
          "hipMemcpy of the output back):")
    for label, use in (("1 core", {cpus[0]}), (f"{min(2, len(cpus))} cores", set(cpus[:2]))):
        for name in ("vector_add", "matmul_tiled", "block_sum"):
            t_ours, t_launch, t_copies, right = [], [], [], True
            for _ in range(rounds):
                t_ours += ours(name, use, 3, cache)
                t, ok = hip_cpu(exe, name, use, 3, tmp)
                t_launch += t
                t, ok2 = hip_cpu(exe, name, use, 3, tmp, copies=True)
                t_copies += t
                right = right and ok and ok2
            mine = median_ms(t_ours)
            print(f"  {label:<8} {name:<14} ours {mine:8.2f} ms  HIP-CPU launch {median_ms(t_launch):8.2f} ms "
                  f"(ours/it {mine / median_ms(t_launch):4.2f})  +copies {median_ms(t_copies):8.2f} ms "
                  f"(ours/it {mine / median_ms(t_copies):4.2f})  HIP-CPU result {'ok' if right else 'WRONG'}")
    shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    if sys.argv[1:2] == ["--measure"]:  # a pinned child of speedup()/side_by_side(): kernel, launches, cache
        print(json.dumps(measure_here(sys.argv[2], False, int(sys.argv[3]), sys.argv[4])))
        return
    if sys.argv[1:2] == ["--parts"]:  # a pinned child of breakdown(): launches, cache
        print(json.dumps(measure_parts(int(sys.argv[2]), sys.argv[3])))
        return
    cache = tempfile.mkdtemp(prefix="gpuenv-bench-")
    src_dir = tempfile.mkdtemp(prefix="gpuenv-bench-src-")
    n = 1 << 20
    a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    out = np.empty_like(a)
    m = 256
    A, B = np.random.randn(m, m).astype(np.float32), np.random.randn(m, m).astype(np.float32)
    C = np.empty((m, m), np.float32)
    for check in (False, True):
        mode = "checked" if check else "unchecked"
        va = compile_kernel(os.path.join(KERNELS, "vector_add.hip"), "vector_add", arch="cpu", check=check,
                            cache_dir=cache)
        mm = compile_kernel(os.path.join(KERNELS, "matmul_tiled.hip"), "matmul_tiled", arch="cpu", check=check,
                            cache_dir=cache)
        va(n // 256, 256, out, a, b, n)  # warm: loads the executor and the module
        t = best(lambda va=va: va(n // 256, 256, out, a, b, n))
        line(f"vector_add {mode}", t, f"{n / t / 1e6:.0f} M elements/s")
        t = best(lambda mm=mm: mm((m // 16, m // 16), (16, 16), C, A, B, m, m, m), 3)
        line(f"matmul_tiled {mode}", t, f"{m * m / t / 1e6:.2f} M threads/s, 32 barriers each")
        bs = compile_kernel(kernel_path("block_sum", src_dir), "block_sum", arch="cpu", check=check, cache_dir=cache)
        sums = np.empty(n // 256, np.float32)
        bs(n // 256, 256, sums, a, n)
        t = best(lambda bs=bs, sums=sums: bs(n // 256, 256, sums, a, n), 3)
        line(f"block_sum {mode}", t, f"{n / t / 1e6:.1f} M elements/s, 9 barriers per block")
    for check in (False, True):
        one = compile_kernel(TINY, "one", arch="cpu", check=check, cache_dir=cache)
        p = np.zeros(1, np.int32)
        one(1, 1, p)
        times = []
        for _ in range(2000):
            t = time.perf_counter()
            one(1, 1, p)
            times.append(time.perf_counter() - t)
        line("4-byte launch round trip", sorted(times)[len(times) // 2],
             f"{'checked' if check else 'unchecked'}, median of 2,000 (best {min(times) * 1e6:.0f} us)")
    src = os.path.join(KERNELS, "reduce_sum.hip")
    t = time.perf_counter()
    k = compile_kernel(src, "reduce_sum", arch="cpu", cache_dir=cache)
    line("cold compile", time.perf_counter() - t, f"reduce_sum, checked, cache_hit={k.cache_hit}")
    t = best(lambda: compile_kernel(src, "reduce_sum", arch="cpu", cache_dir=cache), 20)
    line("cache hit", t, "compile_kernel of the same source again")
    breakdown(cache)
    speedup(cache)
    side_by_side(cache)


if __name__ == "__main__":
    main()
