"""AMD: the amdgpu driver, KFD topology and rocBLAS targets (DETECTION.md steps 3-4; /dev access in ``_access``).

Only T0/T1: files, ``stat`` and ``os.access``. ``/dev/kfd`` is never opened and KFD ``caches/*``
are never read.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from pytest_gpuenv.base.model import NO_UNIQUE_UUID, Device, Problem, default_warp_size, gfx_name
from pytest_gpuenv.detect.fs import Fs

#: DRM_FIRST_RENDER_NODE..DRM_LAST_RENDER_NODE (libhsakmt fmm.c): other minors fail the topology (``_access``)
_RENDER_MINORS = (128, 255)

KFD_TOPOLOGY = ("/sys/class/kfd/kfd/topology", "/sys/devices/virtual/kfd/kfd/topology")
#: one ``%u`` of libhsakmt's ``sscanf("%u.%u.%u%c")``: C-locale space, a sign, ASCII digits
_SCANF_U = r"[ \t\n\v\f\r]*([+-]?)([0-9]+)"
_OVERRIDE_RE = r"\.".join([_SCANF_U] * 3)  # compiled by re on first use
_OVERRIDE_MAX = (63, 255, 255)  # libhsakmt rejects larger parts
_U64 = 2**64  # KFD properties are printed as u64 (libhsakmt reads them with %llu)

#: what official ROCm library and PyTorch builds target when no rocBLAS file list can be read
#: (PYTORCH_ROCM_ARCH of the ROCm 6.x wheels plus the current Instinct and RDNA 3.5/4 parts)
OFFICIAL_ARCHS = frozenset(
    ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950", "gfx1030", "gfx1100",
     "gfx1101", "gfx1102", "gfx1150", "gfx1151", "gfx1200", "gfx1201"]
)

#: a few PCI device ids, for readable names (the KFD ``name`` file says "ip discovery")
_NAMES = {
    0x74A1: "AMD Instinct MI300X",
    0x74A5: "AMD Instinct MI325X",
    0x74A0: "AMD Instinct MI300A",
    0x740F: "AMD Instinct MI210",
    0x740C: "AMD Instinct MI250X/MI250",
    0x738C: "AMD Instinct MI100",
    0x744C: "AMD Radeon RX 7900 XTX/XT",
    0x7448: "AMD Radeon PRO W7900",
    0x73BF: "AMD Radeon RX 6900/6800 XT",
    0x73DF: "AMD Radeon RX 6700 XT",
    0x73FF: "AMD Radeon RX 6600",
    0x7550: "AMD Radeon RX 9070 XT",
}


def supported_archs(fs: Fs, lib_dirs: list[str], ev: list[str]) -> tuple[frozenset[str], str]:
    """gfx targets of the installed rocBLAS (TensileLibrary_lazy_<gfx>.dat), else the official list."""
    for libdir in lib_dirs:
        d = libdir + "/rocblas/library"
        names = fs.listdir(d)
        found = set()
        for n in names:
            m = re.match(r"^TensileLibrary_lazy_(gfx[0-9a-f]+)\.dat$", n)
            if m:
                found.add(m.group(1))
        if found:
            ev.append(f"{d}: rocBLAS targets {' '.join(sorted(found))}")
            return frozenset(found), d
    return OFFICIAL_ARCHS, "the targets of official ROCm/PyTorch builds"


# ---------------------------------------------------------------------------------- driver/KFD
def amdgpu_module(fs: Fs) -> dict[str, Any]:
    loaded = fs.isdir("/sys/module/amdgpu")
    state = (fs.read("/sys/module/amdgpu/initstate", 64) or "").strip() or None
    version = (fs.read("/sys/module/amdgpu/version", 64) or "").strip() or None
    if version and not re.match(r"^[\w.+-]{1,40}$", version):
        version = None
    return {"loaded": loaded, "initstate": state, "version": version}


def number(text: str, limit: int = _U64) -> Optional[int]:
    """An ASCII decimal below ``limit`` (leading zeros allowed), else None; never parses a huge string."""
    digits = text.lstrip("0") or "0"
    if not (text.isdigit() and text.isascii()) or len(digits) > len(str(limit)):
        return None
    value = int(digits)
    return value if value < limit else None


def _props(text: Optional[str]) -> Optional[dict[str, int]]:
    """``"<key> <decimal>"`` lines; lines without a decimal are skipped; None if a decimal is not a u64."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit() and parts[1].isascii():
            value = number(parts[1])
            if value is None:
                return None
            out.setdefault(parts[0], value)
    return out


