"""Device facts a measurement needs: identity, cache sizes (flush size, from the runtime's L2 and the table
in ``detect.caches``), peak bandwidth table."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional

from pytest_gpuenv.detect.caches import last_level_cache

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

def peak_bandwidth(name: Optional[str]) -> Optional[float]:
    if not name:
        return None
    if name in PEAK_BANDWIDTH:
        return PEAK_BANDWIDTH[name]
    # longest table name contained in the device name ("NVIDIA H100 80GB HBM3" vs "NVIDIA H100")
    hits = [k for k in PEAK_BANDWIDTH if k.lower() in name.lower()]
    return PEAK_BANDWIDTH[max(hits, key=len)] if hits else None


def last_level_cache_bytes(l2_bytes: Optional[int], arch: Optional[str], name: Optional[str] = None) -> Optional[int]:
    """The largest cache of the device: the runtime's L2 size or the table's last level (``detect.caches``:
    Infinity Cache where the GPU has one, by name, else the largest for the arch), whichever is larger."""
    vendor = "amd" if arch and arch.startswith("gfx") else "nvidia"
    sizes = [int(s) for s in (l2_bytes, last_level_cache(vendor, arch, name)) if s]
    return max(sizes) if sizes else None


#: how many times the largest cache a cold flush reads, by vendor. NVIDIA: 1.25x the L2, since 1x already
#: left kernels as cold as 2x and 3x did and 0.5x did not; the quarter over 1x is margin for a replacement
#: policy that keeps a few lines, and more costs device time in every cold sample. AMD: 2x, unmeasured on
#: hardware (an Infinity Cache is a memory-side cache with its own policy). Figures: docs/explanation/timer.md.
FLUSH_FACTOR = {"nvidia": 1.25, "amd": 2.0}


def flush_bytes(l2_bytes: Optional[int], arch: Optional[str], name: Optional[str] = None) -> int:
    """``FLUSH_FACTOR`` times the largest cache a kernel's data could be left in
    (``last_level_cache_bytes``), rounded up to a whole MiB.

    Unknown size: 256 MiB, Triton's choice. An AMD arch missing from the cache table gets at least that
    too, since its L2 alone says nothing of an Infinity Cache (RDNA 2-4 have 32-128 MiB).
    """
    amd = bool(arch and arch.startswith("gfx"))
    largest = last_level_cache_bytes(l2_bytes, arch, name)
    nbytes = int(FLUSH_FACTOR["amd" if amd else "nvidia"] * largest) if largest else 256 * MiB
    if amd and last_level_cache("amd", arch, name) is None:
        nbytes = max(nbytes, 256 * MiB)
    return -(-nbytes // MiB) * MiB


def cache_facts(l2_bytes: Optional[int], arch: Optional[str], name: Optional[str]) -> dict[str, Any]:
    """``DeviceInfo`` keywords for the caches: ``l2_bytes``, ``last_level_cache_bytes``, ``flush_bytes``."""
    return {"l2_bytes": l2_bytes, "last_level_cache_bytes": last_level_cache_bytes(l2_bytes, arch, name),
            "flush_bytes": flush_bytes(l2_bytes, arch, name)}


@dataclass
class DeviceInfo:
    """What a backend knows about the device it times on (plain data, goes into the report's entries)."""

    name: str
    vendor: str  # "nvidia" | "amd" | "fake"
    arch: Optional[str] = None
    index: int = 0
    uuid: Optional[str] = None
    pci_bus_id: Optional[str] = None
    l2_bytes: Optional[int] = None
    #: the L2 or Infinity Cache size the flush covers (``last_level_cache_bytes()``)
    last_level_cache_bytes: Optional[int] = None
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
