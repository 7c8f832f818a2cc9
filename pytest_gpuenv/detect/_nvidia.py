"""NVIDIA: /proc/driver/nvidia, device nodes, and the merge of NVML's answer.

NVML (T2, ``pytest_gpuenv.runtime.nvml``, imported when asked) creates no CUDA context; it is asked only
on a real system (never in root mode) and only when the probe mode allows it. Everything else is files
and ``os.access``. (The PCI scan that finds a GPU without its driver is ``_core``'s: vendor-neutral.)
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional

from pytest_gpuenv.base.model import Device, Problem
from pytest_gpuenv.detect._access import owner_and_group
from pytest_gpuenv.detect._ctx import Ctx
from pytest_gpuenv.detect.fs import Fs

_DRIVER_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)")


def driver_version(fs: Fs) -> Optional[str]:
    text = fs.read("/proc/driver/nvidia/version", 4096)
    if text:
        m = _DRIVER_RE.search(text)
        if m:
            return m.group(1)
    text = (fs.read("/sys/module/nvidia/version", 64) or "").strip()
    return text if re.match(r"^\d+(\.\d+)+$", text) else None


def proc_devices(fs: Fs, ev: list[str], problems: list[Problem]) -> list[Device]:
    """One device per /proc/driver/nvidia/gpus/<BDF>/information, in PCI order."""
    devices: list[Device] = []
    bad = []
    for bdf in fs.listdir("/proc/driver/nvidia/gpus"):
        path = f"/proc/driver/nvidia/gpus/{bdf}/information"
        text = fs.read(path, 8192)
        if text is None:
            bad.append(path)
            continue
        info: dict[str, str] = {}
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                info[key.strip()] = value.strip()
        if not info.get("Model") and not info.get("GPU UUID"):
            bad.append(path)
            continue
        if info.get("GPU Excluded", "").lower().startswith("yes"):
            ev.append(f"{path}: GPU Excluded: Yes")
            continue
        minor = info.get("Device Minor", "")
        uuid = info.get("GPU UUID") or None
        if uuid and not re.match(r"^(GPU|MIG)-[0-9A-Fa-f-]+$", uuid):
            uuid = None
        devices.append(
            Device(
                index=len(devices),
                vendor="nvidia",
                name=(info.get("Model") or None) if (info.get("Model") or "").isprintable() else None,
                uuid=uuid,
                pci=_norm_bdf(info.get("Bus Location") or bdf),
                node=int(minor) if minor.isdigit() and minor.isascii() and len(minor) < 6 else None,
                source="/proc/driver/nvidia",
                warp_size=32,
            )
        )
    devices.sort(key=lambda d: d.pci or "")
    for i, d in enumerate(devices):
        d.index = d.physical_index = i
        ev.append(f"/proc/driver/nvidia/gpus/{d.pci}/information: {d.name}, {d.uuid}, minor {d.node}")
    if bad:
        problems.append(
            Problem(
                "sysfs-unreadable",
                f"NVIDIA /proc files could not be parsed: {', '.join(bad[:4])}",
                fix="check `cat /proc/driver/nvidia/gpus/*/information`",
                severity="warning",
                category="sysfs",
            )
        )
    return devices


def _norm_bdf(text: str) -> Optional[str]:
    m = re.search(r"([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", text)
    if not m:
        return None
    return f"{int(m.group(1), 16) & 0xFFFF:04x}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"


def check_nodes(
    fs: Fs, devices: list[Device], container: bool, ev: list[str]
) -> tuple[list[Device], list[Problem]]:
    """/dev/nvidiactl and /dev/nvidia<minor> (stat/os.access only). Returns (devices kept, problems)."""
    if not devices:
        return devices, []
    rw = os.R_OK | os.W_OK
    if not fs.exists("/dev/nvidiactl"):
        for d in devices:
            d.usable, d.unusable_reason = False, "/dev/nvidiactl missing"
        ev.append("/dev/nvidiactl: missing")
        return devices, [
            Problem(
                "nvidia-device-nodes-missing",
                "NVIDIA driver loaded but /dev/nvidia* are missing" + (" in this container" if container else ""),
                fix=(
                    "run the container with the NVIDIA runtime (`docker run --gpus all ...`)"
                    if container
                    else "create the nodes: `sudo nvidia-modprobe -u -c=0` (or load nvidia-uvm)"
                ),
                severity="error",
                category="container" if container else "driver",
            )
        ]
    kept = []
    denied = []
    for d in devices:
        node = f"/dev/nvidia{d.node}" if d.node is not None else None
        if node and not fs.exists(node):
            ev.append(f"{node}: missing (GPU {d.pci} not given to this process/container)")
            continue
        if node and not fs.access(node, rw):
            d.usable, d.unusable_reason = False, f"{node} not accessible"
            denied.append(node)
        kept.append(d)
    if not fs.access("/dev/nvidiactl", rw):
        denied.insert(0, "/dev/nvidiactl")
        for d in kept:
            d.usable, d.unusable_reason = False, "/dev/nvidiactl not accessible"
    for i, d in enumerate(kept):
        d.index = d.physical_index = i
    return kept, [_permission_problem(fs, denied)] if denied else []


def _permission_problem(fs: Fs, denied: list[str]) -> Problem:
    _owner, group = owner_and_group(fs.stat(denied[0]))
    return Problem(
        "nvidia-permission-denied",
        f"{', '.join(denied)} not readable+writable by this user (group '{group}')",
        fix=f"add the user to group '{group}' (`sudo usermod -aG {group} $USER`, then log out and in) "
        "or fix the driver's device-file mode (NVreg_DeviceFileMode)",
        severity="error",
        category="permission",
    )


# ------------------------------------------------------------------------------------------ NVML
def ask_nvml(ctx: Ctx, devices: list[Device], lib: Optional[str]) -> Optional[dict[str, Any]]:
    """T2: NVML's answer merged into ``devices`` (the list is filled when empty); cached like the probe.

    Only on a real system (never in root mode) and not with probe='never'. ``lib``: the library file
    (WSL 2's), default the one pynvml loads. None when NVML is unavailable; ``ctx.nvml_why`` says why.
    """
    if ctx.fs.root_mode or ctx.probe_mode == "never":
        ctx.nvml_why = "root mode loads no library" if ctx.fs.root_mode else "probe 'never' asks no library"
        return None
    from pytest_gpuenv.detect import _probe
    from pytest_gpuenv.runtime import nvml

    key = _probe.cache_key(ctx.fs, ctx.environ, "nvml", ["/proc/driver/nvidia/version"]).replace("probe", "nvml")
    data = _probe.cache_get(ctx.cache, key)
    if data is None:
        data, ctx.nvml_why = nvml.ask(lib)
        if data is None:
            ctx.ev.append(f"NVML: not available: {ctx.nvml_why}")
            return None
        _probe.cache_set(ctx.cache, key, data)
    merge_nvml(devices, data, ctx.ev)
    cuda = ctx.env.cuda
    cuda["driver_version"] = cuda.get("driver_version") or data.get("driver_version")
    cuda["max_cuda"] = data.get("max_cuda")
    return data


def merge_nvml(devices: list[Device], nvml: dict[str, Any], ev: list[str]) -> list[Device]:
    """Fill arch, memory and names from NVML; NVML devices become the list when files had none."""
    from pytest_gpuenv.detect._probe import count

    by_uuid = {d.get("uuid"): d for d in nvml.get("devices", []) if d.get("uuid")}
    if not devices:
        for n in nvml.get("devices", []):
            devices.append(
                Device(index=len(devices), vendor="nvidia", name=n.get("name"), uuid=n.get("uuid"),
                       warp_size=32, source="nvml", physical_index=len(devices))
            )
    for i, d in enumerate(devices):
        n = by_uuid.get(d.uuid) if d.uuid else None
        if n is None and len(devices) == len(nvml.get("devices", [])) and d.source == "nvml":
            n = nvml["devices"][i]
        if n is None:
            continue
        d.arch = d.arch or n.get("arch")
        d.physical_arch = d.physical_arch or n.get("arch")
        d.memory_bytes = d.memory_bytes or count(n.get("memory_bytes"))
        d.name = d.name or n.get("name")
        ev.append(f"NVML device {n.get('nvml_index')}: {n.get('name')}, {n.get('arch')}, {n.get('memory_bytes')} B")
    return devices
