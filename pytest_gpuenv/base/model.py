"""The environment model: what the detector found, as plain serialisable data.

``GpuEnv.to_dict()`` is what ``gpuenv info --json`` prints and what reaches xdist workers through
``workerinput``; ``GpuEnv.from_dict()`` rebuilds it. Everything here is pure data (dataclasses; NamedTuples for
the records never changed, ``Problem`` and ``ArchPattern``): no I/O.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import Any, NamedTuple, Optional, Union

SCHEMA = 1

#: Detailed kinds, in the words of DETECTION.md. ``backend`` is the coarse INTERFACE.md value.
KINDS = ("rocm", "rocm-wsl", "cuda", "cuda-wsl", "hip-windows", "cuda-windows", "cpu")

_FAMILY = {"rocm": "rocm", "rocm-wsl": "rocm", "hip-windows": "rocm", "cuda": "cuda", "cuda-wsl": "cuda",
           "cuda-windows": "cuda", "cpu": "cpu"}


#: ``--gpuenv-backend`` values: the one list, read by the option parser and by ``detect.apply_backend``
BACKEND_CHOICES = ("auto", "cpu", "cuda", "rocm")
#: ``--gpuenv-perf`` values: read by the option parser and by the timer (``perf.PerfContext``)
PERF_MODES = ("check", "strict", "warn", "off", "record")
#: the values of ``--gpuenv-leak-check`` and of ``@gpuenv_leak_check(mode=...)``
LEAK_MODES = ("off", "fail", "warn")


def family(kind: str) -> str:
    """The coarse backend ("rocm", "cuda", "cpu") of a detailed kind."""
    return _FAMILY.get(kind, "cpu")


#: Problem codes other code and tests rely on (INTERFACE.md). Never rename these.
STABLE_CODES = (
    "kfd-permission-denied",
    "kfd-missing-in-container",
    "rocm-installed-no-driver",
    "hsa-override-invalid",
    "rocm-wsl-dxg-disabled",
    "wsl1-no-gpu",
    "torch-cpu-build",
    "torch-wrong-flavour",
    "visible-devices-hide-all",
    "nvidia-device-nodes-missing",
)


class Problem(NamedTuple):
    """Something wrong (or worth knowing) about the environment, with the fix a person needs (a record made once,
    never changed)."""

    code: str
    message: str
    fix: Optional[str] = None
    #: "error" (GPU tests cannot run because of it), "warning", or "info"
    severity: str = "warning"
    #: what the problem is about: "driver", "permission", "torch", "visibility", "toolchain",
    #: "wsl", "container", "arch", "probe", "sysfs"; used to group skips in the summary
    category: str = "environment"

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


#: the UUID ROCm gives a GPU without a unique id (KFD ``unique_id`` 0; rocminfo's ``Uuid: GPU-XX``): it names
#: no one GPU, as every such GPU has it
NO_UNIQUE_UUID = "GPU-XX"


@dataclass
class Device:
    """One GPU, after the visible-devices variables are applied, in the frameworks' order."""

    index: int
    vendor: str  # "amd" | "nvidia"
    name: Optional[str] = None
    #: effective arch ("gfx942", "sm_90"); for AMD after HSA_OVERRIDE_GFX_VERSION
    arch: Optional[str] = None
    memory_bytes: Optional[int] = None
    warp_size: Optional[int] = None
    uuid: Optional[str] = None
    usable: bool = True
    #: arch before any override (AMD); equals ``arch`` when there is none
    physical_arch: Optional[str] = None
    pci: Optional[str] = None
    #: KFD node number (AMD) or NVIDIA device minor
    node: Optional[int] = None
    render_node: Optional[str] = None
    #: where the facts came from: "/sys/class/kfd", "/proc/driver/nvidia", "nvml", "probe"
    source: Optional[str] = None
    #: why ``usable`` is False, in a few words
    unusable_reason: Optional[str] = None
    #: index in the runtime before masks (what the *_VISIBLE_DEVICES variables index into)
    physical_index: Optional[int] = None
    #: bytes of the largest cache a cold timer must flush: the Infinity Cache (MALL) where the GPU has one,
    #: else L2; from ROCm's GPU specification table (``detect.caches``); None where unknown (NVIDIA: the
    #: timer reads the L2 size from the runtime)
    last_level_cache_bytes: Optional[int] = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def unique_uuid(self) -> Optional[str]:
        """The UUID where it names this GPU alone (None for ROCm's ``GPU-XX``, ``NO_UNIQUE_UUID``)."""
        return self.uuid if self.uuid != NO_UNIQUE_UUID else None

    @property
    def memory_gib(self) -> Optional[float]:
        return None if self.memory_bytes is None else self.memory_bytes / 2**30

    def describe(self) -> str:
        """``NVIDIA H200 (sm_90, 139.8 GiB)``."""
        bits = [b for b in (self.arch, _gib(self.memory_bytes)) if b]
        name = self.name or f"{self.vendor.upper()} GPU"
        return f"{name} ({', '.join(bits)})" if bits else name


