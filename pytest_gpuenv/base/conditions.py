"""Where a test runs, as facts a condition can test: the vendor and arch of its device, the versions of the
stack, the host. Read by ``gpu_expected`` keys (``base.expected``) and quarantine ``when`` tables
(``session.quarantine``), so both mean the same thing by ``"rocm<7"`` or ``arch = "gfx94*"``.

The device is the GPU the test runs on, or the CPU (vendor ``cpu``, no arch) where it runs on none: a runner
without a usable GPU, or a test parametrized with ``torch_device`` ``cpu``. Versions (``VERSIONS``):

- ``cuda``: the CUDA torch was built for where torch is a CUDA build, else the newest CUDA the driver supports
  (NVML); known only where the device is an NVIDIA GPU.
- ``rocm``: the installed ROCm (``/opt/rocm/.info/version``), else the HIP torch was built for; known only where
  the device is an AMD GPU.
- ``driver``: the NVIDIA driver on an NVIDIA GPU, the amdgpu driver on an AMD GPU.
- ``torch``: the installed torch, wherever the test runs.

A version range is a PEP 440 specifier (``packaging.specifiers``): ``<6.4``, ``>=12.8``, ``>=2.5,<2.7``,
``==6.3.*``. A fact that is unknown (no torch, no NVML) satisfies no range.
"""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from pytest_gpuenv.base.model import Device, GpuEnv, safe_repr

if TYPE_CHECKING:  # pragma: no cover
    from packaging.specifiers import SpecifierSet

VENDORS = ("nvidia", "amd", "cpu")
VERSIONS = ("cuda", "rocm", "driver", "torch")


class Facts(NamedTuple):
    """The device a test runs on and the stack around it."""

    vendor: str
    arch: Optional[str]
    versions: dict[str, Optional[str]]
    host: str

    def describe(self) -> str:
        """``nvidia sm_90, cuda 12.8, driver 570.86.15, torch 2.7.0``."""
        bits = [f"{k} {v}" for k, v in self.versions.items() if v]
        head = self.vendor + (f" {self.arch}" if self.arch else "")
        return ", ".join([head, *bits])


#: a device index as torch reads one (c10/core/Device.cpp): digits, no leading zero
_INDEX = re.compile(r"0|[1-9][0-9]*")


def torch_device_of(item: Any) -> Any:
    """A pytest item's ``torch_device`` parameter (the plugin's ``torch_device`` fixture or the suite's own
    parametrization); None where the test has none."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("torch_device") if callspec is not None else None


def _named(torch_device: Any) -> tuple[Optional[str], str]:
    """(device type, index text) of a ``torch_device`` parameter: a string or a ``torch.device`` by its text, an
    int as torch reads one (a CUDA ordinal); (None, "") for None or any other value, whose own ``__str__`` is
    never called (a suite's parameter may raise there)."""
    if isinstance(torch_device, int) and not isinstance(torch_device, bool):
        return ("cuda", str(torch_device)) if torch_device >= 0 else (None, "")
    if isinstance(torch_device, str):
        kind, _, index = torch_device.partition(":")
        return kind, index
    if type(torch_device).__name__ == "device" and isinstance(getattr(torch_device, "type", None), str):
        ordinal = getattr(torch_device, "index", None)
        return torch_device.type, str(ordinal) if isinstance(ordinal, int) else ""
    return None, ""


def gpu_for(env: GpuEnv, torch_device: Any = None) -> Optional[Device]:
    """The GPU a test uses: the usable one its ``torch_device`` parameter names (``cuda:1``, a ``torch.device``, an
    int), else the first usable (for ``cuda``, ``cpu``, an index torch refuses or one not usable here, any other
    value); None where no GPU is usable. The GPU fixtures (``gpu_device``, ``hip_kernel``) take this one, beside a
    ``torch_device`` of ``cpu`` too."""
    devs = env.usable_devices if env.has_gpu else []
    if not devs:
        return None
    kind, index = _named(torch_device)
    wanted = int(index) if kind == "cuda" and _INDEX.fullmatch(index) else None
    return next((d for d in devs if d.index == wanted), devs[0])


def device_for(env: GpuEnv, torch_device: Any = None) -> Optional[Device]:
    """The GPU a test runs on (``gpu_for``); None where it runs on the CPU: no usable GPU, or a ``torch_device``
    whose device type is not ``cuda`` (``cpu``)."""
    kind, _ = _named(torch_device)
    if kind is not None and kind != "cuda":
        return None
    return gpu_for(env, torch_device)


def facts(env: GpuEnv, device: Optional[Device], host: str = "") -> Facts:
    """The facts of ``device`` (None: the CPU) in ``env``."""
    torch = env.torch or {}
    vendor = device.vendor if device is not None else "cpu"
    versions: dict[str, Optional[str]] = {"cuda": None, "rocm": None, "driver": None,
                                          "torch": torch.get("version")}
    if vendor == "nvidia":
        versions["cuda"] = torch.get("cuda") if torch.get("build") == "cuda" else env.cuda.get("max_cuda")
        versions["driver"] = env.cuda.get("driver_version")
    elif vendor == "amd":
        versions["rocm"] = env.rocm.get("version") or torch.get("hip")
        versions["driver"] = env.rocm.get("driver_version")
    arch = device.arch.split(":")[0].lower() if device is not None and device.arch else None
    return Facts(vendor, arch, versions, host)


def parse_spec(text: Any, what: str) -> SpecifierSet:
    """A PEP 440 version range (``<6.4``, ``>=12.8,<13``); ``ValueError`` naming ``what`` and the text."""
    if not isinstance(text, str) or not text.strip() or len(text) > 200:
        raise ValueError(f"{what} must be a version range such as '<6.4' or '>=12.8', got {safe_repr(text)}")
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # (imported where a range is read)

    t = text.strip()
    if t[0].isdigit():
        t = "==" + t  # a bare version: that version (and '6.4' is '==6.4', which 6.4.0 satisfies)
    try:
        return SpecifierSet(t)
    except InvalidSpecifier:
        raise ValueError(f"{what} {safe_repr(text)} is not a version range (examples: '<6.4', '>=12.8', "
                         "'>=2.5,<2.7', '==6.3.*')") from None


def version_in(spec: SpecifierSet, version: Optional[str]) -> bool:
    """Whether ``version`` (as a tool prints it: ``6.4.1``, ``2.7.0+cu128``, ``550.90.07``) is in ``spec``;
    False when it is unknown or unreadable. Pre-releases count (a ROCm 7.0 RC is a 7.0)."""
    from packaging.version import InvalidVersion, Version

    if not version:
        return False
    try:
        v = Version(str(version).strip())
    except InvalidVersion:
        return False
    return spec.contains(v, prereleases=True) or spec.contains(Version(v.base_version), prereleases=True)


def host_matches(pattern: str, host: str) -> bool:
    """A host glob against the host name (``gpu-node-*``); the host name is the part before any ``' ('``."""
    return fnmatch.fnmatchcase(host.split(" (")[0].lower(), pattern.lower())
