"""Performance assertions for GPU kernels: the ``gpu_bench`` fixture and its timer.

Importing this package imports no GPU library; backends are imported when a measurement runs.
"""

from __future__ import annotations

from pytest_gpuenv.base.lock import gpu_lock, lock_dir
from pytest_gpuenv.perf._comparison import Comparison
from pytest_gpuenv.perf._device import DeviceInfo, peak_bandwidth
from pytest_gpuenv.perf._engine import Sampler
from pytest_gpuenv.perf._entries import PerfEntry
from pytest_gpuenv.perf._results import GpuPerfWarning, Measurement
from pytest_gpuenv.perf._sampling import SamplingOptions
from pytest_gpuenv.perf._stats import FAIL, INCONCLUSIVE, PASS, median_ci
from pytest_gpuenv.perf._units import parse_fraction, parse_time
from pytest_gpuenv.perf.bench import GpuBench, PerfContext
from pytest_gpuenv.perf.session import PerfSession

__all__ = [
    "FAIL",
    "INCONCLUSIVE",
    "PASS",
    "Comparison",
    "DeviceInfo",
    "GpuBench",
    "GpuPerfWarning",
    "Measurement",
    "PerfContext",
    "PerfEntry",
    "PerfSession",
    "Sampler",
    "SamplingOptions",
    "gpu_lock",
    "lock_dir",
    "median_ci",
    "parse_fraction",
    "parse_time",
    "peak_bandwidth",
]
