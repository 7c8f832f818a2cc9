"""Device facts a measurement needs: identity, cache sizes (flush size), peak bandwidth table."""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass
from typing import Any, Optional

MiB = 1 << 20

#: Peak DRAM bandwidth in bytes/s by device name (vendor datasheets; see PERF.md §10).
PEAK_BANDWIDTH = {
    "NVIDIA H200": 4.8e12,
    "NVIDIA H200 NVL": 4.8e12,
    "NVIDIA H100 80GB HBM3": 3.35e12,  # SXM
    "NVIDIA H100 SXM": 3.35e12,
    "NVIDIA H100 PCIe": 2.0e12,
    "NVIDIA H100 NVL": 3.9e12,
    "NVIDIA A100-SXM4-80GB": 2.039e12,
    "NVIDIA A100-SXM4-40GB": 1.555e12,
    "NVIDIA A100 80GB PCIe": 1.935e12,
    "NVIDIA A100-PCIE-40GB": 1.555e12,
    "NVIDIA L40S": 0.864e12,
    "NVIDIA GeForce RTX 4090": 1.008e12,
    "AMD Instinct MI300X": 5.3e12,
    "AMD Instinct MI325X": 6.0e12,
    "AMD Instinct MI300A": 5.3e12,
    "AMD Instinct MI250X": 3.2768e12,
    "AMD Instinct MI210": 1.6384e12,
}

#: Last-level caches beyond L2 that a flush must also cover (arch glob -> bytes).
LAST_LEVEL_CACHE = {
    "gfx94*": 256 * MiB,  # MI300X/MI300A/MI325X Infinity Cache (MALL)
    "gfx95*": 256 * MiB,  # MI350-class
}


def peak_bandwidth(name: Optional[str]) -> Optional[float]:
    if not name:
        return None
    if name in PEAK_BANDWIDTH:
        return PEAK_BANDWIDTH[name]
    # longest table name contained in the device name ("NVIDIA H100 80GB HBM3" vs "NVIDIA H100")
    hits = [k for k in PEAK_BANDWIDTH if k.lower() in name.lower()]
    return PEAK_BANDWIDTH[max(hits, key=len)] if hits else None


def flush_bytes(l2_bytes: Optional[int], arch: Optional[str]) -> int:
    """At least twice the largest cache a kernel's data could be left in (L2, or Infinity Cache).

    Unknown L2: 256 MiB, Triton's choice. Rounded up to a whole MiB.
    """
    largest = int(l2_bytes or 0)
    for pattern, size in LAST_LEVEL_CACHE.items():
        if arch and fnmatch.fnmatch(arch.split(":")[0], pattern):
            largest = max(largest, size)
    nbytes = 2 * largest if largest else 256 * MiB
    return -(-nbytes // MiB) * MiB


@dataclass
class DeviceInfo:
    """What a backend knows about the device it times on (plain data, goes into records)."""

    name: str
    vendor: str  # "nvidia" | "amd" | "fake"
    arch: Optional[str] = None
    index: int = 0
    uuid: Optional[str] = None
    pci_bus_id: Optional[str] = None
    l2_bytes: Optional[int] = None
    flush_bytes: int = 256 * MiB
    #: runtime the timer uses, e.g. "torch 2.11.0+cu130 (cuda 13.0)" or "cuda driver 13.0"
    runtime: Optional[str] = None
    driver: Optional[str] = None
    timer: str = "?"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def lock_key(self) -> str:
        return self.uuid or self.pci_bus_id or f"{self.vendor}-{self.name}-{self.index}"

    @property
    def key(self) -> str:
        """Baseline key: device name, arch, driver and runtime versions."""
        return " | ".join(
            [self.name, self.arch or "arch?", f"driver {self.driver or '?'}", self.runtime or "runtime?"]
        )


def format_uuid(raw: Any) -> Optional[str]:
    """``GPU-xxxxxxxx-xxxx-...`` from 16 bytes, a uuid.UUID, or a string."""
    if raw is None:
        return None
    if isinstance(raw, (bytes, bytearray)):
        h = bytes(raw[:16]).hex()
    else:
        h = str(raw)
        if h.startswith(("GPU-", "MIG-")):
            return h
        h = h.replace("-", "")
    if len(h) != 32:
        return str(raw)
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
