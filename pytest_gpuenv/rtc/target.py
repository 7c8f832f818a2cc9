"""The AMD target a CPU-executor run stands for, and the ROCm version: what device code sees of them.

A CPU run compiles a kernel as hipcc compiles it for one AMD target (``compile_kernel(..., arch="cpu",
target="gfx942", rocm_version="6.4")``), and takes from that target and version:

- the wave size: the target's (64 on GCN/CDNA; 32 on RDNA, which also runs wave64 under hipcc's
  ``-mwavefrontsize64``, so ``warp_size=64`` is accepted there), from ``base.capabilities``;
- the macros clang predefines for device code of that target: ``__AMD__``, ``__AMDGPU__``, ``__AMDGCN__``,
  ``__<target>__`` (a generic target's name with ``_`` for ``-``: ``__gfx9_4_generic__``), its family
  (``__GFX9__``, ``__GFX11__``), ``__amdgcn_processor__``, ``__amdgcn_target_id__``, ``__HAS_FMAF__``,
  ``__HAS_LDEXPF__``, ``__HAS_FP64__``, ``__AMDGCN_WAVEFRONT_SIZE``/``__AMDGCN_WAVEFRONT_SIZE__`` and
  ``__AMDGCN_CUMODE__`` (llvm-project clang/lib/Basic/Targets/AMDGPU.cpp, ``getTargetDefines``, at
  00738dd537889dc71bebd1a2941c685c15aa3cc2); ``__HIP__``, ``__HIPCC__``, ``__HIP_MEMORY_SCOPE_*`` and, for
  the device pass, ``__HIP_DEVICE_COMPILE__`` (clang/lib/Frontend/InitPreprocessor.cpp); and hipcc's
  ``__HIP_PLATFORM_AMD__``/``__HIP_PLATFORM_HCC__``. The FMA-rate macros (``FP_FAST_FMA*``) and the
  target-ID feature macros (``__amdgcn_feature_xnack__``) are left out: the CPU has neither;
- the shared memory (LDS) of a block: 64 KiB, 160 KiB on gfx950 (``base.capabilities``);
- ``HIP_VERSION_MAJOR``/``_MINOR``/``_PATCH`` and ``HIP_VERSION`` (hip_version.h's formula), and the rules
  of that ROCm: ``warpSize`` is a ``static constexpr int`` before ROCm 7 (ROCm/clr
  hipamd/include/hip/amd_detail/amd_warp_functions.h, rocm-6.x) and, from ROCm 7, an object that converts
  to ``int`` and is no constant expression (ROCm/rocm-systems projects/clr/.../amd_warp_functions.h:
  ``inline __device__ const struct { operator int() const ... } warpSize{}``), so
  ``static_assert(warpSize == 64)`` builds for ROCm 6 and fails for ROCm 7, as on the GPU; the ``*_sync``
  functions take a 64-bit mask and check it from ROCm 6.2 (amd_warp_sync_functions.h).

Without ``target``, a run at wave64 stands for gfx90a and one at wave32 for gfx1100; the ``hip_kernel``
fixture takes them from the detected or configured archs first (``default_target``). Without
``rocm_version``, the installed ROCm's (``detected_rocm``), else ``DEFAULT_ROCM``.
"""

from __future__ import annotations

import functools
import os
import re
from typing import NamedTuple, Optional, Sequence

from pytest_gpuenv.base import capabilities
from pytest_gpuenv.rtc.errors import KernelCompileError

#: what a CPU run stands for without a target, by wave size
DEFAULT_TARGETS = {64: "gfx90a", 32: "gfx1100"}
#: the ROCm a CPU run stands for where none is installed or configured
DEFAULT_ROCM = "7.0"
#: the ini option and keyword that set the ROCm version (named in messages)
ROCM_INI = "gpuenv_cpu_rocm_version"
ROCM_KEYWORD = "rocm_version"
_GENERIC = re.compile(r"^gfx(\d+)(?:-(\d+))?-generic$")
_TARGET = re.compile(r"^gfx(?:[0-9a-f]{3,4}|\d+(?:-\d+)?-generic)$")
_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?")


