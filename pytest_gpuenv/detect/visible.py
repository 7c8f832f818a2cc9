"""Visible-devices variables, parsed the way each runtime parses them (DETECTION.md section 5).

Three parsers, one per reader:

* ``parse_visible``: torch's ``_parse_visible_devices`` / ``_transform_uuid_to_ordinals``. It is how
  CUDA's ``CUDA_VISIBLE_DEVICES`` is read on NVIDIA, and on ROCm it is what ``torch.cuda.device_count()``
  answers before HIP starts: an empty string means no device; entries are indices or ``GPU-``/``MIG-``
  UUID prefixes; the first invalid, negative or out-of-range entry ends the list; a repeated device or
  an ambiguous UUID prefix empties it.
* ``parse_rocr``: ROCr's ``RvdFilter`` (ROCR-Runtime ``core/runtime/amd_filter_device.cpp``) for
  ``ROCR_VISIBLE_DEVICES``.
* ``parse_hip`` (``_hipmask``): clr's ``Device::init`` for ``HIP_VISIBLE_DEVICES``, or
  ``CUDA_VISIBLE_DEVICES`` when HIP's is unset (an empty one hides every GPU: clr stores it as ``" "``).
  HIP indexes into what ROCr left. ``GPU_DEVICE_ORDINAL`` is read by OpenCL only, never by HIP.

On AMD the model follows the runtime (ROCr, then HIP); where torch's parser counts differently, a
``visible-devices-torch-differs`` problem names both readings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Optional, Union

from pytest_gpuenv.base.model import NO_UNIQUE_UUID, Device, Problem
from pytest_gpuenv.detect._hipmask import HipMask, hip_mask_source, parse_hip

__all__ = ["hip_mask_source", "parse_hip", "parse_rocr", "parse_visible"]

#: the variables the detector reports in ``GpuEnv.visible``
VARS = (
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "CUDA_DEVICE_ORDER",
    "HSA_OVERRIDE_GFX_VERSION",
)
MASK_VARS = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")

_C_SPACE = " \t\n\v\f\r"  # isspace() in the C locale
#: patterns as text, compiled by ``re`` on first use (most detections read no mask)
_STRTOL = r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)"


def _strtoul(s: str) -> int:
    """torch's ``_strtoul``: the leading integer of ``s``, or -1."""
    if not s:
        return -1
    end = 0  # the leading number, as strtol reads it: an optional sign, then digits
    while end < len(s) and (s[end].isdigit() or (end == 0 and s[end] in "+-")):
        end += 1
    try:
        return int(s[:end]) if end > 0 else -1
    except ValueError:
        return -1


def _devices(devices: Union[Sequence[Any], int]) -> list[Optional[str]]:
    """The UUIDs of ``devices`` (Device or str; None where unknown), or that many Nones for a count."""
    if isinstance(devices, int):
        return [None] * max(devices, 0)
    return [d if isinstance(d, str) else getattr(d, "uuid", None) for d in devices]


def parse_visible(
    value: Optional[str], devices: Union[Sequence[Any], int], mixed: bool = False
) -> Optional[list[int]]:
    """Positions in ``devices`` that a visible-devices value selects as torch reads it, in the order given.

    ``devices`` is a sequence of :class:`Device` (or UUID strings), or a device count when only
    indices matter. ``None`` (variable unset) returns ``None``: no mask. As in torch, the first entry
    decides whether the list holds UUIDs or indices (an entry of the other kind ends it);
    ``mixed=True`` accepts both in one list.
    """
    if value is None:
        return None
    uuids = _devices(devices)
    count = len(uuids)
    text = value.strip()
    if text == "":
        return []
    out: list[int] = []
    uuid_list = text[:4].upper() in ("GPU-", "MIG-")
    for raw in text.split(","):
        elem = raw.strip()
        is_uuid = elem[:4].upper() in ("GPU-", "MIG-")
        if not mixed and is_uuid != uuid_list:
            break
        if is_uuid:
            idx = _match_uuid(elem, uuids)
            if idx == -2:  # ambiguous prefix: torch returns an empty list
                return []
            if idx < 0:
                break
        else:
            idx = _strtoul(elem)
            if idx < 0 or idx >= count:
                break
        if idx in out:
            return []
        out.append(idx)
    return out


def _match_uuid(elem: str, uuids: list[Optional[str]]) -> int:
    cand = elem.lower()
    if cand.startswith("mig-"):
        # MIG-GPU-<uuid>/<gi>/<ci> (old form) names the parent GPU; the new MIG-<uuid> form needs
        # the CUDA runtime to resolve, so it matches nothing here.
        rest = cand[4:].split("/")[0]
        if not rest.startswith("gpu-"):
            return -1
        cand = rest
    hits = [i for i, u in enumerate(uuids) if u and u.lower().startswith(cand)]
    if len(hits) > 1:
        return -2
    return hits[0] if hits else -1


