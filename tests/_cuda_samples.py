"""CUDA kernels from NVIDIA's cuda-samples (tests/data/cuda_samples) with inputs, launches and numpy references.

The same ``Case``/``Run`` machinery as the published HIP kernels (tests/_published.py): ``CpuRun`` here and
in the tests, ``GpuRun`` in ``scripts/published_check.py`` (``--cuda``: the same files as CUDA on an NVIDIA
GPU). The files are ``.cu``: every backend takes them as CUDA (NVRTC/nvcc as written, hiprtc/hipcc and the
CPU executor through the shipped CUDA-to-HIP headers).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from _published import Case, Checks, rng

CUDA_SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cuda_samples")


@dataclass(frozen=True)
class CudaCase(Case):
    @property
    def path(self) -> str:
        return os.path.join(CUDA_SAMPLES, self.name + ".cu")


def vector_add(rt: Any) -> Checks:
    n = 50000  # the sample's size, 256 threads a block as it launches
    r = rng("vectorAdd")
    a, b = r.random(n, dtype=np.float32), r.random(n, dtype=np.float32)
    c = np.full(n, np.nan, np.float32)
    rt.launch(rt.kernel("vectorAdd"), (n + 255) // 256, 256, a, b, c, n)
    return [("C", c, a + b)]


def matrix_mul(rt: Any) -> Checks:
    checks = []
    for block in (16, 32):  # the sample's two instantiations (block_size 16 or 32 threads a side)
        ha, wa, wb = 2 * block, 3 * block, 2 * block  # multiples of the block, as the sample requires
        r = rng(f"matrixMul{block}")
        a, b = r.random((ha, wa), dtype=np.float32), r.random((wa, wb), dtype=np.float32)
        c = np.full((ha, wb), np.nan, np.float32)
        rt.launch(rt.kernel(f"MatrixMulCUDA<{block}>"), (wb // block, ha // block), (block, block), c, a, b, wa, wb)
        checks.append((f"C block {block}", c, (a.astype(np.float64) @ b).astype(np.float32)))
    return checks


TRANSPOSE = ["copy", "copySharedMem", "transposeNaive", "transposeCoalesced", "transposeNoBankConflicts",
             "transposeDiagonal", "transposeFineGrained", "transposeCoarseGrained"]


def transpose(rt: Any) -> Checks:
    tile, rows = 32, 16  # TILE_DIM x BLOCK_ROWS threads a block, each over TILE_DIM / BLOCK_ROWS rows
    w = h = 64  # multiples of TILE_DIM, square as in the sample (FineGrained/CoarseGrained mix width and height)
    x = rng("transpose").random((h, w), dtype=np.float32)
    tiles = x.reshape(h // tile, tile, w // tile, tile)  # [tile row, row, tile column, column]
    checks = []
    for name in TRANSPOSE:
        out = np.full(w * h, np.nan, np.float32)
        rt.launch(rt.kernel(name), (w // tile, h // tile), (tile, rows), out, x, w, h)
        if name.startswith("copy"):
            want = x.ravel()
        elif name == "transposeFineGrained":  # transposes within each tile, tiles left in place
            want = tiles.transpose(0, 3, 2, 1).ravel()
        elif name == "transposeCoarseGrained":  # moves the tiles, each left as it was
            want = tiles.transpose(2, 1, 0, 3).ravel()
        else:
            want = x.T.ravel()
        checks.append((name, out, want))
    return checks


def histogram256(rt: Any) -> Checks:
    blocks, block = 4, 192  # HISTOGRAM256_THREADBLOCK_SIZE: WARP_COUNT (6) sub-histograms of 32 threads
    words = rng("histogram256").integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32)
    partial = np.full(blocks * 256, 0xDEADBEEF, np.uint32)
    rt.launch(rt.kernel("histogram256Kernel"), blocks, block, partial, words, len(words))
    hist = np.full(256, 0xDEADBEEF, np.uint32)
    rt.launch(rt.kernel("mergeHistogram256Kernel"), 256, 256, hist, partial, blocks)  # one block per bin
    want = np.bincount(words.view(np.uint8), minlength=256).astype(np.uint32)
    return [("partial sums", partial.reshape(blocks, 256).sum(axis=0, dtype=np.uint32), want), ("histogram", hist, want)]


#: (name expression, elements each block sums): n threads a block; reduce3 to reduce5 take two elements each
REDUCE = [("reduce0<int>", 256), ("reduce1<int>", 256), ("reduce2<int>", 256), ("reduce3<int>", 512),
          ("reduce4<int, 256>", 512), ("reduce5<int, 256>", 512), ("reduce6<int, 256, false>", 256),
          ("cg_reduce<int>", 256)]
#: reads lanes its last warp reduction left out: see test_reduce7_reads_inactive_lanes
REDUCE7 = "reduce7<int, 256, false>"


def reduction(rt: Any) -> Checks:
    n = 3000  # not a multiple of the block: the tails are masked
    x = rng("reduction").integers(-1000, 1000, n).astype(np.int32)
    checks = []
    for name, per_block in REDUCE:
        blocks = (n + per_block - 1) // per_block
        out = np.full(blocks, -7, np.int32)
        rt.launch(rt.kernel(name), blocks, 256, x, out, n, shared_mem=256 * 4)  # blockSize * sizeof(T)
        padded = np.zeros(blocks * per_block, np.int64)
        padded[:n] = x
        checks.append((name, out, padded.reshape(blocks, per_block).sum(axis=1).astype(np.int32)))
    return checks


CASES = [
    CudaCase("vectorAdd", lambda w: ["vectorAdd"], vector_add),
    CudaCase("matrixMul", lambda w: ["MatrixMulCUDA<16>", "MatrixMulCUDA<32>"], matrix_mul, module=True,
             rtol=1e-5, atol=1e-5),
    CudaCase("transpose", lambda w: list(TRANSPOSE), transpose, module=True),
    CudaCase("histogram256", lambda w: ["histogram256Kernel", "mergeHistogram256Kernel"], histogram256, module=True),
    CudaCase("reduction_kernel", lambda w: [name for name, _ in REDUCE], reduction, module=True),
]
BY_NAME = {c.name: c for c in CASES}