class Usability(Enum):
    """What detection concluded about the GPUs as a whole (``GpuEnv.usable``). Its values are what
    ``gpuenv info --json`` prints: ``true``, ``false``, ``"probe-required"``, ``"arch-unsupported"``; and
    it is truthy as they are (only ``UNUSABLE`` is false)."""

    #: a GPU is usable, or none was found and none was expected (a CPU runner as it should be)
    USABLE = True
    #: GPUs were seen, or a runtime probe counted none where the files promised some, but none can be used
    UNUSABLE = False
    #: the files cannot list the devices (WSL 2, Windows) and no runtime probe ran
    PROBE_REQUIRED = "probe-required"
    #: GPUs are usable, but the installed ROCm/torch build has no code for their arch
    ARCH_UNSUPPORTED = "arch-unsupported"

    def __bool__(self) -> bool:
        return bool(self.value)


@dataclass
class GpuEnv:
    """What the run is on. INTERFACE.md lists the keys; extra keys are additions, never renames."""

    schema: int = SCHEMA
    platform: str = "linux"  # "linux" | "windows" | "darwin"
    wsl: Optional[int] = None  # None | 1 | 2
    #: "rocm" | "cuda" | "cpu": where GPU tests will run; "cpu" when no GPU is usable
    backend: str = "cpu"
    #: the detailed kind (KINDS), e.g. "rocm-wsl", "hip-windows"; "cpu" when nothing was found
    kind: str = "cpu"
    usable: Usability = Usability.USABLE
    container: bool = False
    devices: list[Device] = field(default_factory=list)
    #: devices that exist but are hidden by a visible-devices variable (for messages and xdist)
    hidden_devices: list[Device] = field(default_factory=list)
    rocm: dict[str, Any] = field(
        default_factory=lambda: {"version": None, "path": None, "driver_version": None}
    )
    cuda: dict[str, Any] = field(default_factory=lambda: {"driver_version": None, "max_cuda": None})
    hip_sdk: Optional[dict[str, Any]] = None
    torch: Optional[dict[str, Any]] = None
    compilers: dict[str, Any] = field(
        default_factory=lambda: {"hiprtc": False, "nvrtc": False, "hipcc": None, "nvcc": None}
    )
    #: the visible-devices variables in force, name -> value
    visible: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    #: "path: value" facts behind the conclusion (shown with -v and in skip reasons)
    evidence: list[str] = field(default_factory=list)
    #: how the runtime probe went: {"required": bool, "ran": bool, "ok": bool|None, "source": str|None,
    #: "seconds": float|None, "error": str|None}
    probe: dict[str, Any] = field(
        default_factory=lambda: {"required": False, "ran": False, "ok": None, "source": None}
    )
    root: str = "/"
    #: set when --gpuenv-backend forced the answer ("cpu", "cuda", "rocm")
    forced_backend: Optional[str] = None
    #: seconds the detection took (not part of equality-sensitive logic)
    detect_seconds: Optional[float] = None

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "usable": self.usable.value, "problems": [p.to_dict() for p in self.problems]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GpuEnv:
        data = dict(data)
        known = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        if "usable" in data:
            data["usable"] = Usability(data["usable"])
        dev_fields = {f.name for f in dataclasses.fields(Device)}
        data["devices"] = [Device(**{k: v for k, v in d.items() if k in dev_fields}) for d in data.get("devices", [])]
        data["hidden_devices"] = [
            Device(**{k: v for k, v in d.items() if k in dev_fields}) for d in data.get("hidden_devices", [])
        ]
        prob_fields = set(Problem._fields)
        data["problems"] = [Problem(**{k: v for k, v in p.items() if k in prob_fields}) for p in data.get("problems", [])]
        return cls(**data)

    # ------------------------------------------------------------------ queries
    @property
    def usable_devices(self) -> list[Device]:
        return [d for d in self.devices if d.usable]

    @property
    def has_gpu(self) -> bool:
        return self.backend in ("rocm", "cuda") and bool(self.usable_devices)

    @property
    def torch_build(self) -> Optional[str]:
        return None if self.torch is None else self.torch.get("build")

    def problem(self, code: str) -> Optional[Problem]:
        for p in self.problems:
            if p.code == code:
                return p
        return None

    @property
    def problem_codes(self) -> list[str]:
        return [p.code for p in self.problems]

    def describe_devices(self, devices: Optional[list[Device]] = None) -> str:
        """``1x NVIDIA H200 (sm_90, 139.8 GiB)``; identical devices are grouped."""
        devs = self.devices if devices is None else devices
        if not devs:
            return "no GPU"
        groups: list[tuple[str, int]] = []
        for d in devs:
            text = d.describe()
            if groups and groups[-1][0] == text:
                groups[-1] = (text, groups[-1][1] + 1)
            else:
                groups.append((text, 1))
        return ", ".join(f"{n}x {t}" for t, n in groups)

    def describe(self) -> str:
        """One phrase for skip reasons: ``CUDA (1x NVIDIA H200, sm_90)`` or ``no usable GPU``."""
        if self.has_gpu:
            label = {"rocm": "ROCm", "cuda": "CUDA"}[self.backend]
            if self.wsl:
                label += f" on WSL {self.wsl}"
            return f"{label} ({self.describe_devices(self.usable_devices)})"
        if self.forced_backend == "cpu":
            return "no GPU (--gpuenv-backend=cpu)"
        if self.devices:
            why = next((d.unusable_reason for d in self.devices if d.unusable_reason), None)
            return f"{self.describe_devices()} present but not usable" + (f" ({why})" if why else "")
        if self.usable is Usability.PROBE_REQUIRED:
            how = "failed" if self.probe.get("ran") else "did not run"
            return f"{_KIND_LABEL.get(self.kind, self.kind)} found, device count unknown (runtime probe {how})"
        if self.hidden_devices:
            why = next((d.unusable_reason for d in self.hidden_devices if d.unusable_reason), None)
            return f"no visible GPU, {len(self.hidden_devices)} hidden" + (f" ({why})" if why else "")
        return "no GPU"


