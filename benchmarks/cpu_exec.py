"""Speed of the CPU executor on this machine: vector add (1M floats, 256-thread blocks), tiled matmul
256x256, a shared-memory block sum of 1M floats (256-thread blocks, 9 barriers each), unchecked and
checked; a cold compile and a cache hit; the speed-up from one core to two; and, where a HIP-CPU checkout
is given, AMD's HIP-CPU on the same kernels beside ours (timed around its launch alone, and around what a
user's call does: hipMemcpy of the inputs, the launch, hipMemcpy of the output back); a 4-byte launch's
round trip to the executor's child process; where a vector add call's time goes (the copies into the
executor's process and back, the request, Python).

    python3 benchmarks/cpu_exec.py
    HIP_CPU_DIR=/path/to/HIP-CPU python3 benchmarks/cpu_exec.py   # also the side-by-side (needs TBB)
    python3 benchmarks/cpu_exec.py --only-hecbench                # just the HeCBench kernels

HeCBench's kernels (issue 38): stencil1d (1M), ``scan_bcao<int, 512>`` (2M), murmurhash3 (4,096 keys),
haversine (1M), popcount's pc1 (4M) and fhd (4,096 samples x 4,096 ``__constant__`` voxels), read at run time
from a copy of HeCBench's ``src/`` (``GPUENV_HECBENCH``, else ``.corpus/hecbench``, as tests/_corpus.py finds
it; never kept in this repository; skipped with a line where absent), their device part (the file before its
host code) compiled as is, launched as each ``main`` launches them, each result checked. Per kernel, on one
core, the executor process's CPU time per launch unchecked and checked and their ratio (goal: checked at most
3x unchecked): CPU time, not wall time, because this 2-core machine is shared.

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
from typing import Any, Callable, NamedTuple

# numpy's reference matmul (A @ B) must not leave BLAS threads spinning on the cores the launches are timed on:
# on two pinned cores they took one of them for the first launches after it (the measured processes inherit this)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _hipcpu_driver import HIP_CPU_DRIVER

from pytest_gpuenv.rtc import compile_kernel

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(REPO, "kernels")
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


# --- HeCBench kernels (issue 38's "Speed"): read from a copy of HeCBench's src/, never kept here ------------

#: HeCBench's ``src/`` (or a copy laid out the same), as tests/_corpus.py finds it: not in this repository
HECBENCH = os.environ.get("GPUENV_HECBENCH") or os.path.join(REPO, ".corpus", "hecbench")


def _murmur3_x64_128(key: bytes, seed: int) -> tuple[int, int]:
    """MurmurHash3_x64_128 (Austin Appleby's, public domain) in Python: the reference for a few keys."""
    m = (1 << 64) - 1

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (64 - r))) & m

    def fmix(k: int) -> int:
        k ^= k >> 33
        k = (k * 0xFF51AFD7ED558CCD) & m
        k ^= k >> 33
        k = (k * 0xC4CEB9FE1A85EC53) & m
        return k ^ (k >> 33)

    c1, c2, h1, h2, n = 0x87C37B91114253D5, 0x4CF5AD432745937F, seed, seed, len(key)
    for i in range(n // 16):
        k1, k2 = int.from_bytes(key[16 * i:16 * i + 8], "little"), int.from_bytes(key[16 * i + 8:16 * i + 16], "little")
        h1 ^= (rotl((k1 * c1) & m, 31) * c2) & m
        h1 = (rotl(h1, 27) + h2) & m
        h1 = (h1 * 5 + 0x52DCE729) & m
        h2 ^= (rotl((k2 * c2) & m, 33) * c1) & m
        h2 = (rotl(h2, 31) + h1) & m
        h2 = (h2 * 5 + 0x38495AB5) & m
    tail = key[n // 16 * 16:]
    if len(tail) > 8:
        h2 ^= (rotl((int.from_bytes(tail[8:], "little") * c2) & m, 33) * c1) & m
    if tail:
        h1 ^= (rotl((int.from_bytes(tail[:8], "little") * c1) & m, 31) * c2) & m
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & m
    h2 = (h2 + h1) & m
    h1, h2 = fmix(h1), fmix(h2)
    h1 = (h1 + h2) & m
    return h1, (h2 + h1) & m


class HecCase(NamedTuple):
    """One HeCBench kernel: its file under HECBENCH, where its host code starts (the device part before it is
    compiled: the CPU build does not declare the host HIP runtime API that main calls), the kernel's name, the
    include folders its Makefile adds, and ``setup(module)`` -> (grid, block, args, check(): whether the outputs
    are right)."""

    label: str
    path: str
    host_from: str
    kernel: str
    include_dirs: tuple[str, ...]
    setup: Callable[[Any], tuple[Any, Any, tuple, Callable[[], bool]]]


def _stencil1d(_: Any) -> tuple:
    n, radius = 1 << 20, 7  # main: length 1M, RADIUS 7, BLOCK_SIZE 256; the input padded by RADIUS
    a = np.arange(n + radius, dtype=np.int32)
    out = np.empty(n, np.int32)
    padded = np.concatenate([np.zeros(radius, np.int64), a.astype(np.int64)])
    want = np.convolve(padded, np.ones(2 * radius + 1, np.int64), "valid")[:n].astype(np.int32)
    return n // 256, 256, (a, out), lambda: bool(np.array_equal(out, want))


def _scan_bcao(_: Any) -> tuple:
    n_per, nblocks = 512, (2 << 20) // 512  # 2M ints in blocks of 512; main's grid is 16 x CUs, grid-stride
    x = (np.arange(n_per * nblocks) % 5 + 1).astype(np.int32)
    y = np.empty_like(x)
    want = (np.cumsum(x.reshape(nblocks, n_per), axis=1, dtype=np.int64) - x.reshape(nblocks, n_per)).ravel()
    return 16 * 110, n_per // 2, (nblocks, y, x), lambda: bool(np.array_equal(y, want.astype(np.int32)))


def _murmurhash3(_: Any) -> tuple:
    nkeys = 4096  # main: key i has rand() % 10000 bytes, byte c = c % 256, seed i; keys laid end to end
    lengths = np.random.default_rng(3).integers(0, 10000, nkeys).astype(np.uint32)
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.uint64)]).astype(np.uint32)
    keys = np.concatenate([np.arange(int(n_), dtype=np.uint32) % 256 for n_ in lengths]).astype(np.uint8)
    out = np.empty(2 * nkeys, np.uint64)

    def check() -> bool:  # the first 16 keys against the Python reference
        return all(tuple(int(v) for v in out[2 * i:2 * i + 2]) ==
                   _murmur3_x64_128(keys[offsets[i]:offsets[i + 1]].tobytes(), i) for i in range(16))
    return (nkeys + 255) // 256, 256, (keys, offsets, lengths, out, nkeys), check


