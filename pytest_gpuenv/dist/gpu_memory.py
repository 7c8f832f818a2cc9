"""``--dist gpu``: the GPU memory processes hold, as the drivers count it: NVML on NVIDIA, amdsmi on AMD.

``held(devices)``: per device, what other processes hold now: NVML's memory in use on the GPU
(``runtime.nvml.memory_used``), amdsmi's VRAM of the processes on it other than this one, its ancestors and its
siblings, the xdist workers of this run (``runtime.amdsmi.vram_held``). ``held(devices, pid)``: what process
``pid`` holds: the driver's compute count for it on NVIDIA (its context included), its ``vram_mem`` on AMD.
None for a device neither can tell of (no NVIDIA UUID; amdsmi not installed, failing or not finding the device
by PCI bus id or UUID; the call failing): the callers count 0 other processes there, or keep torch's peak.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.base.model import Device


def held(devices: list[Device], pid: Optional[int] = None) -> list[Optional[int]]:
    """Bytes per device, in the order given (see the module docstring)."""
    out: list[Optional[int]] = [None] * len(devices)
    nvidia = [i for i, d in enumerate(devices) if d.vendor == "nvidia" and d.uuid]
    amd = [i for i, d in enumerate(devices) if d.vendor == "amd" and (d.unique_uuid or d.pci)]
    if nvidia:
        from pytest_gpuenv.runtime import nvml

        used = nvml.memory_used([devices[i].uuid or "" for i in nvidia], pid)
        for i in nvidia:
            out[i] = used.get(devices[i].uuid or "")
    if amd:
        from pytest_gpuenv.runtime import amdsmi

        for i, vram in zip(amd, amdsmi.vram_held([(devices[i].unique_uuid, devices[i].pci) for i in amd], pid)):
            out[i] = vram
    return out
