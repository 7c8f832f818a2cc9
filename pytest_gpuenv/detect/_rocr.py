"""GPUs ROCr itself drops or fails on, after libhsakmt accepted them (ROCR-Runtime ``GpuAgent``/``DiscoverGpu``).

* ``GpuAgent::GpuAgent`` (``core/runtime/amd_gpu_agent.cpp``) looks the node's ISA up in ROCr's registry
  (``core/runtime/isa.cpp`` ``IsaRegistry::GetSupportedIsas``) by the version KFD reports, or by the
  ``HSA_OVERRIDE_GFX_VERSION`` libhsakmt put in ``OverrideEngineId``; a version missing from the registry
  throws ``HSA_STATUS_ERROR_INVALID_ISA``, which ``DiscoverGpu`` (``amd_topology.cpp``) swallows: the GPU is
  silently left out. ``BuildTopology`` ranks the ``ROCR_VISIBLE_DEVICES`` entries over every GPU node
  first, so a dropped GPU keeps its ROCr rank and shifts HIP's ordinals of the ones after it.
* From ROCm 7.0 the same constructor throws ``HSA_STATUS_ERROR`` for a node whose doorbell type (KFD
  ``capability`` bits 12-13) is not 2; ``DiscoverGpu`` rethrows it and ``hsa_init`` fails: no GPU at all
  (every GPU node is surfaced, the ones ``ROCR_VISIBLE_DEVICES`` hides included).

The registry per ROCm release was read from ROCm/ROCR-Runtime tags rocm-5.2.0 ... rocm-6.2.4
(``src/core/runtime/isa.cpp``) and ROCm/rocm-systems branch release/rocm-rel-7.0 (64cf36d,
``projects/rocr-runtime/runtime/hsa-runtime/core/runtime/isa.cpp`` lines 338-441). Releases between two
read ones are inferred only where both agree; otherwise nothing is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Optional

from pytest_gpuenv.base.model import Device, Problem
from pytest_gpuenv.detect.fs import Fs

_GFX7_10 = ("gfx700 gfx701 gfx702 gfx801 gfx802 gfx803 gfx805 gfx810 gfx900 gfx902 gfx904 gfx906 gfx908 gfx909 "
            "gfx90a gfx90c gfx1010 gfx1011 gfx1012 gfx1013 gfx1030 gfx1031 gfx1032 gfx1033 gfx1034 gfx1035")
_GFX11 = "gfx1036 gfx1100 gfx1101 gfx1102 gfx1103"
#: the base names (no :sramecc/:xnack) of ROCr's ISA registry, by the ROCm release they were read at
REGISTRY: dict[tuple[int, int], frozenset[str]] = {
    (5, 2): frozenset(_GFX7_10.split()),
    (5, 5): frozenset(f"{_GFX7_10} {_GFX11}".split()),
    (5, 6): frozenset(f"{_GFX7_10} {_GFX11}".split()),
    (5, 7): frozenset(f"{_GFX7_10} {_GFX11} gfx940 gfx941 gfx942".split()),
    (6, 0): frozenset(f"{_GFX7_10} {_GFX11} gfx940 gfx941 gfx942".split()),
    (6, 1): frozenset(f"{_GFX7_10} {_GFX11} gfx940 gfx941 gfx942 gfx1150 gfx1151".split()),
    (6, 2): frozenset(f"{_GFX7_10} {_GFX11} gfx940 gfx941 gfx942 gfx1150 gfx1151 gfx1200 gfx1201".split()),
    (7, 0): frozenset(f"{_GFX7_10} {_GFX11} gfx942 gfx950 gfx1150 gfx1151 gfx1152 gfx1153 gfx1200 gfx1201".split()),
}
#: ISAs ROCr removed, and the first release without them (rocm-systems 13c591d, 2025-02-19, "rocr: Remove
#: gfx940 and gfx941 support"; absent on release/rocm-rel-7.0, present on every 6.x tag read)
REMOVED = {"gfx940": (7, 0), "gfx941": (7, 0)}
#: first ROCm release whose ROCr refuses a doorbell type other than 2 (rocm-systems 0d70045, 2025-05-28,
#: "rocr: Remove deprecated doorbell type 1 support"; amd_gpu_agent.cpp lines 125-126 on release/rocm-rel-7.0)
DOORBELL_FROM = (7, 0)
#: first ROCm release whose libhsakmt puts the override in ``OverrideEngineId`` (ROCR-Runtime c7785a6,
#: libhsakmt/src/topology.c lines 1218-1232, which ROCr reads only when non-zero); ROCT-Thunk-Interface up to
#: rocm-6.2.4 (src/topology.c lines 1211-1224 at rocm-6.1.0) wrote it into ``EngineId`` itself
OVERRIDE_ENGINE_ID_FROM = (6, 3)
_DOORBELL_SHIFT, _DOORBELL_MASK = 12, 0x3  # HSA_CAPABILITY.ui32.DoorbellType (libhsakmt hsakmttypes.h)


def _release(version: Any) -> Optional[tuple[int, int]]:
    m = re.match(r"(\d+)\.(\d+)", str(version or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def registry_lacks(version: Any, isa: Optional[str]) -> Optional[str]:
    """Where the sources say ROCr of ROCm ``version`` has no ``isa`` in its registry: the reason; else None
    (also where the release was not read and the releases around it disagree)."""
    rel = _release(version)
    if rel is None or not isa:
        return None
    if isa in REMOVED and rel >= REMOVED[isa]:
        return (f"ROCr of ROCm {version} has no {isa} in its ISA registry (removed in ROCm "
                f"{'.'.join(map(str, REMOVED[isa]))})")
    read = sorted(REGISTRY)
    if rel in REGISTRY:
        lacks = isa not in REGISTRY[rel]
    else:
        # a release between two read ones lacks the ISA if the next read release (without a removal since)
        # lacks it too; before the first read release nothing is known
        later = [r for r in read if r > rel]
        lacks = bool(later) and rel > read[0] and isa not in REGISTRY[later[0]] and isa not in REMOVED
    return f"ROCr of ROCm {version} has no {isa} in its ISA registry" if lacks else None


def doorbell_type(fs: Fs, topo: str, node: Optional[int]) -> Optional[int]:
    text = fs.read(f"{topo}/nodes/{node}/properties") or ""
    m = re.search(r"^capability\s+(\d{1,20})\s*$", text, re.M)
    return None if m is None else (int(m.group(1)) >> _DOORBELL_SHIFT) & _DOORBELL_MASK


def agent_check(fs: Fs, topo: str, devices: list[Device], version: Any, ev: list[str],
                zero: Sequence[Device] = ()) -> tuple[dict[int, str], list[Problem]]:
    """(physical index -> why ROCr drops that GPU, problems). Call it with the devices libhsakmt kept,
    after ``apply_override``; ``zero``: those it overrode to 0.0.0."""
    rel = _release(version)
    if rel is not None and rel >= DOORBELL_FROM:
        old = [(d, t) for d in devices if (t := doorbell_type(fs, topo, d.node)) is not None and t != 2]
        if old:
            return {}, [_doorbell_problem(devices, old, version, ev)]
    dropped: dict[int, str] = {}
    for d in devices:
        why = registry_lacks(version, d.arch)
        if d in zero and rel is not None and rel < OVERRIDE_ENGINE_ID_FROM:
            why = (f"libhsakmt of ROCm {version} writes HSA_OVERRIDE_GFX_VERSION=0.0.0 into EngineId, and ROCr's ISA "
                   "registry has no 0.0.0")
        if why is None or d.physical_index is None:
            continue
        how = ("HSA_OVERRIDE_GFX_VERSION makes it 0.0.0" if d in zero else
               f"HSA_OVERRIDE_GFX_VERSION makes it {d.arch}" if d.arch != d.physical_arch else d.arch or "")
        dropped[d.physical_index] = f"{why}: it drops this GPU ({how}; HSA_STATUS_ERROR_INVALID_ISA)"
        d.usable, d.unusable_reason = False, dropped[d.physical_index]
        ev.append(f"KFD node {d.node} ({d.physical_arch}, runs as {d.arch}): {dropped[d.physical_index]}")
    if not dropped:
        return dropped, []
    left = len(devices) - len(dropped)
    gpus = ", ".join(f"{d.physical_index} ({d.arch})" for d in devices if d.physical_index in dropped)
    overridden = any(d.arch != d.physical_arch or d in zero for d in devices if d.physical_index in dropped)
    fix = ("unset HSA_OVERRIDE_GFX_VERSION or override to an ISA this ROCm knows (e.g. 9.4.2)" if overridden
           else "use a ROCm release that supports this GPU")
    return dropped, [Problem(
        "rocr-isa-unsupported",
        f"ROCr of ROCm {version} drops GPU(s) {gpus}: their ISA is not in its registry (isa.cpp); "
        + (f"HIP numbers the {left} GPU(s) left from 0, so indices after a dropped GPU shift" if left
           else "no AMD GPU is left"),
        fix=fix, severity="warning" if left else "error", category="arch")]


def _doorbell_problem(devices: list[Device], old: list[tuple[Device, int]], version: Any, ev: list[str]) -> Problem:
    nodes = ", ".join(f"{d.node} ({d.physical_arch}, doorbell type {t})" for d, t in old)
    why = f"ROCm {version}'s ROCr fails hsa_init on KFD node(s) {nodes}: deprecated doorbell type"
    ev.append(why)
    for d in devices:
        d.usable, d.unusable_reason = False, why
    return Problem(
        "rocr-doorbell-unsupported",
        f"{why} (amd_gpu_agent.cpp: DoorbellType != 2 throws HSA_STATUS_ERROR), so ROCm sees none of the "
        f"{len(devices)} AMD GPU(s), even with ROCR_VISIBLE_DEVICES hiding the old one",
        fix="remove the pre-Vega GPU or use ROCm < 7.0", severity="error", category="driver")