class CpuTarget(NamedTuple):
    """The AMD target (``arch``), wave size and ROCm version (``rocm``, ``(major, minor, patch)``) of a CPU run."""

    arch: str
    warp_size: int
    rocm: tuple[int, int, int]

    @property
    def rocm_version(self) -> str:
        return ".".join(map(str, self.rocm))

    @property
    def shared_limit(self) -> int:
        """Bytes of shared memory (static and dynamic together) a block may use."""
        row = capabilities.row(self.arch)
        return row.shared if row is not None else 64 * 1024

    @property
    def family(self) -> str:
        """clang's family name: ``gfx9`` for gfx90a and gfx9-4-generic, ``gfx11`` for gfx1100."""
        m = _GENERIC.match(self.arch)
        if m:
            return f"gfx{m.group(1)}"
        digits = self.arch[3:]
        return "gfx" + digits[:-2]

    def defines(self) -> list[str]:
        """The ``-D`` flags of the target's and the ROCm version's macros."""
        canon = self.arch.replace("-", "_")
        w = self.warp_size
        major, minor, patch = self.rocm
        cumode = 1 if self.family == "gfx9" else 0  # gfx10+: WGP mode by default (FEATURE_WGP)
        macros = [
            "__AMD__=1", "__AMDGPU__=1", "__AMDGCN__=1", f"__{canon}__=1", f"__{self.family.upper()}__=1",
            f'__amdgcn_processor__="{self.arch}"', f'__amdgcn_target_id__="{self.arch}"',
            "__HAS_FMAF__=1", "__HAS_LDEXPF__=1", "__HAS_FP64__=1",
            f"__AMDGCN_WAVEFRONT_SIZE={w}", f"__AMDGCN_WAVEFRONT_SIZE__={w}", f"__AMDGCN_CUMODE__={cumode}",
            # clang for -x hip (InitPreprocessor.cpp), the device pass; hipcc's platform macros
            "__HIP__=1", "__HIPCC__=1", "__HIP_DEVICE_COMPILE__=1", "__HIP_PLATFORM_AMD__=", "__HIP_PLATFORM_HCC__=",
            "__HIP_MEMORY_SCOPE_SINGLETHREAD=1", "__HIP_MEMORY_SCOPE_WAVEFRONT=2", "__HIP_MEMORY_SCOPE_WORKGROUP=3",
            "__HIP_MEMORY_SCOPE_AGENT=4", "__HIP_MEMORY_SCOPE_SYSTEM=5",
            # hip_version.h
            f"HIP_VERSION_MAJOR={major}", f"HIP_VERSION_MINOR={minor}", f"HIP_VERSION_PATCH={patch}",
            f"HIP_VERSION={major * 10000000 + minor * 100000 + patch}",
            # the executor's own: the wave size, and the ROCm version as one number (warpSize's rule, masks)
            f"GPUENV_WARP_SIZE={w}", f"GPUENV_ROCM={major * 100 + minor}",
        ]
        return [f"-D{m}" for m in macros]


def parse_rocm(value: object, where: str = ROCM_KEYWORD) -> tuple[int, int, int]:
    """``"6.4"``, ``"7"``, ``"6.4.1"`` (a suffix such as ``-120`` is ignored) -> (major, minor, patch)."""
    m = _VERSION.match(str(value).strip()) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if m is None or not 1 <= int(m.group(1)) <= 99:
        raise KernelCompileError(f"{where}={value!r} is not a ROCm version such as '6.4' or '7.0'", arch="cpu")
    return int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)


def check_target(target: object) -> str:
    """``target`` as a known AMD target (``gfx942``, ``gfx11-generic``; features such as ``:xnack-`` dropped);
    KernelCompileError naming it otherwise."""
    t = str(target).strip().lower().split(":")[0] if isinstance(target, str) else ""
    row = capabilities.row(t) if _TARGET.match(t) else None
    if row is None:
        known = ", ".join(sorted({*DEFAULT_TARGETS.values(), "gfx942", "gfx950", "gfx1201", "gfx9-generic",
                                  "gfx9-4-generic", "gfx10-3-generic", "gfx11-generic", "gfx12-generic"}))
        raise KernelCompileError(f"target={target!r} is not an AMD target a CPU run can stand for (e.g. {known})",
                                 arch="cpu")
    return t


def waves(target: str) -> tuple[int, ...]:
    """The wave sizes ``target`` runs, its default first; KernelCompileError for an unknown target."""
    row = capabilities.row(check_target(target))
    return row.waves if row is not None else (64,)


def resolve(target: Optional[str], warp_size: Optional[int], rocm_version: Optional[str]) -> CpuTarget:
    """The CpuTarget of a CPU run: ``target`` (default: by wave size, ``DEFAULT_TARGETS``), ``warp_size``
    (default: the target's first wave size; it must be one the target runs) and ``rocm_version``
    (default: the installed ROCm's, else ``DEFAULT_ROCM``)."""
    if warp_size is not None and (isinstance(warp_size, bool) or warp_size not in (32, 64)):
        raise ValueError(f"warp_size must be 32 or 64, got {warp_size!r}")
    arch = check_target(target) if target is not None else DEFAULT_TARGETS[warp_size or 64]
    runs = waves(arch)
    wave = warp_size or runs[0]
    if wave not in runs:
        raise KernelCompileError(f"target {arch!r} runs wave{'/wave'.join(map(str, runs))}, not "
                                 f"warp_size={warp_size}", arch="cpu")
    rocm = parse_rocm(rocm_version) if rocm_version is not None else parse_rocm(detected_rocm() or DEFAULT_ROCM)
    return CpuTarget(arch, wave, rocm)


def default_target(warp_size: int, archs: Sequence[Optional[str]]) -> str:
    """The target a CPU run at ``warp_size`` stands for given the detected or configured ``archs``: the first
    AMD one whose default wave size it is, else the first that runs it, else ``DEFAULT_TARGETS``."""
    known = [a.split(":")[0].lower() for a in archs if a and str(a).lower().startswith("gfx")]
    rows = [(a, capabilities.row(a)) for a in known if _TARGET.match(a)]
    for a, row in rows:
        if row is not None and row.waves[0] == warp_size:
            return a
    for a, row in rows:
        if row is not None and warp_size in row.waves:
            return a
    return DEFAULT_TARGETS[warp_size]


@functools.cache
def detected_rocm() -> Optional[str]:
    """The installed ROCm's version (``detect.compilers.rocm_userspace``), or None where none is found."""
    from pytest_gpuenv.detect.compilers import rocm_userspace
    from pytest_gpuenv.detect.fs import Fs

    try:
        version = rocm_userspace(Fs(None), os.environ, []).get("version")
    except Exception:  # detection is best effort here
        return None
    return str(version) if version else None
