"""Speed of the CPU executor on this machine: vector add (1M floats, 256-thread blocks), tiled matmul
256x256, a shared-memory block sum of 1M floats (256-thread blocks, 9 barriers each), each unchecked and
checked; a cold compile and a cache hit.

    python3 benchmarks/cpu_exec.py

Goals (issue 9, 2-core runner): vector add <= 50 ms unchecked / 150 ms checked; matmul <= 150 ms /
0.6 s; cold compile <= 1 s; cache hit <= 2 ms. Each figure is the best of a few runs.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_gpuenv.rtc import compile_kernel

KERNELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels")
GOALS = {"vector_add unchecked": 0.050, "vector_add checked": 0.150, "matmul_tiled unchecked": 0.150,
         "matmul_tiled checked": 0.6, "block_sum unchecked": 0.50, "block_sum checked": 2.0,
         "cold compile": 1.0, "cache hit": 0.002}
BLOCK_SUM = """
#include <hip/hip_runtime.h>
extern "C" __global__ void block_sum(float* out, const float* in) {
    __shared__ float s[256];
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
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
    verdict = "ok" if seconds <= goal else "OVER"
    print(f"{name:<24} {seconds * 1e3:9.2f} ms   goal {goal * 1e3:7.1f} ms  {verdict}  {extra}")


def main() -> None:
    cache = tempfile.mkdtemp(prefix="gpuenv-bench-")
    n = 1 << 20
    a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    out = np.empty_like(a)
    m = 256
    A, B = np.random.randn(m, m).astype(np.float32), np.random.randn(m, m).astype(np.float32)
    C = np.empty((m, m), np.float32)
    sums = np.empty(n // 256, np.float32)
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
        bs = compile_kernel(BLOCK_SUM, "block_sum", arch="cpu", check=check, cache_dir=cache)
        t = best(lambda bs=bs: bs(n // 256, 256, sums, a), 3)
        line(f"block_sum {mode}", t, f"{n / t / 1e6:.1f} M threads/s, 9 barriers per block")
    src = os.path.join(KERNELS, "reduce_sum.hip")
    t = time.perf_counter()
    k = compile_kernel(src, "reduce_sum", arch="cpu", cache_dir=cache)
    line("cold compile", time.perf_counter() - t, f"reduce_sum, checked, cache_hit={k.cache_hit}")
    t = best(lambda: compile_kernel(src, "reduce_sum", arch="cpu", cache_dir=cache), 20)
    line("cache hit", t, "compile_kernel of the same source again")


if __name__ == "__main__":
    main()
