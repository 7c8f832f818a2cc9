"""Published HIP kernels (tests/data/published) with inputs, launches and numpy references.

Each ``Case`` runs one published file through a runtime object (``rt``) that hides where it runs:
``CpuRun`` (the CPU executor, numpy arrays) here and in the tests, a GPU runner in
``scripts/published_check.py`` (the same inputs on the H200, compared with the CPU executor). A case's
``body(rt)`` draws its inputs from a fixed seed, launches through ``rt.launch`` and returns
``(label, actual, expected)`` triples: ``actual`` is what the kernel wrote, ``expected`` numpy's answer.
The kernels are named as C++ names them (name expressions); ``__constant__``/``__device__`` variables
are set through ``compile_module(...).get_global(name)``; by-value vectors are tuples, by-value functors
``ctypes`` structures of their size.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PUBLISHED = os.path.join(HERE, "data", "published")
INCLUDE = os.path.join(PUBLISHED, "include")

Checks = list[tuple[str, np.ndarray, np.ndarray]]


class StatelessFunctor(ctypes.Structure):
    """A stateless functor (``std::plus<unsigned>``) passed by value: an empty C++ struct, one byte."""

    _fields_ = [("unused", ctypes.c_uint8)]


@dataclass(frozen=True)
class Case:
    name: str
    #: the name expressions compiled, for a wavefront width
    names: Callable[[int], list[str]]
    body: Callable[[Any], Checks]
    #: compile with compile_module (a __constant__/__device__ variable, or several kernels)
    module: bool = False
    options: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    #: further compile options (lockstep=True)
    extra: dict[str, Any] = field(default_factory=dict)
    rtol: float = 0.0
    atol: float = 0.0

    @property
    def path(self) -> str:
        return os.path.join(PUBLISHED, self.name + ".hip")


class Run:
    """A case's kernels, compiled once each with ``kw`` (in one module where the case needs one)."""

    def __init__(self, case: Case, warp: int, **kw: Any) -> None:
        self.case, self.warp, self.kw = case, warp, kw
        self.module: Any = None
        self.kernels: dict[str, Any] = {}

    def _module(self) -> Any:
        if self.module is None:
            from pytest_gpuenv import rtc

            self.module = rtc.compile_module(self.case.path, names=self.case.names(self.warp), **self.kw)
        return self.module

    def kernel(self, name: str) -> Any:
        if self.case.module:
            return self._module().kernel(name)
        if name not in self.kernels:
            from pytest_gpuenv.rtc import compile_kernel

            self.kernels[name] = compile_kernel(self.case.path, name, **self.kw)
        return self.kernels[name]


class CpuRun(Run):
    """Compile a case for the CPU executor at ``warp`` and launch it on numpy arrays."""

    def __init__(self, case: Case, warp: int, check: bool, cache_dir: Optional[str] = None, **extra: Any) -> None:
        super().__init__(case, warp, arch="cpu", warp_size=warp, check=check, cache_dir=cache_dir,
                         options=list(case.options), include_dirs=list(case.include_dirs), **{**case.extra, **extra})

    def set_global(self, name: str, values: Any) -> None:
        view = self._module().get_global(name)
        view[...] = np.asarray(values).reshape(view.shape)

    def launch(self, kernel: Any, grid: Any, block: Any, *args: Any, shared_mem: int = 0, cooperative: bool = False) -> None:
        kernel(grid, block, *args, shared_mem=shared_mem, cooperative=cooperative)


def check_on_cpu(case: Case, warp: int, check: bool, cache_dir: Optional[str] = None) -> None:
    """Run ``case`` on the CPU executor and compare each output with numpy's, naming the case and width."""
    for label, actual, expected in case.body(CpuRun(case, warp, check, cache_dir)):
        np.testing.assert_allclose(actual, expected, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name} at wave{warp}: {label}")


def rng(name: str) -> np.random.Generator:
    return np.random.default_rng(sum(name.encode()))


# --- rocm-examples, HIP-Basic -------------------------------------------------------------------------

