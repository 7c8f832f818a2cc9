"""Visible-devices variables, parsed the way the frameworks parse them (DETECTION.md section 5).

``parse_visible`` follows torch's ``_parse_visible_devices`` / ``_transform_uuid_to_ordinals``:
an empty string means no device; entries are indices or ``GPU-``/``MIG-`` UUID prefixes; the first
invalid, negative or out-of-range entry ends the list; a repeated device empties it; an ambiguous
UUID prefix empties it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, Union

from pytest_gpuenv.model import Device, Problem

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


def _strtoul(s: str) -> int:
    """torch's ``_strtoul``: the leading integer of ``s``, or -1."""
    if not s:
        return -1
    idx = 0
    for idx, c in enumerate(s):
        if not (c.isdigit() or (idx == 0 and c in "+-")):
            break
        if idx + 1 == len(s):
            idx += 1
    try:
        return int(s[:idx]) if idx > 0 else -1
    except ValueError:
        return -1


def _uuid_of(d: Any) -> Optional[str]:
    if isinstance(d, str):
        return d
    return getattr(d, "uuid", None)


def parse_visible(
    value: Optional[str], devices: Union[Sequence[Any], int], mixed: bool = False
) -> Optional[list[int]]:
    """Positions in ``devices`` that a visible-devices value selects, in the order given.

    ``devices`` is a sequence of :class:`Device` (or UUID strings), or a device count when only
    indices matter. ``None`` (variable unset) returns ``None``: no mask. As in torch, the first entry
    decides whether the list holds UUIDs or indices (an entry of the other kind ends it);
    ``mixed=True`` accepts both in one list, as ROCR_VISIBLE_DEVICES does.
    """
    if value is None:
        return None
    uuids: list[Optional[str]]
    if isinstance(devices, int):
        count, uuids = devices, [None] * max(devices, 0)
    else:
        uuids = [_uuid_of(d) for d in devices]
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


def visible_vars(environ: Any) -> dict[str, str]:
    return {k: environ[k] for k in VARS if k in environ}


def apply_masks(
    devices: list[Device], vendor: str, environ: Any, platform: str
) -> tuple[list[Device], list[Device], list[Problem], list[str]]:
    """Apply the masks of ``vendor``'s runtime to ``devices`` (physical order).

    Returns (visible devices re-indexed, hidden devices, problems, evidence).
    """
    problems: list[Problem] = []
    evidence: list[str] = []
    if not devices:
        return devices, [], problems, evidence
    if vendor == "amd":
        order, used, culprit = _amd_masks(devices, environ, platform, problems, evidence)
    else:
        order, used, culprit = _cuda_mask(devices, environ, evidence)
    if not used:
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
            d.unusable_reason = f"hidden by {masks}"
            hidden.append(d)
    if not visible:
        name, value = culprit[0] if culprit else used[-1]
        problems.append(
            Problem(
                "visible-devices-hide-all",
                f"0 GPUs visible: {name}='{value}' hides all {len(devices)} detected device(s)",
                fix=f"unset {name} or list a device index (e.g. {name}=0)",
                severity="error",
                category="visibility",
            )
        )
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
               evidence: list[str]) -> _Masks:
    """ROCr's mask (not on Windows), then HIP's, which indexes into what ROCr left."""
    order = list(range(len(devices)))
    used: list[tuple[str, str]] = []
    culprit: list[tuple[str, str]] = []  # the first variable that left no device
    rocr = environ.get("ROCR_VISIBLE_DEVICES")
    if rocr is not None and platform != "windows":
        sel = parse_visible(rocr, devices, mixed=True)
        order = [order[i] for i in sel or []]
        used.append(("ROCR_VISIBLE_DEVICES", rocr))
        if not order:
            culprit.append(used[-1])
        evidence.append(f"ROCR_VISIBLE_DEVICES={rocr!r}: ROCr sees physical {order}")
    second = _hip_mask(environ, rocr, platform, problems)
    if second is not None:
        name, value = second
        subset = [devices[i] for i in order]
        sel = parse_visible(value, subset)
        order = [order[i] for i in sel or []]
        used.append((name, value))
        if not order and not culprit:
            culprit.append(used[-1])
        evidence.append(f"{name}={value!r}: indexes into {len(subset)} device(s) -> physical {order}")
    return order, used, culprit


def _hip_mask(environ: Any, rocr: Optional[str], platform: str, problems: list[Problem]) -> Optional[tuple[str, str]]:
    """HIP's mask: HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES (without ROCr's), else GPU_DEVICE_ORDINAL."""
    hip = environ.get("HIP_VISIBLE_DEVICES")
    cuda = environ.get("CUDA_VISIBLE_DEVICES")
    if hip is not None:
        if rocr is not None and platform != "windows" and len(hip.split(",")) > len(rocr.split(",")):
            problems.append(
                Problem(
                    "hip-visible-exceeds-rocr",
                    f"HIP_VISIBLE_DEVICES={hip!r} lists more devices than ROCR_VISIBLE_DEVICES={rocr!r}; "
                    "HIP indexes into the ROCr-visible set, and torch.cuda.device_count() raises "
                    "'HIP_VISIBLE_DEVICES contains more devices than ROCR_VISIBLE_DEVICES'.",
                    fix="set only one of the two, or make HIP_VISIBLE_DEVICES index into ROCR's list "
                    "(e.g. ROCR_VISIBLE_DEVICES=2,3 HIP_VISIBLE_DEVICES=0)",
                    severity="warning",
                    category="visibility",
                )
            )
        return "HIP_VISIBLE_DEVICES", hip
    if cuda is not None and rocr is None:
        problems.append(
            Problem(
                "cuda-visible-devices-on-rocm",
                f"CUDA_VISIBLE_DEVICES={cuda!r} is used to select AMD GPUs; HIP honours it in ROCm 6.x, "
                "but newer HIP documentation no longer lists it.",
                fix="use HIP_VISIBLE_DEVICES (or ROCR_VISIBLE_DEVICES) to select AMD GPUs",
                severity="warning",
                category="visibility",
            )
        )
        return "CUDA_VISIBLE_DEVICES", cuda
    gdo = environ.get("GPU_DEVICE_ORDINAL")
    return None if gdo is None else ("GPU_DEVICE_ORDINAL", gdo)