def topology_dir(fs: Fs) -> Optional[str]:
    for d in KFD_TOPOLOGY:
        if fs.isdir(d + "/nodes"):
            return d
    return None


def kfd_devices(fs: Fs, topo: str, ev: list[str], problems: list[Problem]) -> list[Device]:
    """GPU nodes libhsakmt would accept (before /dev checks), in HIP ordinal order."""
    nodes = sorted((n for n in fs.listdir(topo + "/nodes") if number(n, 2**31) is not None), key=int)
    devices: list[Device] = []
    bad: list[str] = []
    fatal: list[str] = []  # what fails libhsakmt's whole topology
    for n in nodes:
        props = _gpu_node(fs, f"{topo}/nodes/{n}", n, ev, bad, fatal)
        dev = None if props is None else _kfd_device(fs, f"{topo}/nodes/{n}", int(n), props, len(devices), ev, bad)
        if dev is not None:
            devices.append(dev)
    if fatal:
        problems.append(_topology_problem(devices, fatal, ev))
    if bad:
        problems.append(
            Problem(
                "sysfs-unreadable",
                f"KFD topology files could not be parsed: {', '.join(bad[:4])}"
                + (f" (+{len(bad) - 4} more)" if len(bad) > 4 else "")
                + "; those nodes were skipped",
                fix="check `cat` of these files; a damaged or foreign /sys (e.g. a copied tree) gives this",
                severity="warning",
                category="sysfs",
            )
        )
    return devices


def _gpu_node(fs: Fs, base: str, n: str, ev: list[str], bad: list[str], fatal: list[str]) -> Optional[dict[str, int]]:
    """A GPU node's properties; None for a CPU node, one hidden by the device cgroup, junk (added to ``bad``),
    or what fails libhsakmt's whole topology (added to ``fatal``): ``topology_sysfs_get_gpu_id`` fails
    without EPERM when ``gpu_id`` is missing or ``fscanf("%ul")`` matches nothing, and
    ``topology_sysfs_check_node_supported`` when a GPU node's ``properties`` is missing or empty."""
    gid_text = fs.read(base + "/gpu_id", 64)
    if gid_text is None and base + "/gpu_id" in fs.denied:
        ev.append(f"{base}/gpu_id: EPERM (node {n} hidden by the device cgroup)")
        return None
    if gid_text is None and not fs.exists(base + "/gpu_id"):
        fatal.append(f"{base}/gpu_id is missing")
        return None
    m = re.match(_SCANF_U, gid_text or "")
    if gid_text is not None and m is None:
        fatal.append(f"{base}/gpu_id holds no number ({gid_text.strip()[:20]!r})")
        return None
    gid = None if m is None or len(m.group(2).lstrip("0")) > 20 else _scanf_u(*m.groups())
    if gid is None:
        bad.append(f"{base}/gpu_id")
        return None
    if gid == 0:
        return None  # CPU node
    ptext = fs.read(base + "/properties")
    if ptext is None and base + "/properties" in fs.denied:
        ev.append(f"{base}/properties: EPERM (node {n} hidden by the device cgroup)")
        return None
    if ptext == "" or (ptext is None and not fs.exists(base + "/properties")):
        fatal.append(f"GPU node {base} has {'an empty' if ptext == '' else 'no'} properties file")
        return None
    props = _props(ptext)
    if not props:
        bad.append(f"{base}/properties")
        return None
    return props if props.get("simd_count", 0) > 0 else None


