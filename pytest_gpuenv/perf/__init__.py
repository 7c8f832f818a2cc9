"""Performance assertions for GPU kernels: the ``gpu_bench`` fixture and its timer.

Importing this package imports no GPU library; backends are imported when a measurement runs.
"""

from __future__ import annotations

from pytest_gpuenv.perf._bench import Comparison, GpuBench, GpuPerfWarning, Measurement, PerfContext
from pytest_gpuenv.perf._device import DeviceInfo, peak_bandwidth
from pytest_gpuenv.perf._engine import Options, Sampler
from pytest_gpuenv.perf._lock import gpu_lock, lock_dir
from pytest_gpuenv.perf._stats import FAIL, INCONCLUSIVE, PASS, median_ci
from pytest_gpuenv.perf._units import parse_fraction, parse_time

__all__ = [
    "FAIL",
    "INCONCLUSIVE",
    "PASS",
    "Comparison",
    "DeviceInfo",
    "GpuBench",
    "GpuPerfWarning",
    "Measurement",
    "Options",
    "PerfContext",
    "Sampler",
    "gpu_lock",
    "lock_dir",
    "median_ci",
    "parse_fraction",
    "parse_time",
    "peak_bandwidth",
]
