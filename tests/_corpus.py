"""HeCBench's HIP benchmarks (a copy of HeCBench's ``src/``, see tests/corpus/README.md) with inputs, launches
and numpy references.

The same ``Case``/``rt`` protocol as tests/_published.py (``rt.kernel(name)``, ``rt.launch``,
``rt.set_global``), so tests/corpus runs them through the ``hip_kernel`` fixture and
scripts/published_check.py on a GPU against the CPU executor. Each file is kept whole, host ``main``
included, as hipcc takes it: ``main.cu`` of ``src/<bench>-hip`` (HIP in a ``.cu`` file: it includes
``hip/hip_runtime.h``, so it is read as HIP, as hipcc reads it), the headers it includes beside it, and the headers its Makefile finds with
``-I../<bench>-cuda`` in ``hecbench/<bench>-cuda`` (passed as ``include_dirs``, as the Makefile does).
Launch shapes follow each benchmark's ``main`` at a small size; references follow its own verification.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from _checkout import REPO
from _published import Case, Checks, rng

#: HeCBench's ``src/`` at f27000a5 (or a copy of its benchmarks laid out the same): not in this repository
HECBENCH = os.environ.get("GPUENV_HECBENCH") or os.path.join(REPO, ".corpus", "hecbench")


@dataclass(frozen=True)
class BenchCase(Case):
    """A HeCBench benchmark: ``name`` is its folder without ``-hip``."""

    @property
    def path(self) -> str:
        return os.path.join(HECBENCH, self.name + "-hip", "main.cu")


def bench(name: str, names: Any, body: Any, module: bool = False, cuda_headers: bool = False, lockstep: bool = False,
          **kw: Any) -> BenchCase:
    """``cuda_headers``: the Makefile adds ``-I../<name>-cuda``; ``lockstep``: the kernel relies on a wavefront
    running in lockstep, as AMD hardware runs it (warp-synchronous code with no barrier or fence)."""
    dirs = (os.path.join(HECBENCH, name + "-cuda"),) if cuda_headers else ()
    names_fn = names if callable(names) else (lambda warp, _n=list(names): _n)
    extra = {"lockstep": True} if lockstep else {}
    return BenchCase(name, names_fn, body, module=module, include_dirs=dirs, extra=extra, **kw)


# --- warp intrinsics, atomics -------------------------------------------------------------------------

def atomic_aggregate(rt: Any) -> Checks:
    # main launches k (WarpSize = 32) on a 32-wide device and k2 (WarpSize = 64) on a 64-wide one
    name = "k2" if rt.warp == 64 else "k"
    blocks, block, ds = 8, 256, 4
    d = np.zeros(ds, np.int32)
    rt.launch(rt.kernel(name), blocks, block, d, ds)
    return [("d", d, np.full(ds, blocks * block // ds, np.int32))]


def atomic_cost(rt: Any) -> Checks:
    size, threads = 16, 512
    wi, wo = np.zeros(threads, np.int32), np.zeros(threads, np.int32)
    rt.launch(rt.kernel("wiAtomicOnGlobalMem<int>"), threads // 256, 256, wi, size)
    rt.launch(rt.kernel("woAtomicOnGlobalMem<int>"), threads // 256, 256, wo, size)
    want = np.full(threads, size // 2, np.int32)
    return [("result_wi", wi, want), ("result_wo", wo, want)]


def threadfence(rt: Any) -> Checks:
    n, block = 5000, 256
    blocks = (n + block - 1) // block
    x = rng("threadfence").integers(0, 8, n).astype(np.float32)
    count, result = np.zeros(1, np.uint32), np.zeros(blocks, np.float32)
    rt.launch(rt.kernel("sum"), blocks, block, x, n, count, result)
    return [("result[0]", result[:1], np.array([x.sum()], np.float32)), ("count", count, np.zeros(1, np.uint32))]


def michalewicz(rt: Any) -> Checks:
    n, dim = 1000, 5
    v = rng("michalewicz").random(n * dim, dtype=np.float32) * np.float32(np.pi)
    minima = np.full(1, np.finfo(np.float32).max, np.float32)
    rt.launch(rt.kernel("eval"), (n + 255) // 256, 256, v, minima, n, dim)
    x = v.reshape(n, dim).astype(np.float64)
    i = np.arange(1, dim + 1)
    f = -(np.sin(x) * np.sin(i * x * x / np.pi) ** 20).sum(axis=1)
    return [("minima", minima, np.array([f.min()], np.float32))]


def vote(rt: Any) -> Checks:
    # kernels.h (included by main.cu): __any/__all per wavefront; kernel 3 over three wavefronts
    w, n = rt.warp, 256
    x = np.zeros(n, np.uint32)
    x[w // 2] = 1  # the first wavefront has one non-zero lane, the second none, the others all
    x[2 * w:] = 1
    anyr, allr = np.zeros(n, np.uint32), np.zeros(n, np.uint32)
    rt.launch(rt.kernel("VoteAnyKernel1"), 1, n, x, anyr, 1)
    rt.launch(rt.kernel("VoteAllKernel2"), 1, n, x, allr, 1)
    per_wave = x.reshape(-1, w)
    want_any = np.repeat(per_wave.any(axis=1), w).astype(np.uint32)
    want_all = np.repeat(per_wave.all(axis=1), w).astype(np.uint32)
    info = np.zeros(w * 9, np.bool_)
    rt.launch(rt.kernel("VoteAnyKernel3"), 1, w * 3, info, w, 1)
    tx = np.arange(3 * w)
    want3 = np.stack([tx >= w, tx >= (w * 3) // 2, tx >= 2 * w], axis=1).ravel()
    return [("any", anyr, want_any), ("all", allr, want_all), ("info", info, want3)]


# --- half precision -------------------------------------------------------------------------------------

def f16max(rt: Any) -> Checks:
    n = 2000  # halves: 1000 half2
    a = (rng("f16max-a").standard_normal(n) * 10).astype(np.float16)
    b = (rng("f16max-b").standard_normal(n) * 10).astype(np.float16)
    want = np.maximum(a, b)
    r2, r1 = np.zeros(n, np.float16), np.zeros(n, np.float16)
    rt.launch(rt.kernel("hmax<half2>"), 2, 256, a, b, r2, n // 2)  # grid-stride, as main launches it
    rt.launch(rt.kernel("hmax<half>"), 2, 256, a, b, r1, n)
    return [("half2", r2, want), ("half", r1, want)]


# --- bit tricks -----------------------------------------------------------------------------------------

def popcount(rt: Any) -> Checks:
    n = 1000
    data = rng("popcount").integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    want = np.array([bin(int(x)).count("1") for x in data], np.int32)
    out = []
    for k in ("pc1", "pc2", "pc3", "pc4", "pc5", "pc6"):
        r = np.full(n, -1, np.int32)
        rt.launch(rt.kernel(k), (n + 255) // 256, 256, data, r, n)
        out.append((k, r, want))
    return out


# --- shared memory, stencils, sorts ---------------------------------------------------------------------

def reverse(rt: Any) -> Checks:
    n = 256  # main: one block of len threads, len = 256 (the static __shared__ array's size)
    d = rng("reverse").integers(0, 1 << 30, n).astype(np.int32)
    want = d[::-1].copy()
    rt.launch(rt.kernel("reverse"), 1, n, d, n)
    return [("d", d, want)]


def heat2d(rt: Any) -> Checks:
    lx = ly = 64
    x = rng("heat2d").random(lx * ly, dtype=np.float32)
    out = np.full_like(x, np.nan)
    delta, norm = np.float32(0.1), np.float32(0.6)
    rt.launch(rt.kernel("dev_lapl_iter"), lx * ly // 256, 256, out, x, delta, norm, lx, ly)
    g = x.reshape(ly, lx)
    want = norm * g + delta * (np.roll(g, -1, 1) + np.roll(g, 1, 1) + np.roll(g, -1, 0) + np.roll(g, 1, 0))
    return [("out", out, want.ravel())]


def bitonic_sort(rt: Any) -> Checks:
    n = 10
    size = 1 << n
    a = rng("bitonic").integers(-(1 << 20), 1 << 20, size).astype(np.int32)
    want = np.sort(a)
    k = rt.kernel("bitonic_sort")
    for step in range(n):
        for stage in range(step, -1, -1):
            rt.launch(k, size // 256, 256, 2 ** (stage + 1), 1 << (step - stage), a)
    return [("input", a, want)]


def concat(rt: Any) -> Checks:
    sz0, sz1_1, sz1_2, sz2 = 3, 5, 7, 11
    a = rng("concat").random((sz0, sz1_1, sz2), dtype=np.float32)
    b = rng("concat2").random((sz0, sz1_2, sz2), dtype=np.float32)
    out = np.full(sz0 * (sz1_1 + sz1_2) * sz2, np.nan, np.float32)
    rt.launch(rt.kernel("concat<float>"), (out.size + 255) // 256, 256, a, b, out, sz0, sz2, sz1_1, sz1_2)
    return [("output", out, np.concatenate([a, b], axis=1).ravel())]


def convolution1d(rt: Any) -> Checks:
    width, mask_width, bs = 1024, 7, 128
    a = (rng("conv1d").integers(0, 256, width)).astype(np.float32)
    mask = np.zeros(10, np.float32)
    mask[:mask_width] = rng("conv1d-mask").integers(1, 4, mask_width)
    rt.set_global("mask<float>", mask)
    want = np.convolve(a, mask[:mask_width][::-1], "same").astype(np.float32)
    out = []
    for name, smem in (("conv1d<float>", 0), ("conv1d_tiled<float>", (bs + 10 - 1) * 4),
                       ("conv1d_tiled_caching<float>", bs * 4)):
        b = np.full(width, np.nan, np.float32)
        rt.launch(rt.kernel(name), width // bs, bs, a, b, width, mask_width, shared_mem=smem)
        out.append((name, b, want))
    return out


# --- math, vector types, cooperative groups -------------------------------------------------------------

def _rotation(angle: float, w: np.ndarray) -> np.ndarray:
    s, c = np.sin(angle), np.cos(angle)
    mc = 1 - c
    x, y, z = w
    return np.array([[c + x * x * mc, z * s + x * y * mc, -y * s + x * z * mc],
                     [-z * s + x * y * mc, c + y * y * mc, x * s + y * z * mc],
                     [y * s + x * z * mc, -x * s + y * z * mc, c + z * z * mc]])


def rodrigues(rt: Any) -> Checks:
    n, angle = 1000, 0.5
    w = np.array([1.0, 2.0, 2.0]) / 3.0
    p = rng("rodrigues").random((n, 3), dtype=np.float32)
    p4 = np.concatenate([p, np.ones((n, 1), np.float32)], axis=1)
    want = p.astype(np.float64) @ _rotation(angle, w).T
    wt = tuple(float(v) for v in w.astype(np.float32))
    rt.launch(rt.kernel("rotate"), (n + 255) // 256, 256, n, angle, wt, p)
    rt.launch(rt.kernel("rotate2"), (n + 255) // 256, 256, n, angle, wt, p4)
    want4 = np.concatenate([want, np.zeros((n, 1))], axis=1)
    return [("d", p, want.astype(np.float32)), ("d2", p4, want4.astype(np.float32))]


def softmax(rt: Any) -> Checks:
    slices, size = 100, 64
    x = rng("softmax").random((slices, size), dtype=np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True)).ravel()
    y1, y2 = np.full(x.size, np.nan, np.float32), np.full(x.size, np.nan, np.float32)
    rt.launch(rt.kernel("softMax"), (slices + 255) // 256, 256, slices, size, x, y1)
    per_block = 256 // rt.warp  # main: BLOCK_SIZE / the device's warp size slices per block
    rt.launch(rt.kernel("softMax2"), (slices + per_block - 1) // per_block, 256, slices, size, x, y2)
    return [("softMax", y1, want), ("softMax2", y2, want)]


# --- scans, elementwise math (more) ---------------------------------------------------------------------

def scan(rt: Any) -> Checks:
    n_per, nblocks, grid = 512, 6, 4  # main: grid 16 x CUs, grid-stride over the blocks of N items
    x = rng("scan").integers(1, 6, n_per * nblocks).astype(np.int32)
    want = (np.cumsum(x.reshape(nblocks, n_per), axis=1) - x.reshape(nblocks, n_per)).ravel().astype(np.int32)
    out = []
    for name in ("scan<int, 512>", "scan_bcao<int, 512>"):
        y = np.full_like(x, -1)
        rt.launch(rt.kernel(name), grid, n_per // 2, nblocks, y, x)
        out.append((name, y, want))
    return out


def _gelu(t: np.ndarray) -> np.ndarray:
    return 0.5 * t * (1.0 + np.tanh(0.79788456 * (t + 0.044715 * t ** 3)))


def gelu(rt: Any) -> Checks:
    batch, seq, hidden, block = 2, 3, 256, 64
    src = rng("gelu").standard_normal(batch * seq * hidden).astype(np.float16)
    bias = rng("gelu-bias").standard_normal(hidden).astype(np.float16)
    v = (src.reshape(-1, hidden) + bias).astype(np.float16).astype(np.float32)  # __hadd2, then to float
    want = _gelu(v).astype(np.float16).ravel()
    a, b = src.copy(), src.copy()
    rt.launch(rt.kernel("gelu_bias_loop"), (seq, batch), block, a, bias, hidden, seq)
    rt.launch(rt.kernel("gelu_bias_loop_base"), (seq, batch), block, b, bias, hidden, seq)
    return [("gelu_bias_loop", a.astype(np.float32), want.astype(np.float32)),
            ("gelu_bias_loop_base", b.astype(np.float32), want.astype(np.float32))]


def glu(rt: Any) -> Checks:
    m, split, n = 4, 16, 8
    x = rng("glu").standard_normal((m, 2 * split, n)).astype(np.float32)
    y = np.full(m * split * n, np.nan, np.float32)
    rt.launch(rt.kernel("glu_kernel"), (y.size + 255) // 256, 256, m, split, n, x, y)
    x1, x2 = x[:, :split].astype(np.float64), x[:, split:].astype(np.float64)
    return [("Y", y, (x1 / (1 + np.exp(-x2))).ravel())]


def lif(rt: Any) -> Checks:
    neurons, per_item, dt, tau_rc, tau_ref = 1000, 50, 1e-3, 20e-3, 2e-3
    r = rng("lif")
    enc = r.random(neurons // per_item, dtype=np.float32)
    volt = r.random(neurons, dtype=np.float32)
    ref = (r.random(neurons, dtype=np.float32) * 2e-3).astype(np.float32)
    bias = (r.random(per_item, dtype=np.float32) * 2).astype(np.float32)
    gain = (r.random(per_item, dtype=np.float32) * 40).astype(np.float32)
    spikes = np.full(neurons, np.nan, np.float32)
    v0, r0 = volt.astype(np.float64), ref.astype(np.float64)
    i = np.arange(neurons)
    cur = bias[i % per_item] + gain[i % per_item].astype(np.float64) * enc[i // per_item]
    dv = -np.expm1(-dt / tau_rc) * (cur - v0)
    v = np.maximum(v0 + dv, 0)
    rt_ = r0 - dt
    v *= np.clip(1 - rt_ / dt, 0, 1)
    fire = v > 1
    want_spike = np.where(fire, 1 / dt, 0)
    want_ref = np.where(fire, tau_ref + dt * (1 - (v - 1) / dv), rt_)
    want_v = np.where(fire, 0, v)
    rt.launch(rt.kernel("lif"), (neurons + 255) // 256, 256, neurons, per_item, dt, enc, volt, ref,
              tau_rc, tau_ref, bias, gain, spikes)
    return [("spikes", spikes, want_spike.astype(np.float32)), ("voltage", volt, want_v.astype(np.float32)),
            ("reftime", ref, want_ref.astype(np.float32))]


def entropy(rt: Any) -> Checks:
    h, w = 40, 37
    val = rng("entropy").integers(0, 16, h * w).astype(np.int8)
    grid = ((w + 15) // 16, (h + 15) // 16)
    g = val.reshape(h, w)
    # ``entropy`` sums -p log2(p) over all 16 values, so a value missing from the window gives 0 x -inf = NaN,
    # on a GPU as here (the benchmark's own check, |gpu - ref| > 1e-3, is false for NaN and passes);
    # entropy_opt's table has 0 for counts 0 and 1
    want, want_opt = np.zeros((h, w)), np.zeros((h, w))
    for y in range(h):
        for x in range(w):
            win = g[max(0, y - 2):y + 3, max(0, x - 2):x + 3].ravel()
            p = np.bincount(win, minlength=16) / win.size
            with np.errstate(divide="ignore", invalid="ignore"):
                want[y, x] = -(p * np.log2(p)).sum()
            q = p[p > 0]
            want_opt[y, x] = -(q * np.log2(q)).sum()
    table = np.array([0 if i <= 1 else i * np.log2(i) for i in range(26)], np.float32)
    e1, e2 = np.full(h * w, np.nan, np.float32), np.full(h * w, np.nan, np.float32)
    rt.launch(rt.kernel("entropy"), grid, (16, 16), e1, val, h, w)
    rt.launch(rt.kernel("entropy_opt<16, 16>"), grid, (16, 16), e2, val, table, h, w)
    return [("entropy", e1, want.ravel()), ("entropy_opt", e2, want_opt.ravel())]


def van_genuchten(rt: Any) -> Checks:
    size = 1000
    alpha, theta_s, theta_r, n = 0.02, 0.45, 0.1, 1.8  # reference.h
    ksat = rng("vg-k").random(size) + 1e-3
    psi = rng("vg-psi").random(size) * 20 - 15
    c, theta, k = (np.full(size, np.nan) for _ in range(3))
    rt.launch(rt.kernel("vanGenuchten"), (size + 255) // 256, 256, ksat, psi, c, theta, k, size)
    m = (n - 1) / n
    p = psi * 100
    want_theta = np.where(p < 0, (theta_s - theta_r) / (1 + (alpha * np.abs(p)) ** n) ** m + theta_r, theta_s)
    se = (want_theta - theta_r) / (theta_s - theta_r)
    t = 1 - (1 - se ** (1 / m)) ** m
    want_k = ksat * np.sqrt(se) * t * t
    a = alpha * np.abs(p)
    want_c = np.where(p < 0, 100 * alpha * n * (1 / n - 1) * a ** (n - 1) * (theta_r - theta_s)
                      * (a ** n + 1) ** (1 / n - 2), 0.0)
    return [("theta", theta, want_theta), ("K", k, want_k), ("C", c, want_c)]


# --- kernels in included headers ------------------------------------------------------------------------

def _bit_reverse(i: np.ndarray, bits: int) -> np.ndarray:
    out = np.zeros_like(i)
    for b in range(bits):
        out |= ((i >> b) & 1) << (bits - 1 - b)
    return out


def bitpermute(rt: Any) -> Checks:
    # kernels.h; main's three launch shapes: one block of the whole domain, 32-wide blocks, the Z kernel
    out = []
    for lg, name, grid, block, smem in ((8, "bit_rev_permutation", 1, 256, 0),
                                        (9, "bit_rev_permutation", 16, 32, 0),
                                        (12, "bit_rev_permutation_z", 4, 32, 32 * 32 * 8)):
        n = 1 << lg
        x = rng(f"bitpermute{lg}").integers(-(2**62), 2**62, n, dtype=np.int64)
        y = np.zeros(n, np.int64)
        rt.launch(rt.kernel(name), grid, block, y, x, lg, shared_mem=smem)
        want = np.empty_like(x)
        want[_bit_reverse(np.arange(n), lg)] = x
        out.append((f"{name} 2^{lg}", y, want))
    return out


def extrema(rt: Any) -> Checks:
    # kernels.h of extrema-cuda, found through the Makefile's -I../extrema-cuda
    n, order = 1000, 2
    x = rng("extrema").integers(0, n, n).astype(np.float32)
    r1 = np.zeros(n, np.bool_)
    rt.launch(rt.kernel("relextrema_1D<float>"), (n + 255) // 256, 256, n, order, True, x, r1)
    idx = np.arange(n)
    want1 = np.ones(n, np.bool_)
    for o in range(1, order + 1):
        want1 &= (x > x[np.minimum(idx + o, n - 1)]) & (x >= x[np.maximum(idx - o, 0)])
    lx, ly = 33, 20
    g = rng("extrema2").integers(0, 50, lx * ly).astype(np.float32)
    gg = g.reshape(ly, lx)
    out = [("1D", r1, want1)]
    for axis in (0, 1):
        r2 = np.zeros(lx * ly, np.bool_)
        rt.launch(rt.kernel("relextrema_2D<float>"), ((lx + 15) // 16, (ly + 15) // 16), (16, 16),
                  lx, ly, order, False, axis, g, r2)
        want2 = np.ones_like(gg, np.bool_)
        ax = 0 if axis == 0 else 1  # axis 0 runs along y (rows of in_x), wrapping (clip False)
        for o in range(1, order + 1):
            want2 &= (gg > np.roll(gg, -o, axis=ax)) & (gg >= np.roll(gg, o, axis=ax))
        out.append((f"2D axis {axis}", r2, want2.ravel()))
    return out


def scatter_add(rt: Any) -> Checks:
    # kernels.h of scatterAdd-cuda; blocks of (warpSize, 512 / warpSize) as main asks the device
    batch, outputs, dim = 1000, 16, 40
    index = rng("scatterAdd").integers(0, outputs, batch).astype(np.int32)
    source = rng("scatterAdd-src").integers(-4, 5, batch * dim).astype(np.float32)
    want = np.zeros((outputs, dim))
    np.add.at(want, index, source.reshape(batch, dim))
    smem = (outputs * dim + 512) * 4
    out = []
    for name in ("scatterAdd_kernel", "scatterAdd2_kernel"):
        y = np.zeros(outputs * dim, np.float32)
        rt.launch(rt.kernel(name), batch // 8192 + 1, (rt.warp, 512 // rt.warp), index, source, y,
                  batch, outputs, dim, shared_mem=smem)
        out.append((name, y, want.ravel().astype(np.float32)))
    return out


# --- more atomics, searches, optimisers ----------------------------------------------------------------

def _atomic_gold(len_: int, dtype: Any) -> np.ndarray:
    """computeGold of atomicIntrinsics-cuda/reference.h, in Python integers (then wrapped to ``dtype``)."""
    tids = range(len_)
    g = [10 * len_, -10 * len_, max([-256 if dtype == np.int32 else 2**32 - 256] + list(tids)), min([256] + list(tids)),
         255, 0, 255, 0, 0]
    for t in tids:
        g[4] &= 2 * t + 7
        g[5] |= 1 << (t % 32)  # (T)(1 << tid): a shift of 32 or more is masked to 5 bits by the hardware
        g[6] ^= t
        g[7] = 0 if g[7] >= 17 else g[7] + 1
        g[8] = 137 if g[8] == 0 or g[8] > 137 else g[8] - 1
    return np.array([v % 2**32 for v in g], np.uint32).view(dtype)


def atomic_intrinsics(rt: Any) -> Checks:
    # kernel.h of atomicIntrinsics-cuda: atomicAdd/Sub/Max/Min/And/Or/Xor/Inc/Dec, for int and unsigned
    len_ = 1 << 10
    out = []
    for name, dtype in (("testKernel<int>", np.int32), ("testKernel<unsigned int>", np.uint32)):
        g = np.array([0, 0, -256, 256, 255, 0, 255, 0, 0], np.int64).astype(np.uint32).view(dtype)
        rt.launch(rt.kernel(name), len_ // 256, 256, g, len_)
        out.append((name, g, _atomic_gold(len_, dtype)))
    return out


def bsearch(rt: Any) -> Checks:
    # zSize = 2 x aSize, not a multiple of 256: kernel_BS4's last block has threads that return before
    # its __syncthreads (as in main)
    a_size = 1000
    z_size = 2 * a_size
    a = np.arange(a_size, dtype=np.float32)
    n = a_size - 1
    z = rng("bsearch").integers(0, n, z_size).astype(np.float32)
    out = []
    for k in ("kernel_BS<float>", "kernel_BS2<float>", "kernel_BS3<float>", "kernel_BS4<float>"):
        r = np.full(z_size, 2**63, np.uint64)
        rt.launch(rt.kernel(k), (z_size + 255) // 256, 256, a, z, r, z_size, n)
        out.append((k, r, z.astype(np.uint64)))
    return out


def adam(rt: Any) -> Checks:
    size, steps = 1000, 3
    b1, b2, eps, scale, lr, decay = 0.9, 0.999, 1e-8, 1.0, 1e-3, 0.01
    r = rng("adam")
    p = r.random(size, dtype=np.float32)
    g = r.standard_normal(size).astype(np.float32)
    m, v = np.zeros(size, np.float32), np.zeros(size, np.float32)
    pw, mw, vw = p.astype(np.float64), m.astype(np.float64), v.astype(np.float64)
    for t in range(1, steps + 1):
        sg = g / scale
        mw = b1 * mw + (1 - b1) * sg
        vw = b2 * vw + (1 - b2) * sg * sg
        denom = np.sqrt(vw / (1 - b2 ** t) + eps)  # ADAM_MODE_0
        pw = pw - lr * (mw / (1 - b1 ** t) / denom + decay * pw)
    rt.launch(rt.kernel("adam<float, float>"), (size + 255) // 256, 256, p, m, v, g, b1, b2, eps, scale, lr,
              steps, size, 0, decay)
    return [("p", p, pw.astype(np.float32)), ("m", m, mw.astype(np.float32)), ("v", v, vw.astype(np.float32))]


def hellinger(rt: Any) -> Checks:
    m, n, k = 20, 30, 17
    a = rng("hellinger-a").random((m, n), dtype=np.float32) / n
    b = rng("hellinger-b").random((n, k), dtype=np.float32)
    c = np.full(m * k, np.nan, np.float32)
    rt.launch(rt.kernel("hellinger"), ((k + 15) // 16, (m + 15) // 16), (16, 16), a, b, c, m, n, k)
    s = np.sqrt(a.astype(np.float64)[:, :, None] * b[None, :, :]).sum(axis=1)
    return [("c", c, np.sqrt(np.maximum(1 - s, 0)).ravel())]


# --- reductions in shared memory, early returns before barriers, n-d indexing -------------------------

def stddev(rt: Any) -> Checks:
    # columns, rows; main's launch: blocks of 256 over 32 columns x 32 rows. D a multiple of 32, as main
    # requires: for any other D, sopKernel's last column block adds to std[colId >= D], past the array
    # (checked mode reports it)
    d, n = 64, 300
    x = rng("stddev").integers(-8, 9, n * d).astype(np.float32)  # small integers: sums exact in any order
    std = np.zeros(d, np.float32)
    grid = ((n + 32 - 1) // 32, (d + 31) // 32)
    rt.launch(rt.kernel("sopKernel<float, int, 256, 32>"), grid, 256, std, x, d, n)
    rt.launch(rt.kernel("sampleKernel<float, int>"), (d + 255) // 256, 256, std, d, n - 1)
    want = np.sqrt((x.reshape(n, d).astype(np.float64) ** 2).sum(axis=0) / (n - 1))
    return [("std", std, want.astype(np.float32))]


def matern(rt: Any) -> Checks:
    # blocks of (SX=16, 64) threads for SY = nsources = 50: threads with ty >= 50, and those past the last
    # target, return before the kernel's __syncthreads (as main launches it)
    targets, sources, length = 100, 50, 0.1
    r = rng("matern")
    src = r.random(sources * 3, dtype=np.float32)
    tgt = r.random(targets * 3, dtype=np.float32)
    wgt = r.random(sources, dtype=np.float32)
    res = np.full(targets, np.nan, np.float32)
    rt.launch(rt.kernel("matern_kernel"), ((targets + 15) // 16, 1), (16, 64), targets, length, src, tgt, wgt, res)
    dd = np.sqrt(((tgt.reshape(-1, 1, 3).astype(np.float64) - src.reshape(1, -1, 3)) ** 2).sum(axis=2))
    k = (1 + np.sqrt(5) * dd / length + 5 * dd ** 2 / (3 * length ** 2)) * np.exp(-np.sqrt(5) * dd / length)
    return [("result", res, (k * wgt).sum(axis=1).astype(np.float32))]


def romberg(rt: Any) -> Checks:
    groups, size, rows = 8, 64, 17  # ROW_SIZE 17; A = 0, B = 15 as main passes them
    out = np.full(groups, np.nan)
    rt.launch(rt.kernel("romberg"), groups, size, 0.0, 15.0, out, shared_mem=rows * size * 8)
    exact = (np.exp(15.0) * (np.sin(15.0) - np.cos(15.0)) + 1) / 2  # the integral of e^x sin x over [0, 15]
    return [("sum of the blocks", np.array([out.sum()]), np.array([exact]))]


def flip(rt: Any) -> Checks:
    shape, nflip = (5, 6, 7), 2  # main: three dimensions, the first num_flip_dims flipped
    x = rng("flip").random(shape, dtype=np.float32)
    stride = np.array([shape[1] * shape[2], shape[2], 1], np.int64)
    y = np.full(x.size, np.nan, np.float32)
    rt.launch(rt.kernel("flip_kernel<float>"), (x.size + 255) // 256, 256, x, y, x.size,
              np.arange(nflip, dtype=np.int64), nflip, stride, stride, np.array(shape, np.int64), 3)
    return [("out", y, np.flip(x, axis=tuple(range(nflip))).ravel())]


def keogh(rt: Any) -> Checks:
    n, m, block = 1000, 16, 256  # dynamic shared: (M + blocks) floats, as main sizes it
    r = rng("keogh")
    subject = r.standard_normal(n).astype(np.float32)
    avgs = r.standard_normal(n).astype(np.float32) * np.float32(0.1)
    stds = (r.random(n, dtype=np.float32) + 0.5).astype(np.float32)
    lower = (r.standard_normal(m) - 1).astype(np.float32)
    upper = (r.standard_normal(m) + 1).astype(np.float32)
    lb = np.zeros(n, np.float32)
    rt.launch(rt.kernel("lb_keogh"), (n + block - 1) // block, block, subject, avgs, stds, lb, lower, upper, m, n,
              shared_mem=(m + block) * 4)
    k = n - m + 1
    win = np.lib.stride_tricks.sliding_window_view(subject.astype(np.float64), m)[:k]
    v = (win - avgs[:k, None]) / stds[:k, None]
    lo, up = v - lower, v - upper
    want = np.zeros(n)
    want[:k] = (up * up * (up > 0) + lo * lo * (lo < 0)).sum(axis=1)
    return [("lb_keogh", lb, want.astype(np.float32))]


def overlay(rt: Any) -> Checks:
    w, h = 40, 30
    img = rng("overlay").random((h, w, 3), dtype=np.float32) * 255
    out = img.copy()
    color = (255.0, 204.0, 203.0, 1.0)  # main's make_float4(255, 204, 203, 1)
    x0, y0, bw, bh = 5, 7, 20, 30  # the box runs past the image's bottom edge
    rt.launch(rt.kernel("DetectionOverlayBox<float3>"), ((bw + 7) // 8, (bh + 7) // 8), (8, 8), img, out,
              w, h, x0, y0, bw, bh, color)
    alpha = np.float32(color[3] / 255.0)
    want = img.copy()
    want[y0:y0 + bh, x0:x0 + bw] = alpha * np.array(color[:3], np.float32) + (1 - alpha) * img[y0:y0 + bh, x0:x0 + bw]
    return [("output", out, want)]


def atomic_cas(rt: Any) -> Checks:
    # kernels.h of atomicCAS-cuda: min, max and add built on atomicCAS, for long long and double
    blocks, block = 8, 256
    n = blocks * block  # threads i = 1 .. n
    out = []
    for t, dtype in (("long long", np.int64), ("double", np.float64)):
        for op, start, want in (("Min", 1 << 40, 1), ("Max", -(1 << 40), n), ("Add", 0, n * (n + 1) // 2)):
            res = np.array([start], dtype)
            rt.launch(rt.kernel(f"atomic{op}Derived<{t}>"), blocks, block, res)
            out.append((f"{op} {t}", res, np.array([want], dtype)))
    return out


def complex_(rt: Any) -> Checks:
    # five identities of complex arithmetic per thread (kernels.h, complex.h of complex-cuda; the ref_ kernels
    # of reference.h use hip/hip_complex.h): each thread's check sum is 5
    n = 1000
    out = []
    for k in ("complex_float", "complex_double", "ref_complex_float", "ref_complex_double"):
        cs = np.zeros(n, np.int8)
        rt.launch(rt.kernel(k), (n + 255) // 256, 256, cs, n)
        out.append((k, cs, np.full(n, 5, np.int8)))
    return out


def langevin(rt: Any) -> Checks:
    # main: x = -1.8 + i * 1.79999 / n (all negative, none zero), n / 256 blocks; near 0, coth(x) - 1/x cancels
    # (float32 error about 1e-7 / |x|): hence atol 1e-4
    n = 1024
    x = (np.float32(-1.8) + np.arange(n, dtype=np.float32) * np.float32(1.79999 / n)).astype(np.float32)
    xd = x.astype(np.float64)
    want = 1 / np.tanh(xd) - 1 / xd
    out = []
    for k in ("k0", "k1", "k2"):
        o = np.full(n, np.nan, np.float32)
        rt.launch(rt.kernel(k), n // 256, 256, x, o)
        out.append((k, o, want.astype(np.float32)))
    return out


def cross(rt: Any) -> Checks:
    rows = 1000
    out = []
    for t, dtype in (("float", np.float32), ("double", np.float64)):
        a = rng("cross-a").standard_normal((rows, 3)).astype(dtype)
        b = rng("cross-b").standard_normal((rows, 3)).astype(dtype)
        want = np.cross(a, b)
        for k in (f"cross_kernel<{t}, int>", f"cross2_kernel<{t}, int>", f"cross3_kernel<{t}>"):
            o = np.full_like(a, np.nan)
            args = (1, 1, 1) if "3" not in k.split("<")[0] else ()
            rt.launch(rt.kernel(k), (rows + 255) // 256, 256, rows, o, a, b, *args)
            out.append((k, o, want))
    return out


def pnpoly(rt: Any) -> Checks:
    # kernel.h of pnpoly-cuda; VERTICES = 600 on the unit circle at random angles, as main draws them
    n = 1000
    r = rng("pnpoly")
    t = (r.random(600, dtype=np.float32) * np.float32(2 * np.pi)).astype(np.float32)
    vertex = np.stack([np.cos(t), np.sin(t)], axis=1).astype(np.float32)
    point = (r.random((n, 2), dtype=np.float32) * 2 - 1).astype(np.float32)
    vj, vk = vertex, np.roll(vertex, 1, axis=0)  # edge j runs from vertex j to vertex j - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = ((vk[:, 0] - vj[:, 0]) / (vk[:, 1] - vj[:, 1])).astype(np.float32)
    px, py = point[:, :1], point[:, 1:]
    between = (vj[:, 1] > py) != (vk[:, 1] > py)
    with np.errstate(invalid="ignore"):
        crosses = between & (px < slope * (py - vj[:, 1]) + vj[:, 0])
    want = (crosses.sum(axis=1) % 2).astype(np.int32)
    out = []
    for k in ("pnpoly_base", "pnpoly_opt<1>", "pnpoly_opt<2>", "pnpoly_opt<4>"):
        bitmap = np.full(n, -1, np.int32)
        rt.launch(rt.kernel(k), (n + 255) // 256, 256, bitmap, point, vertex, n)
        out.append((k, bitmap, want))
    return out


def channel_shuffle(rt: Any) -> Checks:
    n, g, k, hw = 2, 4, 6, 300  # C = G x K = 24 channels
    c = g * k
    x = rng("channelShuffle").random(n * c * hw, dtype=np.float32)
    y1 = np.full_like(x, np.nan)
    rt.launch(rt.kernel("ChannelShuffleNCHWKernel<float, false>"), ((hw + 255) // 256, n, c), 256, g, k, hw, x, y1)
    want1 = x.reshape(n, g, k, hw).transpose(0, 2, 1, 3).ravel()  # out channel k*G+g is in channel g*K+k
    y2 = np.full_like(x, np.nan)
    rt.launch(rt.kernel("ChannelShuffleNHWCKernel<float, 32>"), n * hw, 256, g, k, x, y2)
    want2 = x.reshape(n * hw, g, k).transpose(0, 2, 1).ravel()
    return [("NCHW", y1, want1), ("NHWC", y2, want2)]


def maxpool3d(rt: Any) -> Checks:
    count, w, h, pw, ph = 5, 40, 30, 2, 3  # strides = pool sizes, as main sets them
    ow, oh = w // pw, h // ph
    x = rng("maxpool3d").random(count * h * w, dtype=np.float32)
    y = np.full(count * oh * ow, np.nan, np.float32)
    rt.launch(rt.kernel("maxpool3d"), ((ow + 7) // 8, (oh + 7) // 8, (count + 3) // 4), (8, 8, 4), x, y,
              pw, ph, pw, ph, count, w, h, ow, oh)
    want = x.reshape(count, oh, ph, ow, pw).max(axis=(2, 4))
    return [("o_img", y, np.maximum(want, 0).ravel())]


def nlll(rt: Any) -> Checks:
    nframe, classes, threads, ignore = 1000, 10, 64, 3
    r = rng("nlll")
    x = r.standard_normal(nframe * classes).astype(np.float32)
    target = r.integers(0, classes, nframe).astype(np.int32)
    weights = (r.random(classes, dtype=np.float32) + 0.5).astype(np.float32)
    out = []
    for size_average in (True, False):
        o, tw = np.zeros(1, np.float32), np.zeros(1, np.float32)
        rt.launch(rt.kernel("nll_loss_forward_reduce2d_kernel<float, float, int, 64>"), 1, threads, o, tw, x, target,
                  weights, size_average, nframe, classes, ignore)
        keep = target != ignore
        w = weights[target[keep]].astype(np.float64)
        loss = -(x.reshape(nframe, classes)[keep, target[keep]] * w).sum()
        want = loss / w.sum() if size_average else loss
        out += [(f"output size_average={size_average}", o, np.array([want], np.float32)),
                (f"total_weight size_average={size_average}", tw, np.array([w.sum()], np.float32))]
    return out


def lombscargle(rt: Any) -> Checks:
    nx, nf, y_dot = 200, 100, 0.5
    r = rng("lombscargle")
    x = np.sort(r.random(nx, dtype=np.float32) * 10).astype(np.float32)
    y = (np.sin(3 * x) + 0.1 * r.standard_normal(nx)).astype(np.float32)
    f = np.linspace(0.1, 10, nf).astype(np.float32)
    pgram = np.full(nf, np.nan, np.float32)
    # main's grid: (freqs + 255) / 256 * 256 blocks of 256, a grid-stride loop over the frequencies
    rt.launch(rt.kernel("lombscargle"), (nf + 255) // 256 * 256, 256, nx, nf, x, y, f, pgram, y_dot)
    fx = f[:, None].astype(np.float64) * x[None, :]
    c, s_ = np.cos(fx), np.sin(fx)
    xc, xs = (y * c).sum(1), (y * s_).sum(1)
    cc, ss, cs = (c * c).sum(1), (s_ * s_).sum(1), (c * s_).sum(1)
    tau = np.arctan2(2 * cs, cc - ss) / (2 * f)
    ct, st = np.cos(f * tau), np.sin(f * tau)
    want = 0.5 * ((ct * xc + st * xs) ** 2 / (ct * ct * cc + 2 * ct * st * cs + st * st * ss)
                  + (ct * xs - st * xc) ** 2 / (ct * ct * ss - 2 * ct * st * cs + st * st * cc)) * y_dot
    return [("pgram", pgram, want.astype(np.float32))]


def clock(rt: Any) -> Checks:
    # a static kernel, HIP_DYNAMIC_SHARED inside it, clock() into a clock_t array; every block takes the
    # minimum of the same 2 x 256 inputs
    blocks, threads = 4, 256
    x = rng("clock").random(2 * threads, dtype=np.float32)
    out = np.full(blocks, np.nan, np.float32)
    timer = np.zeros(2 * blocks, np.int64)
    rt.launch(rt.kernel("timedReduction"), blocks, threads, x, out, timer, shared_mem=2 * threads * 4)
    return [("output", out, np.full(blocks, x.min(), np.float32))]


def pitch(rt: Any) -> Checks:
    w, h, pitch_bytes = 50, 30, 256  # a pitched allocation: rows of 256 bytes, 50 floats used in each
    r = rng("pitch")
    pitched = r.standard_normal(h * pitch_bytes // 4).astype(np.float32)
    simple = r.standard_normal(h * w).astype(np.float32)
    want_p = pitched.copy().reshape(h, -1)
    want_p[:, :w] = 1 / (1 + np.exp(-want_p[:, :w].astype(np.float64)))
    want_s = 1 / (1 + np.exp(-simple.astype(np.float64)))
    grid = ((w + 15) // 16, (h + 15) // 16)
    rt.launch(rt.kernel("parallelPitched2DAccess"), grid, (16, 16), pitched, pitch_bytes, w, h)
    rt.launch(rt.kernel("parallelSimple2DAccess"), grid, (16, 16), simple, w, h)
    return [("pitched", pitched, want_p.ravel().astype(np.float32)), ("simple", simple, want_s.astype(np.float32))]


def filter_(rt: Any) -> Checks:
    # stream compaction: a __shared__ counter per block (filter), and cooperative_groups::coalesced_threads
    # (filter2); the order of the kept elements is the atomics' order, so the kept set is compared sorted
    n, block = 1000, 256
    src = rng("filter").integers(-5, 6, n).astype(np.int32)
    want = np.sort(src[src > 0])
    out = []
    for k in ("filter", "filter2"):
        dst, nres = np.zeros(n, np.int32), np.zeros(1, np.int32)
        rt.launch(rt.kernel(k), (n + block - 1) // block, block, dst, nres, src, n)
        out += [(f"{k} count", nres, np.array([want.size], np.int32)), (f"{k} kept", np.sort(dst[:want.size]), want)]
    return out


_M64 = (1 << 64) - 1


def _hpcc_step(r: int) -> int:
    return ((r << 1) & _M64) ^ (7 if r >> 63 else 0)


def _hpcc_starts(n: int) -> int:
    """HPCC_starts of randomAccess-hip/main.cu, in Python integers."""
    period = 1317624576693539401
    while n < 0:
        n += period
    while n > period:
        n -= period
    if n == 0:
        return 1
    m2, temp = [], 1
    for _ in range(64):
        m2.append(temp)
        temp = _hpcc_step(_hpcc_step(temp))
    i = next(i for i in range(62, -1, -1) if (n >> i) & 1)
    ran = 2
    while i > 0:
        temp = 0
        for j in range(64):
            if (ran >> j) & 1:
                temp ^= m2[j]
        ran = temp
        i -= 1
        if (n >> i) & 1:
            ran = _hpcc_step(ran)
    return ran


def random_access(rt: Any) -> Checks:
    size = 1024  # TableSize; NUPDATE = 4 x TableSize, 128 threads of one block
    table = np.zeros(size, np.uint64)
    rt.launch(rt.kernel("initTable"), (size + 255) // 256, 256, table, size)
    rt.launch(rt.kernel("update"), 1, 128, table, size)
    want = list(range(size))
    per = 4 * size // 128
    for j in range(128):
        ran = _hpcc_starts(per * j)
        for _ in range(per):
            ran = _hpcc_step(ran)
            want[ran & (size - 1)] ^= ran
    return [("Table", table, np.array(want, np.uint64))]


def bilateral(rt: Any) -> Checks:
    w, h, radius = 37, 29, 3
    a2, var_i, var_s = 0.5, 0.01, 16.0
    img = rng("bilateral").random(h * w, dtype=np.float32)
    out = np.full_like(img, np.nan)
    rt.launch(rt.kernel("bilateralFilter<3>"), ((w + 15) // 16, (h + 15) // 16), (16, 16), img, out, w, h,
              a2, var_i, var_s)
    g = img.reshape(h, w).astype(np.float64)
    want = np.zeros((h, w))
    for y in range(h):
        for x in range(w):
            num = den = 0.0
            for i in range(-radius, radius + 1):
                for j in range(-radius, radius + 1):
                    k, ll = x + i, y + j
                    k = -k if k < 0 else (w - 1 - i if k > w - 1 else k)  # the kernel's mirror
                    ll = -ll if ll < 0 else (h - 1 - j if ll > h - 1 else ll)
                    iw = g[ll, k]
                    wt = a2 * np.exp(-((k - x) ** 2 + (ll - y) ** 2) / (2 * var_s) - (g[y, x] - iw) ** 2 / (2 * var_i))
                    num += iw * wt
                    den += wt
            want[y, x] = num / den
    return [("out", out, want.ravel().astype(np.float32))]


def resize(rt: Any) -> Checks:
    c, ih, iw, oh, ow = 16, 10, 12, 23, 17  # 16 channels, 8 per iteration
    x = rng("resize").random(c * ih * iw, dtype=np.float32)
    fy, fx = ih / oh, iw / ow
    y = np.full(c * oh * ow, np.nan, np.float32)
    rt.launch(rt.kernel("resize<float, 8>"), 8, 256, y, y.size, oh, ow, x, ih, iw, fy, fx, False, False)
    iy = np.minimum((np.arange(oh) * np.float32(fy)).astype(np.int64), ih - 1)
    ix = np.minimum((np.arange(ow) * np.float32(fx)).astype(np.int64), iw - 1)
    want = x.reshape(c, ih, iw)[:, iy][:, :, ix]
    return [("nearest", y, want.ravel())]


def shuffle(rt: Any) -> Checks:
    # __shfl from lane 0 and __shfl_xor butterflies within groups of 8, 16 and 32 lanes (one block of 256)
    n, pattern = 256, np.int32(np.uint32(0xDEADBEEF).view(np.int32))
    out = []
    for g in (8, 16, 32):
        o = np.zeros(n, np.int32)
        rt.launch(rt.kernel(f"bcast_shfl_sg{g}"), 1, n, int(pattern), o)
        out.append((f"bcast_shfl_sg{g}", o, np.full(n, pattern, np.int32)))
        o = np.zeros(n, np.int32)
        rt.launch(rt.kernel(f"bcast_shfl_xor_sg{g}"), 1, n, o)
        out.append((f"bcast_shfl_xor_sg{g}", o, np.full(n, g * (g - 1) // 2, np.int32)))
    return out


def matrix_rotate(rt: Any) -> Checks:
    n = 33
    m = rng("matrix-rotate").random(n * n, dtype=np.float32)
    want = np.rot90(m.reshape(n, n), -1).ravel()
    rt.launch(rt.kernel("rotate_matrix_parallel"), (n // 2 + 255) // 256, 256, m, n)
    return [("matrix", m, want)]


def mask(rt: Any) -> Checks:
    b, n, m, radius, fill = 3, 7, 20, 2, -1.0
    r = rng("mask")
    x = r.random(b * n * m, dtype=np.float32)
    lengths = r.integers(0, m + 1, n).astype(np.int32)
    centers = r.integers(0, m, n).astype(np.int32)
    k = np.arange(m)
    out = []
    for batch in (b, -1):  # B >= 0: a batch of N x M; B < 0: one N x M
        shape = (b if batch >= 0 else 1, n, m)
        xs = x[:int(np.prod(shape))]
        seq = np.full(xs.size, np.nan, np.float32)
        rt.launch(rt.kernel("sequenceMaskKernel<float>"), 4, 256, n, m, batch, xs, lengths, fill, seq)
        want = np.where(k[None, None, :] >= lengths[None, :, None], np.float32(fill), xs.reshape(shape))
        out.append((f"sequence B={batch}", seq, want.ravel()))
        win = np.full(xs.size, np.nan, np.float32)
        rt.launch(rt.kernel("windowMaskKernel<float>"), 4, 256, n, m, batch, xs, centers, radius, fill, win)
        c = centers[None, :, None]
        want = np.where((k < c - radius) | (k > c + radius), np.float32(fill), xs.reshape(shape))
        out.append((f"window B={batch}", win, want.ravel()))
    return out


def matrix_t(rt: Any) -> Checks:
    # the CUDA SDK transpose kernels (tiles of 16 x 16, cg::sync in copySharedMem); fine- and coarse-grained
    # transpose only within a tile and are left out; square, as main's (copySharedMem swaps the bounds)
    w = h = 48
    x = rng("matrixT").random(w * h, dtype=np.float32)
    out = []
    for k, want in (("copy", x), ("copySharedMem", x), ("transposeNaive", x.reshape(h, w).T.ravel()),
                    ("transposeCoalesced", x.reshape(h, w).T.ravel()),
                    ("transposeNoBankConflicts", x.reshape(h, w).T.ravel()),
                    ("transposeDiagonal", x.reshape(h, w).T.ravel())):
        y = np.full_like(x, np.nan)
        rt.launch(rt.kernel(k), (w // 16, h // 16), (16, 16), y, x, w, h)
        out.append((k, y, want))
    return out


def interleave(rt: Any) -> Checks:
    # an array of 16-member structs and a struct of 16 arrays of NUM_ELEMENTS = 4096; COUNT = 4096 additions
    n, full = 64, 4096
    r = rng("interleave")
    src_i = r.integers(0, 2**32, n * 16, dtype=np.uint64).astype(np.uint32)
    dst_i = r.integers(0, 2**32, n * 16, dtype=np.uint64).astype(np.uint32)
    src_n = r.integers(0, 2**32, 16 * full, dtype=np.uint64).astype(np.uint32)
    dst_n = r.integers(0, 2**32, 16 * full, dtype=np.uint64).astype(np.uint32)
    want_i = ((dst_i.astype(np.uint64) + 4096 * src_i.astype(np.uint64)) % 2**32).astype(np.uint32)
    want_n = dst_n.copy().reshape(16, full)
    want_n[:, :n] = (want_n[:, :n].astype(np.uint64) + 4096 * src_n.reshape(16, full)[:, :n]) % 2**32
    rt.launch(rt.kernel("add_kernel_interleaved"), 1, n, dst_i, src_i, n)
    rt.launch(rt.kernel("add_kernel_non_interleaved"), 1, n, dst_n, src_n, n)
    return [("interleaved", dst_i, want_i), ("non_interleaved", dst_n, want_n.ravel())]


def pointwise(rt: Any) -> Checks:
    # the LSTM cell's pointwise part
    hidden, batch = 40, 6
    n = hidden * batch
    r = rng("pointwise")
    tmp_h = r.standard_normal(4 * n).astype(np.float32)
    tmp_i = r.standard_normal(4 * n).astype(np.float32)
    bias = r.standard_normal(8 * hidden).astype(np.float32)
    c_in = r.standard_normal(n).astype(np.float32)
    gates, h_out, i_out, c_out = (np.full(k, np.nan, np.float32) for k in (4 * n, n, n, n))
    rt.launch(rt.kernel("elementwise"), (n + 255) // 256, 256, hidden, batch, tmp_h, tmp_i, bias, gates, h_out,
              i_out, c_in, c_out)
    th, ti = tmp_h.reshape(batch, 4, hidden).astype(np.float64), tmp_i.reshape(batch, 4, hidden)
    b = bias.reshape(8, hidden).astype(np.float64)
    g = th + ti + b[:4] + b[4:]
    sig = 1 / (1 + np.exp(-g))
    c = sig[:, 1] * c_in.reshape(batch, hidden) + sig[:, 0] * np.tanh(g[:, 2])
    h = sig[:, 3] * np.tanh(c)
    f32 = np.float32
    return [("linearGates", gates, g.ravel().astype(f32)), ("c_out", c_out, c.ravel().astype(f32)),
            ("h_out", h_out, h.ravel().astype(f32)), ("i_out", i_out, h.ravel().astype(f32))]


def rfs(rt: Any) -> Checks:
    # reproducible float sums: each value rounded against a power-of-two factor first, so atomicAdd in any
    # order (sumArray) and a reverse loop (sumArrays) give the same, exact float sum
    arrays, length = 4, 1000
    x = (rng("rfs").random(arrays * length, dtype=np.float32) * 10).astype(np.float32)
    max_val = np.abs(x.reshape(arrays, length)).max(axis=1).astype(np.float32)
    eps = np.finfo(np.float32).eps
    delta = (max_val * np.float32(length)) / np.float32(1 - 2 * length * eps)
    factor = np.ldexp(np.float32(1), np.frexp(delta)[1]).astype(np.float32)
    q = ((factor[:, None] + x.reshape(arrays, length)) - factor[:, None]).astype(np.float32)
    want = q.astype(np.float64).sum(axis=1).astype(np.float32)
    r1 = np.zeros(arrays, np.float32)
    k = rt.kernel("sumArray")
    for a in range(arrays):
        part = np.ascontiguousarray(x[a * length:(a + 1) * length])
        one = np.zeros(1, np.float32)
        rt.launch(k, 4, 256, float(factor[a]), length, part, one)
        r1[a] = one[0]
    r2 = np.zeros(arrays, np.float32)
    rt.launch(rt.kernel("sumArrays"), 1, 256, arrays, length, x, r2, max_val)
    return [("sumArray", r1, want), ("sumArrays", r2, want)]


def mcpr(rt: Any) -> Checks:
    # Monte Carlo category probabilities: per row, how often each of K categories has the largest draw
    n, k, m = 300, 21, 200
    r = rng("mcpr")
    alphas = r.standard_normal(n * k)
    rands = r.standard_normal(m * k)
    out = []
    # compute_probs: row-major (i*K + k), rands[m*K + k]
    w = alphas.reshape(n, 1, k) + rands.reshape(1, m, k)
    want = np.stack([(w.argmax(axis=2) == c).mean(axis=1) for c in range(k)], axis=1)  # ties: none
    p1 = np.full(n * k, np.nan)
    rt.launch(rt.kernel("compute_probs"), (n + 255) // 256, 256, alphas, rands, p1, n, k, m)
    out.append(("compute_probs", p1, want.ravel()))
    # compute_probs_unitStrides: column-major (k*n + i), rands[k*M + m]
    a_t = np.ascontiguousarray(alphas.reshape(n, k).T).ravel()
    r_t = np.ascontiguousarray(rands.reshape(m, k).T).ravel()
    p2 = np.full(n * k, np.nan)
    rt.launch(rt.kernel("compute_probs_unitStrides"), (n + 255) // 256, 256, a_t, r_t, p2, n, k, m)
    out.append(("compute_probs_unitStrides", p2, want.T.ravel()))
    return out


def pool(rt: Any) -> Checks:
    # the average-pooling gradient with main's constants (11 x 11 windows, stride 4, padding 1, exclusive),
    # the functor AvgPoolGrad<float> by value (an empty class: one byte), NCHW
    from _published import StatelessFunctor

    b, c, ih, iw, k, st, pad = 2, 3, 30, 30, 11, 4, 1
    oh = ow = (ih + 2 * pad - k) // st + 1
    r = rng("pool")
    x = r.random(b * c * ih * iw, dtype=np.float32)
    y = r.random(b * c * oh * ow, dtype=np.float32)
    dy = r.random(b * c * oh * ow, dtype=np.float32)
    dx = np.full_like(x, np.nan)
    n = x.size
    rt.launch(rt.kernel("KernelPool2DGrad<AvgPoolGrad<float>, float, 11, 11, 4, 4, 1, 1, true>"), (n + 255) // 256,
              256, n, x, y, dy, c, ih, iw, oh, ow, StatelessFunctor(), dx, False)
    want = np.zeros((b, c, ih, iw))
    g = dy.reshape(b, c, oh, ow).astype(np.float64)
    for ph in range(oh):
        for pw in range(ow):
            hs, ws = ph * st - pad, pw * st - pad
            he, we = min(hs + k, ih), min(ws + k, iw)
            hs, ws = max(hs, 0), max(ws, 0)
            want[:, :, hs:he, ws:we] += g[:, :, ph:ph + 1, pw:pw + 1] / ((he - hs) * (we - ws))
    return [("input_grad", dx, want.ravel().astype(np.float32))]


def rmsnorm(rt: Any) -> Checks:
    # a block reduce of warps whose width the kernel takes from __GFX9__/__GFX8__ (64) or else 32
    outer, eps, block = 4, 1e-5, 256
    out = []
    for inner, unroll in ((1024, 4), (1001, 1)):  # main: UNROLL = 16 / sizeof(T) when inner_len allows it
        r = rng(f"rmsnorm{inner}")
        x = r.standard_normal(outer * inner).astype(np.float32)
        gamma = r.standard_normal(inner).astype(np.float32)
        y = np.full_like(x, np.nan)
        rt.launch(rt.kernel(f"rmsnorm_fwd_two_scan_kernel<float, {unroll}>"), outer, block, x, gamma, y, inner, eps)
        xs = x.reshape(outer, inner).astype(np.float64)
        want = xs / np.sqrt((xs ** 2).mean(axis=1, keepdims=True) + eps) * gamma
        out.append((f"UNROLL {unroll}", y, want.ravel().astype(np.float32)))
    return out


def bscan(rt: Any) -> Checks:
    # a block's exclusive count of positive values: a 32-lane ballot scan per warp (lanemask_lt builds
    # `1 << lane` in 32 bits, __ballot is kept in an unsigned int), then a warp scan of the warp sums
    n = 256
    x = rng("bscan").integers(-n // 2, n // 2, n).astype(np.int32)
    y = np.full(n, -1, np.int32)
    rt.launch(rt.kernel("binary_scan"), 1, n, y, x)
    positive = (x > 0).astype(np.int32)
    return [("prefix", y, (np.cumsum(positive) - positive).astype(np.int32))]


def sosfil(rt: Any) -> Checks:
    # cascaded biquads (direct form II transposed), one thread per section, the sample passed from section
    # to section through shared memory with one barrier per sample: lanes read s_out[tx - 1] while lane
    # tx - 1 writes it, so the kernel relies on the wavefront's lockstep. The reference follows the
    # benchmark's reference.h, which emulates that lockstep (each section also filters the zeros that
    # s_out holds before the first samples reach it)
    signals, samples, sections = 3, 100, 8
    r = rng("sosfil")
    sos = r.standard_normal((sections, 6)).astype(np.float32) * np.float32(0.3)
    sos[:, 3] = 1
    zi = r.standard_normal((signals, sections, 2)).astype(np.float32) * np.float32(0.1)
    x = np.sin(2 * 3.14 * (np.arange(signals)[:, None] + 1 + np.arange(samples)[None, :])).astype(np.float32)
    want = x.astype(np.float64).copy()
    b0, b1, b2, a1, a2 = (sos[:, i].astype(np.float64) for i in (0, 1, 2, 4, 5))
    last = sections - 1
    for sg in range(signals):
        z = zi[sg].astype(np.float64).copy()
        out = np.zeros(sections)
        for n in range(samples + last):
            active = np.arange(sections) >= max(0, n - samples + 1)  # unloading: the first sections retire
            xn = np.concatenate([[want[sg, n] if n < samples else 0.0], out[:-1]])
            y = b0 * xn + z[:, 0]
            z0 = b1 * xn - a1 * y + z[:, 1]
            z1 = b2 * xn - a2 * y
            z[active, 0], z[active, 1] = z0[active], z1[active]
            out = np.where(active, y, out)
            if n >= last:
                want[sg, n - last] = y[last]
    xin = x.ravel().copy()
    rt.launch(rt.kernel("sosfilt<float>"), signals, sections, signals, samples, sections, 2, sos, zi, xin,
              shared_mem=(sections + sections * 2 + sections * 6) * 4)
    return [("x", xin, want.ravel().astype(np.float32))]


CASES = [
    bench("atomicAggregate", lambda warp: ["k2" if warp == 64 else "k"], atomic_aggregate),
    bench("atomicCost", ["wiAtomicOnGlobalMem<int>", "woAtomicOnGlobalMem<int>"], atomic_cost),
    bench("threadfence", ["sum"], threadfence),
    bench("michalewicz", ["eval"], michalewicz, rtol=1e-4),
    bench("vote", ["VoteAnyKernel1", "VoteAllKernel2", "VoteAnyKernel3"], vote, cuda_headers=True),
    bench("f16max", ["hmax<half2>", "hmax<half>"], f16max),
    bench("popcount", ["pc1", "pc2", "pc3", "pc4", "pc5", "pc6"], popcount),
    bench("reverse", ["reverse"], reverse),
    bench("heat2d", ["dev_lapl_iter"], heat2d, rtol=1e-6),
    bench("bitonic-sort", ["bitonic_sort"], bitonic_sort),
    bench("concat", ["concat<float>"], concat),
    bench("convolution1D", ["conv1d<float>", "conv1d_tiled<float>", "conv1d_tiled_caching<float>"], convolution1d,
          module=True),
    bench("rodrigues", ["rotate", "rotate2"], rodrigues, rtol=1e-5, atol=1e-6),
    bench("softmax", ["softMax", "softMax2"], softmax, rtol=1e-5, atol=1e-7),
    bench("scan", ["scan<int, 512>", "scan_bcao<int, 512>"], scan),
    bench("gelu", ["gelu_bias_loop", "gelu_bias_loop_base"], gelu, cuda_headers=True, rtol=2e-3, atol=2e-3),
    bench("glu", ["glu_kernel"], glu, cuda_headers=True, rtol=1e-5, atol=1e-6),
    bench("lif", ["lif"], lif, cuda_headers=True, rtol=1e-4, atol=1e-5),
    bench("entropy", ["entropy", "entropy_opt<16, 16>"], entropy, cuda_headers=True, rtol=1e-5, atol=1e-5),
    bench("bitpermute", ["bit_rev_permutation", "bit_rev_permutation_z"], bitpermute, cuda_headers=True, lockstep=True),
    bench("extrema", ["relextrema_1D<float>", "relextrema_2D<float>"], extrema, cuda_headers=True),
    bench("scatterAdd", ["scatterAdd_kernel", "scatterAdd2_kernel"], scatter_add, cuda_headers=True),
    bench("atomicIntrinsics", ["testKernel<int>", "testKernel<unsigned int>"], atomic_intrinsics, cuda_headers=True),
    bench("bsearch", ["kernel_BS<float>", "kernel_BS2<float>", "kernel_BS3<float>", "kernel_BS4<float>"], bsearch),
    bench("adam", ["adam<float, float>"], adam, cuda_headers=True, rtol=1e-5, atol=1e-6),
    bench("hellinger", ["hellinger"], hellinger, cuda_headers=True, rtol=1e-5, atol=1e-6),
    bench("stddev", ["sopKernel<float, int, 256, 32>", "sampleKernel<float, int>"], stddev, cuda_headers=True,
          rtol=1e-6),
    bench("matern", ["matern_kernel"], matern, cuda_headers=True, rtol=1e-5),
    bench("romberg", ["romberg"], romberg, cuda_headers=True, lockstep=True, rtol=1e-7),
    bench("flip", ["flip_kernel<float>"], flip, cuda_headers=True),
    bench("keogh", ["lb_keogh"], keogh, cuda_headers=True, rtol=1e-5, atol=1e-4),
    bench("overlay", ["DetectionOverlayBox<float3>"], overlay, cuda_headers=True, rtol=1e-6),
    bench("atomicCAS", [f"atomic{op}Derived<{t}>" for t in ("long long", "double") for op in ("Min", "Max", "Add")],
          atomic_cas, cuda_headers=True),
    bench("complex", ["complex_float", "complex_double", "ref_complex_float", "ref_complex_double"], complex_,
          cuda_headers=True),
    bench("langevin", ["k0", "k1", "k2"], langevin, rtol=2e-4, atol=1e-4),
    bench("cross", [f"{k}<{t}{s}>" for t in ("float", "double") for k, s in
                    (("cross_kernel", ", int"), ("cross2_kernel", ", int"), ("cross3_kernel", ""))],
          cross, rtol=1e-5, atol=1e-6),
    bench("pnpoly", ["pnpoly_base", "pnpoly_opt<1>", "pnpoly_opt<2>", "pnpoly_opt<4>"], pnpoly, cuda_headers=True),
    bench("channelShuffle", ["ChannelShuffleNCHWKernel<float, false>", "ChannelShuffleNHWCKernel<float, 32>"],
          channel_shuffle, cuda_headers=True),
    bench("maxpool3d", ["maxpool3d"], maxpool3d),
    bench("nlll", ["nll_loss_forward_reduce2d_kernel<float, float, int, 64>"], nlll, cuda_headers=True, rtol=1e-5),
    bench("lombscargle", ["lombscargle"], lombscargle, rtol=2e-3, atol=1e-3),
    bench("clock", ["timedReduction"], clock),
    bench("pitch", ["parallelPitched2DAccess", "parallelSimple2DAccess"], pitch, rtol=1e-6),
    bench("filter", ["filter", "filter2"], filter_),
    bench("randomAccess", ["initTable", "update"], random_access),
    bench("bilateral", ["bilateralFilter<3>"], bilateral, cuda_headers=True, rtol=1e-4, atol=1e-5),
    bench("resize", ["resize<float, 8>"], resize),
    bench("shuffle", [f"bcast_shfl{x}_sg{g}" for g in (8, 16, 32) for x in ("", "_xor")], shuffle),
    bench("matrix-rotate", ["rotate_matrix_parallel"], matrix_rotate),
    bench("mask", ["sequenceMaskKernel<float>", "windowMaskKernel<float>"], mask, cuda_headers=True),
    bench("matrixT", ["copy", "copySharedMem", "transposeNaive", "transposeCoalesced", "transposeNoBankConflicts",
                      "transposeDiagonal"], matrix_t),
    bench("interleave", ["add_kernel_interleaved", "add_kernel_non_interleaved"], interleave),
    bench("pointwise", ["elementwise"], pointwise, cuda_headers=True, rtol=1e-5, atol=1e-6),
    bench("rfs", ["sumArray", "sumArrays"], rfs),
    bench("mcpr", ["compute_probs", "compute_probs_unitStrides"], mcpr, cuda_headers=True, rtol=1e-12),
    bench("pool", ["KernelPool2DGrad<AvgPoolGrad<float>, float, 11, 11, 4, 4, 1, 1, true>"], pool,
          cuda_headers=True, rtol=1e-5, atol=1e-6),
    bench("rmsnorm", ["rmsnorm_fwd_two_scan_kernel<float, 4>", "rmsnorm_fwd_two_scan_kernel<float, 1>"], rmsnorm,
          cuda_headers=True, rtol=1e-4, atol=1e-5),
    bench("bscan", ["binary_scan"], bscan, lockstep=True),
    bench("sosfil", ["sosfilt<float>"], sosfil, cuda_headers=True, lockstep=True, rtol=1e-4, atol=1e-5),
    bench("vanGenuchten", ["vanGenuchten"], van_genuchten, cuda_headers=True, rtol=1e-12),
]
BY_NAME = {c.name: c for c in CASES}