_KIND_LABEL = {
    "rocm": "ROCm",
    "rocm-wsl": "ROCm on WSL 2",
    "cuda": "CUDA",
    "cuda-wsl": "CUDA on WSL 2",
    "hip-windows": "HIP SDK on Windows",
    "cuda-windows": "CUDA on Windows",
    "cpu": "CPU",
}


def kind_label(kind: str) -> str:
    return _KIND_LABEL.get(kind, kind)


def _gib(n: Optional[int]) -> Optional[str]:
    return None if n is None else f"{n / 2**30:.1f} GiB"


# ---------------------------------------------------------------------- sizes and arch patterns
_SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
#: patterns here and below are text: ``re`` compiles (and caches) each on first use, not every import
_SIZE_RE = r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$"
#: the largest size a marker or profile may ask for (16 EiB, the 64-bit address space)
MAX_SIZE = 2**64
#: the most GPUs a marker, a ``--gpuenv-plan`` profile or an xdist worker may ask for
MAX_DEVICES = 1024
_SIZE_HELP = "examples: '16GiB', '40GB', '512MiB', 1073741824"


def safe_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters; never raises (an int of 5,000 digits has no repr, and a
    marker argument's own ``__repr__`` may raise anything)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__} too long to show>"
    except Exception as exc:
        text = f"<{type(value).__name__} object: repr raised {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_size(value: Any) -> int:
    """``"16GiB"`` -> bytes, from 1 byte up to ``MAX_SIZE``. Raises ``ValueError`` naming the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a size such as '16GiB' or an int of bytes, got {safe_repr(value)}")
    exact: Union[int, Decimal]
    if isinstance(value, str):
        m = re.match(_SIZE_RE, value) if len(value) <= 1000 else None
        if not m or m.group(2).lower() not in _SIZE_UNITS:
            raise ValueError(f"cannot parse size {safe_repr(value)} ({_SIZE_HELP})")
        exact = Decimal(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"size must be a finite number of bytes, got {value!r}")
    else:
        exact = value if isinstance(value, int) else Decimal(value)
    if exact <= 0:
        raise ValueError(f"size must be positive, got {safe_repr(value)}")
    if exact < 1:
        raise ValueError(f"size {safe_repr(value)} is a fraction of a byte; sizes are at least 1 byte")
    if exact > MAX_SIZE:
        raise ValueError(f"size {safe_repr(value)} is too large (at most 16 EiB, 2**64 bytes)")
    return int(exact)


def format_size(n: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


_GFX_PAT = r"^gfx(?:[0-9a-f*?\[\]]+|\d{1,2}(?:-\d)?-generic)$"  # gfx90a, gfx94*, gfx9-4-generic
_SM_PAT = r"^sm_(\d{2,3})([a-z]?)(\+?)$"
_SM_GLOB = r"^sm_[0-9*?\[\]]+[a-z]?$"


class ArchPattern(NamedTuple):
    """``gfx90a``, ``gfx94*``, ``sm_90``, ``sm_80+`` (8.0 or newer). Never matches the other vendor."""

    text: str

    @classmethod
    def parse(cls, text: Any) -> ArchPattern:
        if not isinstance(text, str):
            raise ValueError(
                f"arch pattern must be a string such as 'gfx90a', 'gfx94*', 'sm_80+', got {safe_repr(text)}"
            )
        t = text.strip().lower()
        if re.match(_GFX_PAT, t) and len(t) > 3:
            return cls(t)
        if re.match(_SM_PAT, t) or (re.match(_SM_GLOB, t) and any(c in t for c in "*?[")):
            return cls(t)
        raise ValueError(
            f"invalid arch pattern {safe_repr(text)} (examples: 'gfx90a', 'gfx94*', 'gfx11*', 'sm_90', 'sm_80+')"
        )

    @property
    def vendor(self) -> str:
        return "amd" if self.text.startswith("gfx") else "nvidia"

    def matches(self, arch: Optional[str]) -> bool:
        if not arch:
            return False
        arch = arch.split(":")[0].lower()
        if self.vendor == "amd":
            return arch.startswith("gfx") and fnmatch.fnmatchcase(arch, self.text)
        if not arch.startswith("sm_"):
            return False
        m = re.match(_SM_PAT, self.text)
        if m and m.group(3) == "+":
            am = re.match(r"^sm_(\d+)", arch)
            return am is not None and int(am.group(1)) >= int(m.group(1))
        return fnmatch.fnmatchcase(arch, self.text)


def gfx_name(gfx_target_version: int) -> Optional[str]:
    """90402 -> ``gfx942``; 0 -> None (DETECTION.md section 3)."""
    if gfx_target_version <= 0:
        return None
    major = gfx_target_version // 10000
    minor = (gfx_target_version // 100) % 100
    step = gfx_target_version % 100
    return f"gfx{major}{minor:x}{step:x}"


def default_warp_size(arch: Optional[str]) -> Optional[int]:
    """64 on GCN/CDNA (gfx9 and older), 32 on RDNA (gfx10+) and on NVIDIA."""
    if not arch:
        return None
    if arch.startswith("sm_"):
        return 32
    m = re.match(r"^gfx(\d+?)([0-9a-f]{2})$", arch.split(":")[0])
    if not m:
        return None
    return 64 if int(m.group(1)) <= 9 else 32
