"""``--dist gpu``, in a worker: how much GPU memory each test used, against what it claimed.

After each test's call, the most its process held on each of the worker's GPUs during the test: torch's peak
of reserved memory (``torch.cuda.max_memory_reserved``, reset after each reading) where the test process
started torch's CUDA/HIP runtime, else what the driver counts for this process now (``dist.gpu_memory``: NVML
on an NVIDIA GPU, its context included; amdsmi's ``vram_mem`` on an AMD GPU), else nothing (amdsmi missing
or failing, NVML unavailable: no figure and no warning). The figures go to the controller in the report's ``user_properties`` (``USE_PROPERTY``:
{GPU id: [used, claimed]}), for the summary; a test that used more than it claimed gets a warning naming
the GPU, what it used and what it claimed.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Optional

import pytest

from pytest_gpuenv.base.model import format_size
from pytest_gpuenv.dist.routing import gpu_facts
from pytest_gpuenv.marks import markers
from pytest_gpuenv.marks.claims import claim_of

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.base.model import Device
    from pytest_gpuenv.session.state import GpuenvSession

#: the report property of a test's use: {GPU id: [bytes used, bytes claimed]}
USE_PROPERTY = "gpuenv_gpu_use"


class ClaimWarning(pytest.PytestWarning):
    """A test used more GPU memory than it claimed."""


def _torch_peaks(count: int) -> Optional[list[int]]:
    """Each device's peak of reserved bytes since the last reading (reset now), where torch started its runtime."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return None
        peaks = []
        for i in range(min(count, torch.cuda.device_count())):
            peaks.append(int(torch.cuda.max_memory_reserved(i)))
            torch.cuda.reset_peak_memory_stats(i)
        return peaks
    except Exception:
        return None


def _driver_use(devices: list[Device]) -> Optional[list[int]]:
    """This process's bytes on each device as NVML or amdsmi count them (``dist.gpu_memory.held``); None where
    neither can tell of any."""
    from pytest_gpuenv.dist.gpu_memory import held

    used = held(devices, os.getpid())
    return [u or 0 for u in used] if any(u is not None for u in used) else None


class UseMeter:
    """The worker's plugin (see the module docstring)."""

    def __init__(self, session: GpuenvSession) -> None:
        self.session = session

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        try:
            return (yield)
        finally:
            self._measure(item)

    def _measure(self, item: pytest.Item) -> None:
        env = self.session.env
        devices = env.usable_devices
        if not devices:
            return
        used = _torch_peaks(len(devices))
        if used is None and not self.session.settings.root:
            used = _driver_use(devices)
        if not used:
            return
        marks = markers.plugin_marks(item)
        if markers.check_marks(marks):
            return
        claim = claim_of(marks, self.session.settings.default_claim)
        ids = [g["id"] for g in gpu_facts(env, self.session.host)]
        figures = {gid: [u, claim.memory] for gid, u in zip(ids, used) if u}
        if figures:
            item.user_properties.append((USE_PROPERTY, figures))
        for gid, (u, c) in figures.items():
            if u > c:
                warnings.warn(ClaimWarning(
                    f"gpuenv: {item.nodeid} used {format_size(u)} of GPU memory on {gid} but claimed {format_size(c)}"
                    f" ({'requires_memory' if claim.declared else '--gpuenv-default-claim'}); declare what it uses "
                    "with @requires_memory(...), or other tests may run out of memory beside it"))
