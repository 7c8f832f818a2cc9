"""The cost of --gpuenv-leak-check per test: one snapshot before the call and one after the teardown.

Run on a machine with a CUDA GPU (scripts/gpu-check.sh, section bench): prints microseconds per test,
torch's allocator holding a few tensors as a test suite's would. The budget is 1 ms per test.
"""

from __future__ import annotations

import statistics
import sys
import time

from pytest_gpuenv.guards.leak import leaks, snapshot


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to measure")
        return 0
    keep = [torch.randn(1 << 20, device="cuda") for _ in range(8)]
    x = keep[0].reshape(1024, 1024)
    (x @ x).sum().item()
    per_test = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(200):
            before = snapshot()
            leaks(before, snapshot(), 16 << 20)
        per_test.append((time.perf_counter() - t0) / 200 * 1e6)
    print(f"leak check per test (two snapshots): median {statistics.median(per_test):.1f} us, "
          f"min {min(per_test):.1f} us, max {max(per_test):.1f} us over 7 x 200 tests "
          f"({torch.cuda.get_device_name(0)}); off: no hook runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
