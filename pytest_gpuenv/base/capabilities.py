"""What each GPU arch can do: the table behind ``@requires_capability`` and ``gpuenv info``.

One row per arch family, first match wins; every fact comes from the vendor's documents:

- AMD: ROCm "GPU hardware specifications" (LDS per workgroup, wavefront size:
  https://rocm.docs.amd.com/en/latest/reference/gpu-arch-specs.html), ROCm "Data types and precision
  support" (FP8: FNUZ on gfx940-942, OCP on gfx950 and gfx12; bf16; xf32:
  https://rocm.docs.amd.com/en/latest/reference/precision-support.html), HIP "Low precision floating point
  types" (https://rocm.docs.amd.com/projects/HIP/en/latest/reference/fp8_numbers.html), and the ISA
  reference guides: "Vega 7nm" (gfx906: DOT4 int8, no MFMA), "CDNA1/CDNA2/CDNA3/CDNA4 Instruction Set
  Architecture" (MFMA, V_DOT4_I32_I8, XF32 on CDNA3, FP8 MFMA, 160 KiB LDS on CDNA4), "RDNA2/RDNA3/RDNA4
  Instruction Set Architecture" (wave32 and wave64, WMMA on RDNA3+, FP8 WMMA on RDNA4). FP64 rates: the
  Instinct data sheets (MI50/MI100/MI210/MI300X/MI355X: FP64 vector at half the FP32 rate); Radeon: 1/16
  (RDNA2) and 1/32 (RDNA3/4) of FP32. Cross-checked with LLVM's AMDGPU target features (``FeatureXF32Insts``
  on gfx940-942 only, not gfx950; ``FeatureDot1Insts`` (V_DOT4_I32_I8) on gfx906, gfx908+, gfx1011+).
- NVIDIA: CUDA C++ Programming Guide, "Compute Capabilities" (feature and technical-specification tables:
  maximum shared memory per block, opt-in; FP16, BF16, TF32 and FP8 tensor-core types per compute
  capability; "Arithmetic instructions" throughput table for the FP64 rate):
  https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#compute-capabilities

``ecc`` is a fact of the board, not the arch: it is listed where every product of the arch has it
(HBM Instinct and NVIDIA data-centre parts); where the arch ships both ways (sm_86, sm_89, RDNA) it
counts as absent, and the skip reason says so. ``unified_memory`` on CDNA2+ means HMM with XNACK on
(``HSA_XNACK=1``, ROCm "Unified memory" page); on NVIDIA, on-demand paging of managed memory (sm_60+,
Linux, not WSL: CUDA Programming Guide, "Unified Memory Programming").
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, NamedTuple, Optional

from pytest_gpuenv.base.model import Device, GpuEnv, format_size, parse_size, safe_repr

#: the capability names a marker may ask for, besides ``shared_memory>=SIZE``
NAMES = ("fp64", "fp64_full", "fp16", "bf16", "fp8", "fp8_ocp", "fp8_fnuz", "int8_dot", "matrix_cores", "tf32",
         "wave32", "wave64", "cooperative_launch", "unified_memory", "ecc", "peer_access")
_SHARED_RE = r"^shared_memory\s*>=\s*(.+)$"

KiB = 1024


class ArchCaps(NamedTuple):
    """One row of the table: an arch family and what it has."""

    patterns: tuple[str, ...]
    family: str
    fp64_rate: str
    bf16: bool
    fp8: tuple[str, ...]
    int8_dot: bool
    matrix: Optional[str]
    tf32: Optional[str]
    waves: tuple[int, ...]
    shared: int
    unified: Optional[str]
    ecc: Optional[bool]


_OCP, _FNUZ = ("e4m3", "e5m2"), ("e4m3fnuz", "e5m2fnuz")
_APUS = ("gfx90c", "gfx1033", "gfx1035", "gfx1036", "gfx1103", "gfx115?")
#: (patterns, family, fp64 rate, bf16, fp8, int8 dot, matrix cores, tf32, waves, shared/block, unified, ecc)
TABLE = (
    # -- AMD (ROCm GPU hardware specifications; ISA reference guides)
    ArchCaps(("gfx906",), "GCN5.1 Vega 20", "1/2", False, (), True, None, None, (64,), 64 * KiB, None, True),
    ArchCaps(("gfx908",), "CDNA1", "1/2", True, (), True, "MFMA", None, (64,), 64 * KiB, None, True),
    ArchCaps(("gfx90a",), "CDNA2", "1/2", True, (), True, "MFMA", None, (64,), 64 * KiB, "HMM with XNACK", True),
    ArchCaps(("gfx940", "gfx941", "gfx942"), "CDNA3", "1/2", True, _FNUZ, True, "MFMA", "xf32 MFMA", (64,),
             64 * KiB, "HMM with XNACK; MI300A is an APU", True),
    ArchCaps(("gfx950",), "CDNA4", "1/2", True, _OCP, True, "MFMA", None, (64,), 160 * KiB, "HMM with XNACK", True),
    # generic targets: what every processor they cover has (LLVM AMDGPUUsage, "AMDGPU Generic Processors":
    # gfx9-generic gfx900-gfx90c, without dot4 on gfx906; gfx9-4-generic gfx940-gfx950, without FP8 or XF32)
    ArchCaps(("gfx9-generic",), "GCN5 (generic)", "1/2", False, (), False, None, None, (64,), 64 * KiB, None, None),
    ArchCaps(("gfx9-4-generic",), "CDNA3/CDNA4 (generic)", "1/2", True, (), True, "MFMA", None, (64,), 64 * KiB,
             "HMM with XNACK", True),
    ArchCaps(("gfx10-1-generic",), "RDNA1 (generic)", "1/16", False, (), False, None, None, (32, 64), 64 * KiB,
             None, None),
    ArchCaps(("gfx10-3-generic",), "RDNA2 (generic)", "1/16", False, (), True, None, None, (32, 64), 64 * KiB,
             None, None),
    ArchCaps(("gfx11-generic",), "RDNA3 (generic)", "1/32", True, (), True, "WMMA", None, (32, 64), 64 * KiB,
             None, None),
    ArchCaps(("gfx12-generic",), "RDNA4 (generic)", "1/32", True, _OCP, True, "WMMA", None, (32, 64), 64 * KiB,
             None, None),
    ArchCaps(_APUS, "APU", "1/16", False, (), True, None, None, (32, 64), 64 * KiB, "APU: one memory", None),
    ArchCaps(("gfx1010",), "RDNA1", "1/16", False, (), False, None, None, (32, 64), 64 * KiB, None, None),
    ArchCaps(("gfx101?",), "RDNA1", "1/16", False, (), True, None, None, (32, 64), 64 * KiB, None, None),
    ArchCaps(("gfx103?",), "RDNA2", "1/16", False, (), True, None, None, (32, 64), 64 * KiB, None, None),
    ArchCaps(("gfx11??",), "RDNA3", "1/32", True, (), True, "WMMA", None, (32, 64), 64 * KiB, None, None),
    ArchCaps(("gfx12??",), "RDNA4", "1/32", True, _OCP, True, "WMMA", None, (32, 64), 64 * KiB, None, None),
    # -- NVIDIA (CUDA C++ Programming Guide, Compute Capabilities)
    ArchCaps(("sm_60",), "Pascal", "1/2", False, (), False, None, None, (32,), 48 * KiB, "HMM", True),
    ArchCaps(("sm_6?",), "Pascal", "1/32", False, (), True, None, None, (32,), 48 * KiB, "HMM", None),
    ArchCaps(("sm_70",), "Volta", "1/2", False, (), True, "tensor cores", None, (32,), 96 * KiB, "HMM", True),
    ArchCaps(("sm_72",), "Volta (Xavier)", "1/32", False, (), True, "tensor cores", None, (32,), 96 * KiB,
             "integrated: one memory", None),
    ArchCaps(("sm_75",), "Turing", "1/32", False, (), True, "tensor cores", None, (32,), 64 * KiB, "HMM", None),
    ArchCaps(("sm_80",), "Ampere", "1/2", True, (), True, "tensor cores", "TF32 tensor cores", (32,), 163 * KiB,
             "HMM", True),
    ArchCaps(("sm_86",), "Ampere", "1/64", True, (), True, "tensor cores", "TF32 tensor cores", (32,), 99 * KiB,
             "HMM", None),
    ArchCaps(("sm_87",), "Ampere (Orin)", "1/64", True, (), True, "tensor cores", "TF32 tensor cores", (32,),
             163 * KiB, "integrated: one memory", None),
    ArchCaps(("sm_89",), "Ada", "1/64", True, _OCP, True, "tensor cores", "TF32 tensor cores", (32,), 99 * KiB,
             "HMM", None),
    ArchCaps(("sm_90",), "Hopper", "1/2", True, _OCP, True, "tensor cores", "TF32 tensor cores", (32,), 227 * KiB,
             "HMM", True),
    ArchCaps(("sm_100",), "Blackwell", "1/2", True, _OCP, True, "tensor cores", "TF32 tensor cores", (32,),
             227 * KiB, "HMM", True),
    ArchCaps(("sm_10?", "sm_11?"), "Blackwell", "1/64", True, _OCP, True, "tensor cores", "TF32 tensor cores",
             (32,), 227 * KiB, "HMM", None),
    ArchCaps(("sm_12?",), "Blackwell (GeForce)", "1/64", True, _OCP, True, "tensor cores", "TF32 tensor cores",
             (32,), 99 * KiB, "HMM", None),
)


class Requirement(NamedTuple):
    """One parsed capability: ``name`` (from NAMES, or ``shared_memory``) and, for shared memory, the bytes."""

    name: str
    size: Optional[int]
    text: str


def parse(value: Any) -> Requirement:
    """``"bf16"`` or ``"shared_memory>=96KiB"``; ``ValueError`` naming the value otherwise."""
    if not isinstance(value, str) or len(value) > 200:
        raise ValueError(f"a capability is a string such as 'bf16' or 'shared_memory>=64KiB', got {safe_repr(value)}")
    text = value.strip().lower()
    if text in NAMES:
        return Requirement(text, None, text)
    m = re.match(_SHARED_RE, text)
    if m:
        try:
            size = parse_size(m.group(1))
        except ValueError as exc:
            raise ValueError(f"capability {safe_repr(value)}: {exc}") from None
        return Requirement("shared_memory", size, f"shared_memory>={value.split('=', 1)[1].strip()}")
    raise ValueError(f"unknown capability {safe_repr(value)} (expected one of {', '.join(NAMES)}, "
                     "or shared_memory>=SIZE such as 'shared_memory>=64KiB')")


def parse_list(value: Any) -> list[Requirement]:
    """Comma-separated capabilities (``--gpuenv-require``)."""
    parts = [p for p in str(value).split(",") if p.strip()]
    if not parts:
        raise ValueError(f"no capability in {safe_repr(value)}")
    return [parse(p) for p in parts]


def require_option(value: Any, where: str, modes: tuple[str, ...]) -> str:
    """``--gpuenv-require`` given capabilities: their canonical text; a UsageError naming the value otherwise."""
    import pytest

    try:
        return ",".join(r.text for r in parse_list(value))
    except ValueError as exc:
        raise pytest.UsageError(
            f"gpuenv: invalid --gpuenv-require value {safe_repr(value)} from {where}; expected one of: "
            f"{', '.join(modes)}\n  or GPU capabilities, comma-separated: {exc}"
        ) from None


def row(arch: Optional[str]) -> Optional[ArchCaps]:
    """The table's row for ``arch`` (``gfx90a:xnack-`` and ``sm_90a`` are read as gfx90a and sm_90)."""
    if not arch:
        return None
    a = arch.split(":")[0].strip().lower()
    m = re.match(r"^(sm_\d+)[a-z]?$", a)
    if m:
        a = m.group(1)
    for r in TABLE:
        if any(fnmatch.fnmatchcase(a, p) for p in r.patterns):
            return r
    return None