# ------------------------------------------------------------------------------------------ ROCr
def _c_upper(s: str) -> str:
    """``toupper`` in the C locale: ASCII letters only."""
    return "".join(chr(ord(c) - 32) if "a" <= c <= "z" else c for c in s)


def _getline_split(value: str) -> list[str]:
    """``std::getline(stream, token, ',')`` tokens: a trailing separator makes no empty last token."""
    tokens = value.split(",")
    return tokens[:-1] if len(tokens) > 1 and tokens[-1] == "" else tokens


def _strtol0(token: str) -> Optional[int]:
    """``(int32_t)strtol(token, &end, 0)`` where the whole token is consumed, else None."""
    m = re.fullmatch(_STRTOL, token.lstrip(_C_SPACE))
    if m is None:
        return None
    sign, digits = m.groups()
    if len(digits.lstrip("0xX")) > 40:  # far past LONG_MAX: strtol clamps (and int() would refuse)
        value = 2**63
    else:
        value = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits, 8 if digits[0] == "0" else 10)
    value = min(value, 2**63 - 1) if sign != "-" else -min(value, 2**63)  # LONG_MAX / LONG_MIN
    value &= 0xFFFFFFFF  # the int32_t devIdx
    return value - 2**32 if value >= 2**31 else value


def _rocr_uuid(u: Optional[str]) -> str:
    """ROCr's ``BuildDeviceUuidList`` string: ``GPU-<16 hex>`` upper-cased, ``Invalid-UUID`` for id 0."""
    return "Invalid-UUID" if not u or u == NO_UNIQUE_UUID else _c_upper(u)


def parse_rocr(value: Optional[str], devices: Union[Sequence[Any], int]) -> Optional[list[int]]:
    """Positions in ``devices`` (ROCr's GPU order) that ``ROCR_VISIBLE_DEVICES`` surfaces, in its order.

    Follows ROCR-Runtime ``amd_filter_device.cpp``: an empty value selects no device
    (``SelectZeroDevices``); tokens are upper-cased and trimmed (``BuildRvdTokenList``); only the first
    ``len(devices)`` tokens are read; a token starting with ``G`` is a UUID prefix of 5-20 characters
    that must match exactly one device (``ProcessUuidToken``), any other is ``strtol(token, &end, 0)``
    that must consume the whole token (``0x1`` is device 1, ``010`` device 8); the first invalid,
    out-of-range, repeated or ambiguous token ends the list and the devices already chosen stay
    (``BuildUsrDeviceList``). An empty token makes ``token.at(0)`` throw, so ``hsa_init`` fails: no device.
    """
    if value is None:
        return None
    if value == "":
        return []
    uuids = [_rocr_uuid(u) for u in _devices(devices)]
    out: list[int] = []
    for raw in _getline_split(value)[: len(uuids)]:
        token = _c_upper(raw).strip(_C_SPACE)
        if token == "":
            return []
        if token[0] == "G":
            hits = [i for i, u in enumerate(uuids) if 5 <= len(token) <= 20 and u.startswith(token)]
            idx: Optional[int] = hits[0] if len(hits) == 1 else None
        else:
            idx = _strtol0(token)
        if idx is None or not 0 <= idx < len(uuids) or idx in out:
            break
        out.append(idx)
    return out