def _topology_problem(devices: list[Device], fatal: list[str], ev: list[str]) -> Problem:
    why = "; ".join(fatal[:3]) + (f" (+{len(fatal) - 3} more)" if len(fatal) > 3 else "")
    ev.append(f"libhsakmt topology fails: {why}")
    for d in devices:
        d.usable, d.unusable_reason = False, f"ROCm sees no GPU: {why}"
    return Problem(
        "kfd-topology-invalid",
        f"{why}: libhsakmt's hsakmt_topology_sysfs_get_system_props fails on it, so ROCm (hsa_init) sees none of "
        f"the {len(devices)} AMD GPU(s)",
        fix="check `ls /sys/class/kfd/kfd/topology/nodes/*` and `dmesg | grep kfd`; a damaged or partly copied "
        "topology gives this", severity="error", category="driver")


def _kfd_device(fs: Fs, base: str, node: int, props: dict[str, int], index: int, ev: list[str],
                bad: list[str]) -> Optional[Device]:
    """The device of a GPU node; None (the file named in ``bad``) when its memory banks hold junk."""
    gfx = props.get("gfx_target_version", 0)
    arch = gfx_name(gfx) if 0 < gfx < 10**8 else None
    wave = props.get("wave_front_size") or default_warp_size(arch)
    if wave not in (16, 32, 64, 128):
        wave = default_warp_size(arch)
    loc, dom = props.get("location_id", 0), props.get("domain", 0)
    pci = None  # location_id: bus 15:8, device 7:3, function 2:0, the partition in 31:28 (amdsmi.h) or in 2:0
    if loc & 0xFFFF > 0 and loc < 2**32 and dom < 2**32:
        pci = f"{dom:04x}:{(loc >> 8) & 0xFF:02x}:{(loc & 0xFF) >> 3:02x}.{loc & 7:x}"
    uid = props.get("unique_id")
    uuid = None if uid is None else (NO_UNIQUE_UUID if uid == 0 or uid >= 2**64 else f"GPU-{uid:016x}")
    minor = props.get("drm_render_minor", 0)
    render = f"/dev/dri/renderD{minor}" if _RENDER_MINORS[0] <= minor <= _RENDER_MINORS[1] else None
    vram = 0
    for bank in fs.listdir(base + "/mem_banks"):
        bp = _props(fs.read(f"{base}/mem_banks/{bank}/properties", 4096))
        if bp is None:
            bad.append(f"{base}/mem_banks/{bank}/properties")
            return None
        if bp.get("heap_type") in (1, 2):
            vram += bp.get("size_in_bytes", 0)
    if vram >= _U64:
        bad.append(f"{base}/mem_banks")
        return None
    name_file = (fs.read(base + "/name", 256) or "").strip()
    name = _NAMES.get(props.get("device_id", -1))
    if name is None:
        label = name_file if name_file and name_file != "ip discovery" and name_file.isprintable() else None
        name = f"AMD GPU {arch or ''}".strip() + (f" ({label})" if label else "")
    ev.append(
        f"{base}/properties: gfx_target_version {gfx} -> {arch}, wave {wave}, "
        f"VRAM {vram} B, PCI {pci}, render {render}" + (f", partition {loc >> 28}" if loc >> 28 else "")
    )
    return Device(index=index, vendor="amd", name=name, arch=arch, physical_arch=arch, memory_bytes=vram or None,
                  warp_size=wave, uuid=uuid, pci=pci, node=node, render_node=render, source="/sys/class/kfd",
                  physical_index=index)


def _scanf_u(sign: str, digits: str) -> int:
    """glibc's ``%u``: ``strtoul`` (clamped to ULONG_MAX, a ``-`` negates modulo 2**64), cast to 32 bits."""
    value = min(int(digits), _U64 - 1) if len(digits.lstrip("0")) <= 20 else _U64 - 1
    if sign == "-" and value != _U64 - 1:
        value = -value % _U64
    return value & 0xFFFFFFFF