def _haversine(_: Any) -> tuple:
    n = 1 << 20  # main: n points of (lat, lon, lat, lon) in degrees, 256-thread blocks
    rng = np.random.default_rng(4)
    p = np.stack([rng.uniform(-90, 90, n), rng.uniform(-180, 180, n), rng.uniform(-90, 90, n),
                  rng.uniform(-180, 180, n)], axis=1)
    dist = np.empty(n)
    ay, ax, by, bx = np.radians(p).T
    want = 2 * 6371.0 * np.arcsin(np.sqrt(np.sin((by - ay) / 2) ** 2 + np.sin((bx - ax) / 2) ** 2 * np.cos(ay) *
                                          np.cos(by)))
    return (n + 255) // 256, 256, (p, dist, n), lambda: bool(np.allclose(dist, want, rtol=1e-9, atol=1e-6))


def _popcount(_: Any) -> tuple:
    n = 4 << 20  # main: 4M 64-bit words, 256-thread blocks; pc1, its first kernel (a SWAR count)
    data = np.random.default_rng(2).integers(0, 2**63, n, dtype=np.uint64)
    r = np.empty(n, np.int32)
    want = np.unpackbits(data.view(np.uint8)).reshape(n, 64).sum(axis=1)
    return n // 256, 256, (data, r, n), lambda: bool(np.array_equal(r, want))


def _fhd(module: Any) -> tuple:
    samples, voxels = 4096, 4096  # one chunk of main's CHUNK_S voxels in __constant__ k; 256-thread blocks
    rng = np.random.default_rng(5)
    x, y, z = (np.float32(c) + rng.choice([0.1, -0.1], samples).astype(np.float32) for c in (0.3, 0.2, 0.1))
    kxyz = np.stack([np.float32(c) + rng.choice([0.1, -0.1], voxels).astype(np.float32) for c in (0.1, 0.2, 0.3)], 1)
    rmu = imu = (np.arange(voxels) / voxels).astype(np.float32)
    rfhd, ifhd = (np.arange(samples) / samples).astype(np.float32), (np.arange(samples) / samples).astype(np.float32)
    module.get_global("k", np.float32)[:3 * voxels] = kxyz.ravel()
    e = 2 * np.pi * (np.outer(x, kxyz[:, 0]) + np.outer(y, kxyz[:, 1]) + np.outer(z, kxyz[:, 2]))
    want_r = rfhd + (np.cos(e) @ rmu - np.sin(e) @ imu)
    want_i = ifhd + (np.cos(e) @ imu + np.sin(e) @ rmu)
    args = (rmu, imu, rfhd, ifhd, x, y, z, samples, voxels)  # rfhd, ifhd accumulate: checked after the first call
    return (samples + 255) // 256, 256, args, lambda: bool(np.allclose(rfhd, want_r, rtol=1e-3, atol=1e-2) and
                                                          np.allclose(ifhd, want_i, rtol=1e-3, atol=1e-2))