def shared_memory(rt: Any) -> Checks:
    width = 32  # the template's Width: the whole matrix, transposed through static shared memory
    a = (np.arange(width * width, dtype=np.float32) + 1) * 10
    out = np.full_like(a, np.nan)
    rt.launch(rt.kernel("matrix_transpose_kernel<32>"), (width // 4, width // 4), (4, 4), out, a)
    return [("out", out, a.reshape(width, width).T.ravel())]


def dynamic_shared(rt: Any) -> Checks:
    width = 16  # one block of width x width threads, as the example launches it
    a = rng("dynamic_shared").random(width * width, dtype=np.float32)
    out = np.full_like(a, np.nan)
    rt.launch(rt.kernel("matrix_transpose_kernel"), 1, (width, width), out, a, width,
              shared_mem=width * width * 4)
    return [("out", out, a.reshape(width, width).T.ravel())]


def warp_shuffle(rt: Any) -> Checks:
    width = 4  # the example's 4x4 matrix: 16 lanes of one wavefront
    a = rng("warp_shuffle").random(width * width, dtype=np.float32)
    out = np.full_like(a, np.nan)
    rt.launch(rt.kernel("matrix_transpose_kernel"), 1, (width, width), out, a, width)
    return [("out", out, a.reshape(width, width).T.ravel())]


def moving_average(rt: Any) -> Checks:
    n, window, block = 1000, 8, 128
    x = rng("moving_average").integers(0, 1000, n).astype(np.uint32)
    m = n - window + 1
    out = np.full(m, 0xDEADBEEF, np.uint32)
    rt.launch(rt.kernel("moving_average<128, 8>"), (m + block - 1) // block, block, x, out, n)
    want = np.convolve(x.astype(np.int64), np.ones(window, np.int64), "valid") // window
    return [("output", out, want.astype(np.uint32))]


def bit_extract(rt: Any) -> Checks:
    n = 1000
    x = rng("bit_extract").integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(n, np.uint32)
    rt.launch(rt.kernel("bit_extract_kernel"), 4, 64, out, x, n)  # grid-stride: 256 threads, 1000 items
    return [("d_output", out, (x >> 8) & 0xF)]


def saxpy(rt: Any) -> Checks:
    n = 1000
    r = rng("saxpy")
    x, y = r.random(n, dtype=np.float32), r.random(n, dtype=np.float32)
    want = np.float32(2.5) * x + y
    rt.launch(rt.kernel("saxpy_kernel"), 4, 256, 2.5, x, y, n)
    return [("d_y", y, want)]


def device_globals(rt: Any) -> Checks:
    n = 100
    r = rng("device_globals")
    x, table = r.random(n, dtype=np.float32), r.random(16, dtype=np.float32)
    rt.set_global("global", np.float32(2.5))
    rt.set_global("global_array", table)
    out = np.full_like(x, np.nan)
    rt.launch(rt.kernel("test_globals_kernel"), 2, 64, out, x, n)
    return [("out", out, x + np.float32(2.5) + table[np.arange(n) % 16])]


def cooperative_groups(rt: Any) -> Checks:
    x = rng("cooperative_groups").integers(0, 1000, 64).astype(np.uint32)  # one block of 64, as published
    block_sum = np.zeros(1, np.uint32)
    tiles = np.zeros(4, np.uint32)
    rt.launch(rt.kernel("vector_reduce_kernel<16>"), 1, 64, x, block_sum, tiles)
    return [("d_block_reduced_vector", block_sum, np.array([x.sum()], np.uint32)),
            ("d_partition_reduced_vector", tiles, x.reshape(4, 16).sum(axis=1).astype(np.uint32))]


# --- rocm-examples, Applications ----------------------------------------------------------------------

def histogram(rt: Any) -> Checks:
    blocks, block, items = 2, 128, 32
    data = rng("histogram").integers(0, 256, blocks * block * items).astype(np.uint8)
    bins = np.full(blocks * 256, 0xDEADBEEF, np.uint32)
    rt.launch(rt.kernel("histogram256_block"), blocks, block, data, bins, items, shared_mem=256 * block)
    want = np.concatenate([np.bincount(c, minlength=256) for c in data.reshape(blocks, -1)]).astype(np.uint32)
    return [("block_bins", bins, want)]


def prefix_sum(rt: Any) -> Checks:
    n = 256  # the example's default size: one block of 128 threads, two items each
    x = rng("prefix_sum").integers(0, 10, n).astype(np.float32)
    data = x.copy()
    rt.launch(rt.kernel("block_prefix_sum"), 1, 128, data, n, 1, shared_mem=2 * 128 * 4)
    return [("d_data", data, np.cumsum(x).astype(np.float32))]


CONVOLUTION_FILTER = np.array([1.0, 3.0, 0.0, -2.0, -0.0, 1.0, 4.0, 0.0, -8.0, -4.0, 2.0, 7.0, 0.0, -12.0, -0.0,
                               2.0, 3.0, 1.5, -8.0, -4.0, 0.0, 1.0, 0.0, -2.0, -0.0], np.float32)


def convolution(rt: Any) -> Checks:
    w, h, mw = 20, 12, 5
    pw, ph = w + mw // 2 * 2, h + mw // 2 * 2
    x = rng("convolution").random(pw * ph, dtype=np.float32)
    rt.set_global("d_mask", CONVOLUTION_FILTER)
    out = np.full(w * h, np.nan, np.float32)
    rt.launch(rt.kernel("convolution<5>"), ((w + 7) // 8, (h + 7) // 8), (8, 8), x, out, (w, h))
    xp = x.reshape(ph, pw).astype(np.float64)
    m = CONVOLUTION_FILTER.reshape(mw, mw)
    want = np.array([[(xp[y:y + mw, i:i + mw] * m).sum() for i in range(w)] for y in range(h)])
    return [("output", out, want.ravel().astype(np.float32))]


# --- rocm-examples, Tutorials/reduction (std::plus<unsigned> as the functor; the example passes a lambda) ---

def _reduction(rt: Any, name: str, per_block: int, dynamic: bool) -> Checks:
    n = 3000
    x = rng(name).integers(0, 1 << 16, n).astype(np.uint32)
    blocks = (n + per_block - 1) // per_block
    back = np.full(blocks, 0xDEADBEEF, np.uint32)
    shared = 256 * 4 if dynamic else 0  # v1/v5: extern __shared__ T shared[], one T per thread
    rt.launch(rt.kernel(name), blocks, 256, x, back, StatelessFunctor(), 0, n, shared_mem=shared)
    padded = np.zeros(blocks * per_block, np.uint64)
    padded[:n] = x
    return [("back", back, padded.reshape(blocks, per_block).sum(axis=1).astype(np.uint32))]


PLUS = "unsigned, std::plus<unsigned>"


def reduction_v1(rt: Any) -> Checks:
    return _reduction(rt, f"kernel<{PLUS}>", 256, dynamic=True)


def reduction_v5(rt: Any) -> Checks:
    return _reduction(rt, f"kernel<{rt.warp}, {PLUS}>", 512, dynamic=True)


def reduction_v7(rt: Any) -> Checks:
    return _reduction(rt, f"kernel<256, {rt.warp}, {PLUS}>", 512, dynamic=False)


def reduction_v9(rt: Any) -> Checks:
    return _reduction(rt, f"kernel<256, {rt.warp}, 4, {PLUS}>", 1024, dynamic=False)


# --- HIP-Examples -------------------------------------------------------------------------------------

def hipex_histogram(rt: Any) -> Checks:
    groups, group = 2, 128  # GROUP_SIZE 128; each group takes 128 x 128 values (GROUP_ITERATIONS)
    data = rng("hipex_histogram").integers(0, 256, groups * group * 128).astype(np.uint32)
    bins = np.full(groups * 256, 0xDEADBEEF, np.uint32)
    rt.launch(rt.kernel("histogram256"), groups, group, data, bins, shared_mem=256 * group)
    want = np.concatenate([np.bincount(c, minlength=256) for c in data.reshape(groups, -1)]).astype(np.uint32)
    return [("binResult", bins, want)]


def dwt_haar1d(rt: Any) -> Checks:
    n, group, max_levels = 128, 16, 5  # the sample: maxLevelsOnDevice = 4 + 1, 16-thread groups
    total_levels = int(np.log2(n))
    x = rng("dwt_haar1d").random(n, dtype=np.float32)
    coefs = np.zeros(n, np.float32)
    avg = np.full(n // (2 * group), np.nan, np.float32)
    rt.launch(rt.kernel("dwtHaar1D"), n // (2 * group), group, x, coefs, avg, total_levels, n, 0, max_levels)
    want_c, want_a = np.zeros(n), np.zeros(len(avg))
    r2 = 1 / np.sqrt(2.0)
    for g in range(len(avg)):
        s = x[g * 2 * group:(g + 1) * 2 * group].astype(np.float64) / np.sqrt(n)
        active, mid = group, n // 2
        for _ in range(min(total_levels, max_levels)):
            d0, d1 = s[0:2 * active:2].copy(), s[1:2 * active:2].copy()
            s[:active] = (d0 + d1) * r2
            want_c[mid + g * active:mid + (g + 1) * active] = (d0 - d1) * r2
            mid, active = mid // 2, active // 2
        want_a[g] = s[0]
    first = n >> min(total_levels, max_levels)  # coefsSignal[:first] is left to the host's later levels
    return [("coefsSignal", coefs[first:], want_c[first:].astype(np.float32)),
            ("AverageSignal", avg, want_a.astype(np.float32))]


def nbody_block(rt: Any) -> Checks:
    n, dt = 512, 0.01  # a multiple of BLOCK_SIZE (256): see test_nbody_tail_block_is_a_bug
    r = rng("nbody_block")
    p = r.uniform(-1, 1, n * 4).astype(np.float32)  # float4* takes an array of its scalar type
    v = r.uniform(-1, 1, n * 4).astype(np.float32)
    pos, vel = p.reshape(n, 4)[:, :3].astype(np.float64), v.reshape(n, 4).astype(np.float64)
    d = pos[None, :, :] - pos[:, None, :]
    inv3 = ((d ** 2).sum(axis=2) + 1e-9) ** -1.5
    vel[:, :3] += dt * (d * inv3[:, :, None]).sum(axis=1)
    rt.launch(rt.kernel("bodyForce"), n // 256, 256, p, v, dt, n)
    return [("v", v, vel.astype(np.float32).ravel())]


# --- hip-tests ----------------------------------------------------------------------------------------

def ballot(rt: Any) -> Checks:
    threads, w = 512, rt.warp
    warps = threads // w
    counts = np.zeros(warps, np.uint32)
    rt.launch(rt.kernel("gpu_ballot"), 1, threads, counts, warps, w.bit_length() - 1)
    want = np.full(warps, w * w, np.uint32)
    want[245 // w] = w * (w - 1)  # thread 245's predicate is false: w lanes see w - 1 bits
    return [("device_ballot", counts, want)]


def constant_table(rt: Any) -> Checks:
    table = -np.arange(512, dtype=np.int32)
    rt.set_global("Value", table)
    out = np.zeros(512, np.int32)
    rt.launch(rt.kernel("Get"), 1, 512, out)
    return [("Ad", out, table)]


SYNC = [("SyncthreadsOddEvenKernel<SyncthreadsKind::kCount>", lambda b: b // 2),
        ("SyncthreadsOddEvenKernel<SyncthreadsKind::kAnd>", lambda b: 0),
        ("SyncthreadsOddEvenKernel<SyncthreadsKind::kOr>", lambda b: 1),
        ("SyncthreadsIdKernel<SyncthreadsKind::kCount>", lambda b: b - 1),
        ("SyncthreadsNegativeKernel<SyncthreadsKind::kAnd>", lambda b: 1)]


def syncthreads(rt: Any) -> Checks:
    grid, block = 2, 96  # one and a half wave64 wavefronts: a partial wavefront takes part
    sums = np.zeros(grid, np.int32)
    rt.launch(rt.kernel("SyncthreadsKernel<SyncthreadsKind::kCount>"), grid, block, sums, shared_mem=block * 4)
    checks = [("SyncthreadsKernel<kCount>", sums, np.full(grid, block * (block + 1) // 2, np.int32))]
    for name, want in SYNC:
        out = np.full(grid * block, -7, np.int32)
        rt.launch(rt.kernel(name), grid, block, out)
        checks.append((name, out, np.full(grid * block, want(block), np.int32)))
    return checks


def cg_tile_shfl(rt: Any) -> Checks:
    checks = []
    for tile in (16, 4):
        for test, what in enumerate(("shflDown", "shflXor", "shflUp")):  # enum class TiledGroupShflTests
            out = np.full(64, -7, np.int32)
            rt.launch(rt.kernel(f"kernel_cg_group_partition_static<{tile}>"), 1, 64, out, test)
            if what == "shflUp":  # an inclusive prefix sum of the ranks within each tile
                j = np.arange(64) % tile
                want = (j * (j + 1) // 2).astype(np.int32)
            else:  # the sum of the ranks 0..tile-1, one per tile; the rest untouched
                want = np.full(64, -7, np.int32)
                want[:64 // tile] = tile * (tile - 1) // 2
            checks.append((f"tile {tile} {what}", out, want))
    return checks


GRID_GROUP = ["kernel_cg_grid_group_type", "kernel_cg_grid_group_type_via_base_type",
              "kernel_cg_grid_group_type_via_public_api"]


def cg_grid_group(rt: Any) -> Checks:
    grid, block = 4, 64  # a cooperative launch: every block resident, grid.sync() waits for all of them
    n = grid * block
    checks = []
    for name in GRID_GROUP:
        out = [np.full(n, -7, np.int32) for _ in range(4)]
        rt.launch(rt.kernel(name), grid, block, *out, cooperative=True)
        want = [np.full(n, n), np.arange(n), np.ones(n), np.full(n, 10 * 20)]  # size, rank, is_valid, gm[1] * gm[0]
        checks += [(f"{name} {what}", got, w.astype(np.int32))
                   for what, got, w in zip(("size", "thread_rank", "is_valid", "sync"), out, want)]
    first = rng("cg_grid_group").integers(0, 1000, 3000).astype(np.uint32)  # more elements than threads
    second = np.zeros_like(first)
    a, b = first.copy(), second.copy()
    rt.launch(rt.kernel("coop_kernel"), grid, block, a, b, 3, len(a), cooperative=True)
    for _ in range(3):  # each pass: second += first; grid.sync(); first += second mirrored; grid.sync()
        second += first
        first += second[::-1]
    return checks + [("coop_kernel first_array", a, first), ("coop_kernel second_array", b, second)]


REDUCTION = dict(options=("-std=c++20",), include_dirs=(INCLUDE,))
CASES = [
    Case("shared_memory", lambda w: ["matrix_transpose_kernel<32>"], shared_memory),
    Case("dynamic_shared", lambda w: ["matrix_transpose_kernel"], dynamic_shared),
    Case("warp_shuffle", lambda w: ["matrix_transpose_kernel"], warp_shuffle),
    Case("moving_average", lambda w: ["moving_average<128, 8>"], moving_average),
    Case("bit_extract", lambda w: ["bit_extract_kernel"], bit_extract),
    Case("saxpy", lambda w: ["saxpy_kernel"], saxpy, rtol=1e-6),
    Case("device_globals", lambda w: ["test_globals_kernel"], device_globals, module=True, rtol=1e-6),
    Case("cooperative_groups", lambda w: ["vector_reduce_kernel<16>"], cooperative_groups),
    Case("histogram", lambda w: ["histogram256_block"], histogram),
    Case("prefix_sum", lambda w: ["block_prefix_sum", "device_prefix_sum"], prefix_sum, module=True),
    Case("convolution", lambda w: ["convolution<5>"], convolution, module=True, rtol=1e-5, atol=1e-5),
    Case("reduction_v1", lambda w: [f"kernel<{PLUS}>"], reduction_v1, **REDUCTION),  # type: ignore[arg-type]
    # relies on lockstep wavefronts (no barrier in its last steps): run as AMD runs it
    Case("reduction_v5", lambda w: [f"kernel<{w}, {PLUS}>"], reduction_v5, extra={"lockstep": True},
         **REDUCTION),  # type: ignore[arg-type]
    Case("reduction_v7", lambda w: [f"kernel<256, {w}, {PLUS}>"], reduction_v7, **REDUCTION),  # type: ignore[arg-type]
    Case("reduction_v9", lambda w: [f"kernel<256, {w}, 4, {PLUS}>"], reduction_v9, **REDUCTION),  # type: ignore[arg-type]
    Case("hipex_histogram", lambda w: ["histogram256"], hipex_histogram),
    Case("dwt_haar1d", lambda w: ["dwtHaar1D"], dwt_haar1d, rtol=1e-5, atol=1e-6),
    Case("nbody_block", lambda w: ["bodyForce"], nbody_block, rtol=1e-3, atol=1e-3),
    Case("ballot", lambda w: ["gpu_ballot"], ballot),
    Case("constant_table", lambda w: ["Get"], constant_table, module=True),
    Case("syncthreads", lambda w: ["SyncthreadsKernel<SyncthreadsKind::kCount>"] + [n for n, _ in SYNC], syncthreads,
         module=True),
    Case("cg_grid_group", lambda w: GRID_GROUP + ["coop_kernel"], cg_grid_group, module=True),
    Case("cg_tile_shfl", lambda w: ["kernel_cg_group_partition_static<16>", "kernel_cg_group_partition_static<4>"],
         cg_tile_shfl, module=True),
]
BY_NAME = {c.name: c for c in CASES}