def _short(arch: str) -> str:
    return arch.split(":")[0]


def lacks(device: Device, req: Requirement, env: GpuEnv) -> Optional[str]:
    """None when ``device`` has the capability; else why not, as ``gfx90a has no fp8 (CDNA2)``."""
    arch = _short(device.arch or "unknown arch")
    if req.name == "peer_access":
        peers = [d for d in env.usable_devices if d.vendor == device.vendor] if env.backend != "cpu" else []
        return None if len(peers) >= 2 else f"{len(peers)} usable {device.vendor.upper()} GPU(s), needs two or more"
    waves = _waves(device)
    if req.name in ("wave32", "wave64"):
        want = int(req.name[4:])
        if waves is None:
            return f"the wavefront size of {arch} is unknown"
        return None if want in waves else f"{arch} runs wave{'/wave'.join(map(str, waves))}"
    if device.arch is None:
        return f"the arch of {device.name or 'the GPU'} is unknown"
    r = row(device.arch)
    if r is None:
        return f"{arch} is not in pytest-gpuenv's capability table"
    return _lacks_in_row(r, req, arch, env)


def _lacks_in_row(r: ArchCaps, req: Requirement, arch: str, env: GpuEnv) -> Optional[str]:
    fam = f"({r.family})"
    name = req.name
    if name in ("fp64", "fp16", "cooperative_launch"):
        return None
    if name == "fp64_full":
        return None if r.fp64_rate == "1/2" else f"{arch} runs fp64 at {r.fp64_rate} of the fp32 rate {fam}"
    if name == "bf16":
        return None if r.bf16 else f"{arch} has no bf16 arithmetic {fam}"
    if name in ("fp8", "fp8_ocp", "fp8_fnuz"):
        if not r.fp8:
            return f"{arch} has no fp8 {fam}"
        kind = name[4:]
        if kind and not any(e.endswith("fnuz") == (kind == "fnuz") for e in r.fp8):
            return f"{arch} has fp8 only as {'/'.join(r.fp8)} {fam}"
        return None
    if name == "int8_dot":
        return None if r.int8_dot else f"{arch} has no int8 dot-product instruction {fam}"
    if name == "matrix_cores":
        return None if r.matrix else f"{arch} has no matrix cores {fam}"
    if name == "tf32":
        return None if r.tf32 else f"{arch} has no tf32 {fam}"
    if name == "ecc":
        if r.ecc:
            return None
        return f"{arch} boards ship with and without ECC; not known for this one {fam}"
    if name == "unified_memory":
        if r.unified is None:
            return f"{arch} has no unified memory {fam}"
        if r.unified == "HMM" and (env.wsl is not None or env.platform != "linux"):
            return f"{arch} pages managed memory on demand only on native Linux {fam}"
        return None
    if name == "shared_memory":
        size = req.size or 0
        what = "LDS" if r.patterns[0].startswith("gfx") else "shared memory"
        return None if r.shared >= size else f"{arch} has {format_size(r.shared)} of {what} per block {fam}"
    return f"{arch}: unknown capability {req.text}"