def parse_override(value: str) -> Optional[tuple[int, int, int]]:
    """(major, minor, stepping) of an HSA_OVERRIDE_GFX_VERSION value, or None where libhsakmt rejects it.

    libhsakmt ``topology.c`` (``topology_sysfs_get_node_props``): ``sscanf(v, "%u.%u.%u%c", ...)`` must
    return exactly 3 (nothing may follow the stepping, not even a space; space and a sign may precede
    each number) and major <= 63, minor and stepping <= 255.
    """
    m = re.fullmatch(_OVERRIDE_RE, value)
    if not m:
        return None
    g = m.groups()
    parts = tuple(_scanf_u(g[i], g[i + 1]) for i in (0, 2, 4))
    if any(p > top for p, top in zip(parts, _OVERRIDE_MAX)):
        return None
    return parts[0], parts[1], parts[2]


def user_node_ids(fs: Fs, topo: str, devices: list[Device]) -> dict[int, int]:
    """libhsakmt's node id of each device's KFD node: its rank among the nodes libhsakmt keeps (CPU nodes,
    and GPU nodes whose render node opens), as ``map_user_to_sysfs_node_id`` in ``topology.c`` numbers them."""
    kept = {d.node for d in devices}
    out: dict[int, int] = {}
    rank = 0
    for n in sorted(int(n) for n in fs.listdir(topo + "/nodes") if number(n, 2**31) is not None):
        if n in kept:
            out[n] = rank
        elif number((fs.read(f"{topo}/nodes/{n}/gpu_id", 64) or "").strip()) != 0:
            continue  # a GPU node libhsakmt skipped (device cgroup) or one it never reads
        rank += 1
    return out


def apply_override(fs: Fs, topo: str, devices: list[Device], environ: Any, ev: list[str],
                   zero: Optional[list[Device]] = None) -> list[Problem]:
    """HSA_OVERRIDE_GFX_VERSION_<node>, else HSA_OVERRIDE_GFX_VERSION -> each device's effective arch.

    As libhsakmt's ``topology_sysfs_get_node_props``: ``<node>`` is libhsakmt's node id (after the nodes
    it skipped, see ``user_node_ids``), not the KFD sysfs number; the per-node variable, when set, is read
    instead of the global one; a value ``parse_override`` rejects fails the whole topology (no GPU at all).
    Call it with the devices ``check_access`` kept. ``zero`` collects the devices overridden to 0.0.0, which
    ROCr ignores from ROCm 6.3 (``OverrideEngineId.Value != 0``) and older libhsakmt wrote into ``EngineId``.
    """
    ids = user_node_ids(fs, topo, devices)
    chosen = []
    for d in devices:
        node = ids.get(d.node or 0, d.node)
        name = next((n for n in (f"HSA_OVERRIDE_GFX_VERSION_{node}", "HSA_OVERRIDE_GFX_VERSION") if n in environ), "")
        if name:
            chosen.append((d, name, str(environ[name]), node, parse_override(str(environ[name]))))
    bad = next(((name, value) for _d, name, value, _n, parsed in chosen if parsed is None), None)
    if bad is not None:
        return [_override_problem(devices, *bad)]
    for d, name, value, node, parsed in chosen:
        major, minor, step = parsed or (0, 0, 0)
        if parsed == (0, 0, 0) and zero is not None:
            zero.append(d)
        eff = gfx_name(major * 10000 + minor * 100 + step)
        if eff and eff != d.arch:
            ev.append(f"{name}={value}: device {d.physical_index} (KFD node {d.node}, libhsakmt node {node}) "
                      f"{d.physical_arch} runs as {eff}")
            d.arch = eff
    return []


def _override_problem(devices: list[Device], name: str, value: str) -> Problem:
    shown = value if len(value) <= 64 else value[:60] + "..."
    for d in devices:
        d.usable, d.unusable_reason = False, f"{name}='{shown}' is invalid"
    return Problem(
        "hsa-override-invalid",
        f"{name}='{shown}' is invalid (expected major.minor.stepping in ASCII decimal digits, major <= 63, "
        "minor and stepping <= 255); libhsakmt's topology init fails, so no AMD GPU can be used.",
        fix=f"unset {name}, or set it like `{name}=10.3.0` (RDNA2) or `11.0.0` (RDNA3)", severity="error",
        category="arch")
