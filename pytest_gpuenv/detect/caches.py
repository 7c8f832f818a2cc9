"""The largest cache a cold timer must flush, per GPU: on AMD the Infinity Cache (MALL, "L3") where present,
else L2; on NVIDIA the L2 (``NVIDIA_LAST_LEVEL``).

From ROCm's "GPU hardware specifications" table (rocm.docs.amd.com, reference/gpu-arch-specs.html; its source
is ``docs/reference/gpu-arch-specs.rst`` in ROCm/ROCm): the "L3 Cache (MiB)" column of the Instinct table and
the "Infinity Cache (MiB)" column of the Radeon PRO, Radeon and Ryzen APU tables, and the "L2 Cache (MiB)"
column where those are empty. Sizes are per device as HIP lists devices: an MI250X is two devices (one per GCD, 8 MiB of
L2 each); an MI300X in SPX mode is one device whose 256 MiB Infinity Cache sits in front of all its memory.

``last_level_cache(vendor, arch, name)``: by marketing name (word-bounded, so "RX 7900 XT" does not match
"RX 7900 XTX"; the longest name that matches, so "RX 9070 GRE" wins over "RX 9070"), else the largest for
the arch (KFD's "RX 6900/6800 XT" names no single row), else None (unknown: an arch missing from the table; the timer also reads the L2 size from the runtime and
flushes the larger). ``fill(devices)`` sets
``Device.last_level_cache_bytes`` after detection.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable, Optional

from pytest_gpuenv.base.model import Device

MiB = 1 << 20

#: (LLVM target, name as in the table, the largest cache in MiB per device: L3/Infinity Cache, else L2)
AMD_LAST_LEVEL = (
    # Instinct: L3 Cache column; gfx90a and older have none, so their L2 (per GCD) is the last level
    ("gfx950", "MI355X", 256),
    ("gfx950", "MI350X", 256),
    ("gfx942", "MI325X", 256),
    ("gfx942", "MI300X", 256),
    ("gfx942", "MI300A", 256),
    ("gfx941", "MI300X", 256),  # ROCm 6.1's table: "gfx941 or gfx942"
    ("gfx940", "MI300A", 256),  # ROCm 6.1's table: "gfx940 or gfx942"
    ("gfx90a", "MI250X", 8),  # "16 (8 per GCD)"
    ("gfx90a", "MI250", 8),  # "16 (8 per GCD)"
    ("gfx90a", "MI210", 8),
    ("gfx908", "MI100", 8),
    ("gfx906", "MI60", 4),
    ("gfx906", "MI50", 4),
    ("gfx900", "MI25", 4),
    ("gfx803", "MI8", 2),
    ("gfx803", "MI6", 2),
    # Radeon PRO: Infinity Cache column (W5500 and VII: none, L2)
    ("gfx1201", "Radeon AI PRO R9700", 64),
    ("gfx1101", "Radeon PRO V710", 56),
    ("gfx1100", "Radeon PRO W7900", 96),
    ("gfx1100", "Radeon PRO W7800 48GB", 96),
    ("gfx1100", "Radeon PRO W7800", 64),
    ("gfx1101", "Radeon PRO W7700", 64),
    ("gfx1030", "Radeon PRO W6800", 128),
    ("gfx1032", "Radeon PRO W6600", 32),
    ("gfx1030", "Radeon PRO V620", 128),
    ("gfx1012", "Radeon Pro W5500", 4),
    ("gfx906", "Radeon Pro VII", 4),
    # Radeon: Infinity Cache column (Radeon VII: none, L2)
    ("gfx1201", "Radeon RX 9070 XT", 64),
    ("gfx1201", "Radeon RX 9070 GRE", 48),
    ("gfx1201", "Radeon RX 9070", 64),
    ("gfx1200", "Radeon RX 9060 XT", 32),
    ("gfx1100", "Radeon RX 7900 XTX", 96),
    ("gfx1100", "Radeon RX 7900 XT", 80),
    ("gfx1100", "Radeon RX 7900 GRE", 64),
    ("gfx1101", "Radeon RX 7800 XT", 64),
    ("gfx1101", "Radeon RX 7700 XT", 48),
    ("gfx1102", "Radeon RX 7600", 32),
    ("gfx1030", "Radeon RX 6950 XT", 128),
    ("gfx1030", "Radeon RX 6900 XT", 128),
    ("gfx1030", "Radeon RX 6800 XT", 128),
    ("gfx1030", "Radeon RX 6800", 128),
    ("gfx1031", "Radeon RX 6750 XT", 96),
    ("gfx1031", "Radeon RX 6700 XT", 96),
    ("gfx1031", "Radeon RX 6700", 80),
    ("gfx1032", "Radeon RX 6650 XT", 32),
    ("gfx1032", "Radeon RX 6600 XT", 32),
    ("gfx1032", "Radeon RX 6600", 32),
    ("gfx906", "Radeon VII", 4),
    # Ryzen APUs (the table's "AMD Ryzen APUs" tab, ROCm/legacy-rocm-build e88a729): Infinity Cache, else L2
    ("gfx1151", "Radeon 8060S", 32),
    ("gfx1150", "Radeon 890M", 2),
    ("gfx1103", "Radeon 780M", 2),
    ("gfx1152", "Radeon 860M", 1),
)

#: NVIDIA: the L2 is the last level. From NVIDIA's architecture whitepapers ("NVIDIA A100 Tensor Core GPU
#: Architecture": 40 MB; "NVIDIA H100 Tensor Core GPU Architecture": 50 MB; "NVIDIA Ada GPU Architecture":
#: RTX 4090 72 MB, the full AD102 of the L40/L40S 96 MB; these MB are MiB, as cudaDevAttrL2CacheSize reads
#: them: 52428800 on an H100) and, for the H200, cudaDevAttrL2CacheSize read on the lent H200 (62914560).
NVIDIA_LAST_LEVEL = (
    ("sm_80", "A100", 40),
    ("sm_90", "H100", 50),
    ("sm_90", "H200", 60),
    ("sm_89", "RTX 4090", 72),
    ("sm_89", "L40S", 96),
    ("sm_89", "L40", 96),
)


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("amd ", " ").split())


def _word(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![0-9a-z])" + re.escape(_norm(name)) + r"(?![0-9a-z])")


@functools.cache
def _by_name(vendor: str) -> list[tuple[int, re.Pattern[str], int]]:
    """The name patterns, compiled on the first lookup (not at import: every detection imports this)."""
    table = AMD_LAST_LEVEL if vendor == "amd" else NVIDIA_LAST_LEVEL
    return [(len(name), _word(name), mib * MiB) for _arch, name, mib in table]


#: the largest per arch: what a device of that arch whose name is not in the table is taken to have
ARCH_MAX: dict[str, int] = {}
for _arch, _name, _mib in AMD_LAST_LEVEL + NVIDIA_LAST_LEVEL:
    ARCH_MAX[_arch] = max(ARCH_MAX.get(_arch, 0), _mib * MiB)


def last_level_cache(vendor: Optional[str], arch: Optional[str], name: Optional[str]) -> Optional[int]:
    """Bytes of the largest cache of an AMD or NVIDIA device (see the module docstring); None when unknown."""
    arch = (arch or "").split(":")[0].lower()
    kind = vendor or ("amd" if arch.startswith("gfx") else "nvidia" if arch.startswith("sm_") else None)
    if kind not in ("amd", "nvidia") or (arch and not arch.startswith("gfx" if kind == "amd" else "sm_")):
        return None
    text = _norm(name or "")
    hits = [(length, size) for length, pattern, size in _by_name(kind) if text and pattern.search(text)]
    if hits:
        return max(hits)[1]
    return ARCH_MAX.get(arch)


def fill(devices: Iterable[Device]) -> None:
    """Set ``last_level_cache_bytes`` where detection left it unknown (by the chip's own arch, before any
    ``HSA_OVERRIDE_GFX_VERSION``: an override changes the code object, not the cache)."""
    for d in devices:
        if d.last_level_cache_bytes is None:
            d.last_level_cache_bytes = last_level_cache(d.vendor, d.physical_arch or d.arch, d.name)