HEC_CASES = [
    HecCase("stencil1d 1M", "stencil1d-hip/stencil_1d.cu", "int main(", "stencil_1d", (), _stencil1d),
    HecCase("scan_bcao 2M", "scan-hip/main.cu", "template <typename T, int N>\nvoid runTest", "scan_bcao<int, 512>", (), _scan_bcao),
    HecCase("murmurhash3 4K keys", "murmurhash3-hip/murmurhash3.cu", "int main(", "MurmurHash3_x64_128_kernel", (), _murmurhash3),
    HecCase("haversine 1M", "haversine-hip/distance.cu", "void distance_device(", "compute_haversine_distance", ("haversine-cuda",), _haversine),
    HecCase("popcount pc1 4M", "popcount-hip/main.cu", "int main(", "pc1", (), _popcount),
    HecCase("fhd 4K x 4K", "fhd-hip/main.cu", "int main(", "cmpfhd", (), _fhd),
]
HEC_RATIO_GOAL = 3.0


def executor_cpu_seconds() -> float:
    """CPU time (nanosecond resolution, /proc/<pid>/task/*/schedstat) of this process's child processes: the
    executor's process, which runs the launch; its threads summed."""
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                kids = f.read().split()
        except OSError:
            continue
        for pid in kids:
            try:
                for t in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                        total += int(f.read().split()[0])
            except OSError:
                pass
    return total / 1e9


def measure_hec(label: str, check: bool, reps: int, cache: str) -> dict[str, list[float]]:
    """Launch one HeCBench kernel ``reps`` times in this process (after a warm-up launch whose result is
    checked): each call's wall time, and the executor process's CPU time during it."""
    from pytest_gpuenv.rtc import compile_module

    case = next(c for c in HEC_CASES if c.label == label)
    path = os.path.join(HECBENCH, case.path)
    with open(path) as f:
        text = f.read()
    device_part = text.split(case.host_from, 1)[0]  # (the whole file where that host code is not found)
    dirs = [os.path.dirname(path)] + [os.path.join(HECBENCH, d) for d in case.include_dirs]
    mod = compile_module(device_part, [case.kernel], arch="cpu", check=check, cache_dir=cache, dialect="hip",
                         include_dirs=dirs)
    k = mod.kernel(case.kernel)
    grid, block, args, right = case.setup(mod)
    k(grid, block, *args)
    if not right():
        raise SystemExit(f"{label}: wrong result ({'checked' if check else 'unchecked'})")
    wall, cpu = [], []
    for _ in range(reps):
        c, t = executor_cpu_seconds(), time.perf_counter()
        k(grid, block, *args)
        wall.append(time.perf_counter() - t)
        cpu.append(executor_cpu_seconds() - c)
    return {"wall": wall, "cpu": cpu}


def hecbench(cache: str, rounds: int = 3) -> None:
    """HeCBench's kernels on one core, unchecked and checked: the executor process's CPU time per launch (medians
    of ``rounds`` interleaved fresh processes of 3 launches each), and the call's wall time beside it."""
    if not os.path.isdir(HECBENCH):
        print(f"HeCBench kernels: skipped (no copy of HeCBench's src/ at {HECBENCH}; set GPUENV_HECBENCH)")
        return
    one = {sorted(os.sched_getaffinity(0))[0]}
    print(f"HeCBench kernels ({HECBENCH}), one core; executor CPU time per launch (schedstat of the executor's "
          f"process), medians of {rounds} interleaved fresh processes x 3 launches; the call's wall time in brackets:")
    for case in HEC_CASES:
        if not os.path.exists(os.path.join(HECBENCH, case.path)):
            print(f"  {case.label:<20} skipped (no {case.path} in the copy)")
            continue
        got: dict[bool, dict[str, list[float]]] = {False: {"wall": [], "cpu": []}, True: {"wall": [], "cpu": []}}
        for _ in range(rounds):
            for check in (False, True):
                out = pinned([sys.executable, os.path.abspath(__file__), "--hec", case.label, str(int(check)), "3",
                              cache], one)
                for key, v in json.loads(out.strip().splitlines()[-1]).items():
                    got[check][key] += v
        u, c = (statistics.median(got[m]["cpu"]) for m in (False, True))
        uw, cw = (statistics.median(got[m]["wall"]) for m in (False, True))
        verdict = "ok" if c / u <= HEC_RATIO_GOAL else "OVER"
        print(f"  {case.label:<20} unchecked {u * 1e3:8.1f} ms ({uw * 1e3:7.1f})  checked {c * 1e3:8.1f} ms "
              f"({cw * 1e3:7.1f})  checked/unchecked {c / u:5.2f}x  goal {HEC_RATIO_GOAL:.0f}x {verdict}")


def main() -> None:
    if sys.argv[1:2] == ["--measure"]:  # a pinned child of speedup()/side_by_side(): kernel, launches, cache
        print(json.dumps(measure_here(sys.argv[2], False, int(sys.argv[3]), sys.argv[4])))
        return
    if sys.argv[1:2] == ["--hec"]:  # a pinned child of hecbench(): case, checked (0/1), launches, cache
        print(json.dumps(measure_hec(sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]), sys.argv[5])))
        return
    if sys.argv[1:2] == ["--only-hecbench"]:  # just the HeCBench rows
        hecbench(tempfile.mkdtemp(prefix="gpuenv-bench-"))
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
    hecbench(cache)


if __name__ == "__main__":
    main()