def _waves(device: Device) -> Optional[tuple[int, ...]]:
    """The wave sizes kernels run at: the device's reported warp size, or the table's where none was."""
    if device.warp_size:
        return (device.warp_size,)
    r = row(device.arch)
    return r.waves if r is not None else None


def missing(env: GpuEnv, reqs: list[Requirement]) -> Optional[str]:
    """None when one usable device has every capability; else the first device's first lack, as
    ``requires fp8: gfx90a has no fp8 (CDNA2)``. The caller handles "no usable GPU"."""
    devs = env.usable_devices if env.backend != "cpu" else []
    first: Optional[str] = None
    for d in devs:
        for req in reqs:
            why = lacks(d, req, env)
            if why is not None:
                first = first or f"requires {req.text}: {why}"
                break
        else:
            return None
    return first


def describe(device: Device, env: GpuEnv) -> str:
    """``gpuenv info``: ``bf16, fp16, fp64 (1/2 rate), fp8 (e4m3/e5m2), ... shared_memory 227.0 KiB``."""
    have = []
    for name in NAMES:
        if name in ("fp8_ocp", "fp8_fnuz", "fp64_full"):
            continue
        if lacks(device, Requirement(name, None, name), env) is None:
            have.append(name)
    r = row(device.arch)
    if r is None:
        return ", ".join(have) + f" (not in the table: {device.arch or 'unknown arch'})"
    details = {"fp64": f" ({r.fp64_rate} rate)", "fp8": f" ({'/'.join(r.fp8)})", "matrix_cores": f" ({r.matrix})"}
    out = [name + details.get(name, "") for name in have]
    out.append(f"shared_memory {format_size(r.shared)}")
    return f"{r.family}: " + ", ".join(out)