def _torch_count(environ: Any, devices: list[Device]) -> Optional[int]:
    """What ``torch.cuda.device_count()`` of a ROCm build answers before HIP starts (torch/cuda/__init__.py
    ``_parse_visible_devices`` and ``_device_count_amdsmi``); None where torch raises."""
    rocr, hip, cuda = (environ.get(k) for k in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"))
    if rocr is not None and hip is None:
        return min(len(rocr.split(",")), len(devices))
    if rocr is not None and hip is not None and len(hip.split(",")) > len(rocr.split(",")):
        return None
    var = hip if hip is not None else cuda
    return len(devices) if var is None else len(parse_visible(var, devices) or [])


def _torch_reading(environ: Any) -> str:
    rocr, hip, cuda = (environ.get(k) for k in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"))
    if rocr is not None and hip is None:
        return f"only the number of entries in ROCR_VISIBLE_DEVICES={rocr!r}"
    if hip is not None:
        return f"HIP_VISIBLE_DEVICES={hip!r}"
    return "no variable" if cuda is None else f"CUDA_VISIBLE_DEVICES={cuda!r}"


def _hip_reading(environ: Any, source: Optional[HipMask], rocr_applied: bool) -> str:
    text = "no HIP-level mask" if source is None else f"{source.name}={source.raw!r}"
    if source is not None and source.note:
        text += f" ({source.note})"
    if rocr_applied:
        text += f" within ROCR_VISIBLE_DEVICES={environ.get('ROCR_VISIBLE_DEVICES')!r}"
    return text


# ----------------------------------------------------------------------------------- the masks
def visible_vars(environ: Any) -> dict[str, str]:
    return {k: environ[k] for k in VARS if k in environ}


def apply_masks(
    devices: list[Device], vendor: str, environ: Any, platform: str, dropped: Optional[dict[int, str]] = None
) -> tuple[list[Device], list[Device], list[Problem], list[str]]:
    """Apply the masks of ``vendor``'s runtime to ``devices`` (physical order).

    ``dropped``: physical indices of the AMD GPUs ROCr leaves out after its mask (``_rocr.agent_check``).
    Returns (visible devices re-indexed, hidden devices, problems, evidence).
    """
    dropped = dropped or {}
    problems: list[Problem] = []
    evidence: list[str] = []
    if not devices:
        return devices, [], problems, evidence
    if vendor == "amd":
        order, used, culprit = _amd_masks(devices, environ, platform, problems, evidence, dropped)
    else:
        order, used, culprit = _cuda_mask(devices, environ, evidence)
    if not used and not dropped:
        for i, d in enumerate(devices):
            d.index = i
            d.physical_index = i if d.physical_index is None else d.physical_index
        return devices, [], problems, evidence
    visible = []
    for new, phys in enumerate(order):
        d = devices[phys]
        d.index = new
        visible.append(d)
    hidden = []
    masks = ", ".join(f"{n}={v!r}" for n, v in used)
    for i, d in enumerate(devices):
        if i not in order:
            d.index = d.physical_index if d.physical_index is not None else i
            d.usable = False
            d.unusable_reason = dropped.get(i, f"hidden by {masks}")
            hidden.append(d)
    if not visible and used and (culprit or not dropped):
        name, value = culprit[0] if culprit else used[-1]
        why = " (HIP reads an empty value as ' ', which is no device index)" if (
            value == "" and name != "ROCR_VISIBLE_DEVICES" and vendor == "amd") else ""
        problems.append(Problem("visible-devices-hide-all",
                                f"0 GPUs visible: {name}='{value}' hides all {len(devices)} detected device(s){why}",
                                fix=f"unset {name} or list a device index (e.g. {name}=0)", severity="error",
                                category="visibility"))
    return visible, hidden, problems, evidence


_Masks = tuple[list[int], list[tuple[str, str]], list[tuple[str, str]]]


def _cuda_mask(devices: list[Device], environ: Any, evidence: list[str]) -> _Masks:
    """(physical positions visible, (variable, value) used, the variable that left no device)."""
    cuda = environ.get("CUDA_VISIBLE_DEVICES")
    if cuda is None:
        return list(range(len(devices))), [], []
    order = parse_visible(cuda, devices) or []
    evidence.append(f"CUDA_VISIBLE_DEVICES={cuda!r}: visible physical {order}")
    used = [("CUDA_VISIBLE_DEVICES", cuda)]
    return order, used, [] if order else used


def _amd_masks(devices: list[Device], environ: Any, platform: str, problems: list[Problem],
               evidence: list[str], dropped: dict[int, str]) -> _Masks:
    """ROCr's mask (not on Windows, where there is no ROCr), then HIP's, which indexes into what ROCr left."""
    order = list(range(len(devices)))
    used: list[tuple[str, str]] = []
    culprit: list[tuple[str, str]] = []  # the first variable that left no device
    rocr = environ.get("ROCR_VISIBLE_DEVICES")
    rocr_applied = rocr is not None and platform != "windows"
    if rocr is not None and rocr_applied:
        order = parse_rocr(rocr, devices) or []
        used.append(("ROCR_VISIBLE_DEVICES", rocr))
        if not order:
            culprit.append(used[-1])
        evidence.append(f"ROCR_VISIBLE_DEVICES={rocr!r}: ROCr surfaces physical {order}")
    if dropped:  # after the ROCr ranks are taken (amd_topology.cpp BuildTopology, then DiscoverGpu)
        order = [i for i in order if i not in dropped]
        evidence.append(f"ROCr drops physical {sorted(dropped)} (ISA not in its registry): HIP sees physical {order}")
    source = hip_mask_source(environ)
    if source is not None:
        subset = [devices[i] for i in order]
        order = [order[i] for i in parse_hip(source.value, subset, windows=platform == "windows")]
        used.append((source.name, source.raw))
        if not order and not culprit:
            culprit.append(used[-1])
        note = f" ({source.note})" if source.note else ""
        evidence.append(f"{source.name}={source.raw!r}{note}: HIP indexes into {len(subset)} device(s) -> "
                        f"physical {order}")
    if "GPU_DEVICE_ORDINAL" in environ:
        evidence.append(f"GPU_DEVICE_ORDINAL={environ['GPU_DEVICE_ORDINAL']!r}: read by OpenCL only, not by HIP")
    if not dropped:  # else rocr-isa-unsupported says why the counts differ
        problems.extend(_amd_problems(environ, devices, source, rocr_applied, len(order)))
    return order, used, culprit


def _amd_problems(environ: Any, devices: list[Device], source: Optional[HipMask], rocr_applied: bool,
                  seen: int) -> list[Problem]:
    """Warnings about the AMD masks: torch reads them differently; CUDA_VISIBLE_DEVICES selects AMD GPUs."""
    out = []
    rocr, hip = environ.get("ROCR_VISIBLE_DEVICES"), environ.get("HIP_VISIBLE_DEVICES")
    if rocr_applied and rocr is not None and hip is not None and len(hip.split(",")) > len(rocr.split(",")):
        out.append(Problem(
            "hip-visible-exceeds-rocr",
            f"HIP_VISIBLE_DEVICES={hip!r} lists more devices than ROCR_VISIBLE_DEVICES={rocr!r}; HIP indexes into "
            "the ROCr-visible set, and torch.cuda.device_count() raises 'HIP_VISIBLE_DEVICES contains more "
            "devices than ROCR_VISIBLE_DEVICES'.",
            fix="set only one of the two, or make HIP_VISIBLE_DEVICES index into ROCR's list "
            "(e.g. ROCR_VISIBLE_DEVICES=2,3 HIP_VISIBLE_DEVICES=0)", severity="warning", category="visibility"))
    if source is not None and source.name == "CUDA_VISIBLE_DEVICES":
        out.append(Problem(
            "cuda-visible-devices-on-rocm",
            f"CUDA_VISIBLE_DEVICES={source.raw!r} is used to select AMD GPUs; HIP reads it when "
            "HIP_VISIBLE_DEVICES is unset, but newer HIP documentation no longer lists it.",
            fix="use HIP_VISIBLE_DEVICES (or ROCR_VISIBLE_DEVICES) to select AMD GPUs", severity="warning",
            category="visibility"))
    torch = _torch_count(environ, devices)
    if torch is not None and torch != seen:
        out.append(Problem(
            "visible-devices-torch-differs",
            f"HIP reads {_hip_reading(environ, source, rocr_applied)} and sees {seen} GPU(s); torch's parser "
            f"(torch.cuda.device_count() before HIP starts) reads {_torch_reading(environ)} and counts {torch}. "
            "pytest-gpuenv follows HIP.",
            fix="give HIP_VISIBLE_DEVICES a non-empty list of distinct indices, or unset it and use "
            "ROCR_VISIBLE_DEVICES alone", severity="warning", category="visibility"))
    return out


def amd_worker_masks(devices: Sequence[Device], visible: dict[str, str], platform: str,
                     picked: Sequence[Device], dropped: Sequence[int] = ()) -> dict[str, str]:
    """The variables an xdist worker sets so that HIP, with the masks in force, sees exactly ``picked``.

    ``devices``: every AMD device of the model (visible and hidden, with ``physical_index``); ``visible``:
    the masks in force (``GpuEnv.visible``). The worker keeps ``ROCR_VISIBLE_DEVICES`` and sets
    ``HIP_VISIBLE_DEVICES`` (which HIP reads first) to the picked devices' indices in what ROCr surfaces;
    where ``CUDA_VISIBLE_DEVICES`` was set it gets the same value, so that no reader sees the user's wider list.
    ``dropped``: the physical indices ROCr leaves out after its mask (``GpuEnv.rocm["rocr_dropped"]``), which
    HIP's ordinals skip.
    """
    phys = sorted({d.physical_index: d for d in devices if d.physical_index is not None}.items())
    rocr = visible.get("ROCR_VISIBLE_DEVICES")
    if rocr is not None and platform != "windows":
        surfaced = [phys[p][0] for p in parse_rocr(rocr, [d for _p, d in phys]) or []]
    else:
        surfaced = [p for p, _d in phys]
    rank = {p: r for r, p in enumerate(p for p in surfaced if p not in set(dropped))}
    value = ",".join(str(rank.get(d.physical_index, d.index) if d.physical_index is not None else d.index)
                     for d in picked)
    out = {"HIP_VISIBLE_DEVICES": value}
    if "CUDA_VISIBLE_DEVICES" in visible:
        out["CUDA_VISIBLE_DEVICES"] = value
    return out
