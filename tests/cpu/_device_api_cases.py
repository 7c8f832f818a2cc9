"""The inputs of tests/data/cpu_kernels/device_api.hip's kernels and their launch, shared by the CPU executor's
tests (tests/cpu/test_device_api_families.py) and the GPU's (tests/kernels/test_gpu_device_api.py): ``run(k,
family)`` launches kernel ``k`` of that family on numpy arrays and returns its outputs, one row per field."""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "cpu_kernels",
                      "device_api.hip")
N = 256
FAMILIES = ("half", "bf16", "int", "warp", "atomic", "math")
#: fields each family's kernel writes only under __HIP_PLATFORM_AMD__ (no CUDA counterpart)
AMD_ONLY = {"int": range(13, 16), "warp": range(4, 13), "atomic": ("fmin", "fmax", "u")}
FILL = 0x5A5A5A5A


def inputs(family: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(38)
    if family in ("half", "bf16"):
        a = (rng.standard_normal(N) * 4).astype(np.float32)
        b = (rng.standard_normal(N) * 4).astype(np.float32)
        a[:4] = [np.inf, 1e6, -0.0, 2.0]  # +inf, a float that rounds to +inf in half, a zero, a tie with b
        b[:4] = [1.0, 1.0, 0.0, 2.0]
        return {"a": a, "b": b}
    if family == "int":
        return {"a": rng.integers(0, 2**64, N, dtype=np.uint64), "b": rng.integers(0, 2**64, N, dtype=np.uint64)}
    if family == "warp":
        return {"v": rng.integers(0, 4000, N).astype(np.int32)}
    if family == "atomic":
        a = (rng.standard_normal(N)).astype(np.float32)
        a[0:16], a[16:32] = [0.0, -0.0] * 8, [-0.0, 0.0] * 8  # two cells of zeros of both signs, in both orders
        return {"a": a}
    return {"a": rng.uniform(-0.95, 0.95, N)}


def run(k: Callable[..., Any], family: str, to_device: Callable[[np.ndarray], Any] = lambda x: x,
        to_host: Callable[[Any], np.ndarray] = lambda x: x) -> dict[str, np.ndarray]:
    """Launch family ``family``'s kernel ``k`` (8 blocks of 32 threads, or 4 of 64) on fresh inputs."""
    x = inputs(family)
    grid, block = 4, 64
    if family in ("half", "bf16"):
        out = np.full(10 * N, np.nan, np.float32)
        d = to_device(out)
        k(grid, block, d, to_device(x["a"]), to_device(x["b"]), N)
        return {"out": to_host(d).reshape(10, N)}
    if family == "int":
        out = np.full(16 * N, FILL, np.uint64)
        d = to_device(out)
        k(grid, block, d, to_device(x["a"]), to_device(x["b"]), N)
        return {"out": to_host(d).reshape(16, N)}
    if family == "warp":
        out = np.full(16 * N, FILL, np.uint64)
        d = to_device(out)
        k(grid, block, d, to_device(x["v"]), N)
        return {"out": to_host(d).reshape(16, N)}
    if family == "atomic":
        cells = N // 16
        h2 = to_device(np.zeros(cells, np.uint32))
        fmin = to_device(np.concatenate([np.full(cells, np.inf, np.float32), np.zeros(cells, np.float32)]))
        fmax = to_device(np.full(cells, -np.inf, np.float32))
        u = to_device(np.zeros(cells, np.uint32))
        k(grid, block, h2, fmin, fmax, u, to_device(x["a"]), N)
        return {"h2": to_host(h2), "fmin": to_host(fmin), "fmax": to_host(fmax), "u": to_host(u)}
    out = np.full(16 * N, np.nan, np.float64)
    d = to_device(out)
    k(grid, block, d, to_device(x["a"]), N)
    return {"out": to_host(d).reshape(16, N)}
