"""Clocks and foreign processes through NVML (ctypes on libnvidia-ml; no package needed).

Read only: nothing here changes clocks. ``Monitor`` answers ``None``/``[]`` wherever NVML is missing
(AMD, containers without the library), so a measurement then simply records no clocks.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Optional

NVML_CLOCK_SM = 1
NVML_SUCCESS = 0
NVML_ERROR_INSUFFICIENT_SIZE = 7

_lib: Any = None
_tried = False


class _ProcInfo(ctypes.Structure):  # nvmlProcessInfo_v2/v3 layout (the _v3 entry point)
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


def _load() -> Any:
    global _lib, _tried
    if _tried:
        return _lib
    _tried = True
    for name in ("libnvidia-ml.so.1", "libnvidia-ml.so", "nvml.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            if lib.nvmlInit_v2() == NVML_SUCCESS:
                _lib = lib
                break
        except AttributeError:
            continue
    return _lib


def driver_version() -> Optional[str]:
    lib = _load()
    if lib is None:
        return None
    buf = ctypes.create_string_buffer(96)
    if lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(96)) != NVML_SUCCESS:
        return None
    return buf.value.decode(errors="replace")


def _process_name(pid: int) -> Optional[str]:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def _ppid(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def related_pids() -> set[int]:
    """This process, its ancestors, and its siblings' process group: xdist workers of one run share a
    parent, queue on the same GPU lock, and are not "another process" for the purpose of a verdict."""
    me = os.getpid()
    out = {me}
    p: Optional[int] = me
    for _ in range(8):
        p = _ppid(p) if p else None
        if not p or p <= 1:
            break
        out.add(p)
    return out


class Monitor:
    """NVML view of one device, found by UUID (preferred) or PCI bus id."""

    def __init__(self, uuid: Optional[str] = None, pci_bus_id: Optional[str] = None, lib: Any = None) -> None:
        self.lib = lib if lib is not None else _load()
        self.handle: Any = None
        self.max_mhz: Optional[float] = None
        if self.lib is None:
            return
        h = ctypes.c_void_p()
        ok = False
        if uuid:
            u = uuid if uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid
            ok = self.lib.nvmlDeviceGetHandleByUUID(u.encode(), ctypes.byref(h)) == NVML_SUCCESS
        if not ok and pci_bus_id:
            ok = self.lib.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(h)) == NVML_SUCCESS
        if not ok:
            return
        self.handle = h
        v = ctypes.c_uint()
        if self.lib.nvmlDeviceGetMaxClockInfo(h, NVML_CLOCK_SM, ctypes.byref(v)) == NVML_SUCCESS:
            self.max_mhz = float(v.value)

    @property
    def available(self) -> bool:
        return self.handle is not None

    def sm_mhz(self) -> Optional[float]:
        if self.handle is None:
            return None
        v = ctypes.c_uint()
        if self.lib.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM, ctypes.byref(v)) != NVML_SUCCESS:
            return None
        return float(v.value)

    def event_reasons(self) -> Optional[int]:
        if self.handle is None:
            return None
        v = ctypes.c_ulonglong()
        fn = getattr(self.lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            self.lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        if fn is None or fn(self.handle, ctypes.byref(v)) != NVML_SUCCESS:
            return None
        return int(v.value)

    def processes(self) -> Optional[list[int]]:
        """PIDs of compute processes on the device, or None when NVML cannot say."""
        if self.handle is None:
            return None
        fn = getattr(self.lib, "nvmlDeviceGetComputeRunningProcesses_v3", None)
        if fn is None:
            return None
        count = ctypes.c_uint(0)
        rc = fn(self.handle, ctypes.byref(count), None)
        if rc == NVML_SUCCESS:
            return []
        if rc != NVML_ERROR_INSUFFICIENT_SIZE:
            return None
        n = count.value + 4
        buf = (_ProcInfo * n)()
        count = ctypes.c_uint(n)
        if fn(self.handle, ctypes.byref(count), buf) != NVML_SUCCESS:
            return None
        return [int(buf[i].pid) for i in range(count.value)]

    def foreign_processes(self) -> list[dict[str, Any]]:
        pids = self.processes()
        if not pids:
            return []
        return foreign_of(pids, related_pids(), os.getpid(), _process_name, _ppid)


def foreign_of(pids: list[int], related: set[int], me: int, name_of: Any, ppid_of: Any) -> list[dict[str, Any]]:
    """Which of NVML's PIDs are another workload. Pure, for the tests.

    Not foreign: this process, its ancestors, and siblings (same parent: xdist workers). When this
    process is not in the list although the list is not empty, NVML reports PIDs of another PID
    namespace (a container): then one entry is taken to be this process and only the rest count.
    """
    parent = ppid_of(me)
    out = []
    for pid in pids:
        if pid in related:
            continue
        if parent and ppid_of(pid) == parent:
            continue
        out.append({"pid": pid, "name": name_of(pid)})
    if me not in pids and out and len(out) == len(pids):
        out = out[1:]
    return out


def snapshot(monitor: Optional[Monitor]) -> dict[str, Any]:
    """Clock facts for a record (plain JSON)."""
    if monitor is None or not monitor.available:
        return {"source": None}
    return {"source": "nvml", "sm_mhz": monitor.sm_mhz(), "max_sm_mhz": monitor.max_mhz,
            "event_reasons": monitor.event_reasons()}
