"""HIP's own reading of its environment: clr's flag parser and HIP's device mask.

clr reads every ``HIP_*``/``CUDA_VISIBLE_DEVICES`` variable through ``amd::Flag`` (ROCm/clr
``rocclr/utils/flags.cpp``, the same file in ROCm/rocm-systems ``projects/clr``):

* ``Flag::init`` stores a variable set to the empty string as ``" "`` (clr commit b5799c4,
  "HIP_VISIBLE_DEVICES= should disable the device"): a one-blank value, not the flag's default;
* ``Flag::setValue`` runs ``removeQuotes`` on a string flag (``"1"`` with its quotes reads ``1``) and
  ``atoi`` on an int or uint flag (so ``false``, ``off``, ``no``, ``0x1`` and an empty value all read 0).

HIP then picks ``HIP_VISIBLE_DEVICES`` when its flag value is non-empty, else ``CUDA_VISIBLE_DEVICES``
(``rocclr/device/rocm/rocdevice.cpp`` ``Device::init``; ``pal/paldevice.cpp`` on Windows).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple, Optional, Union

_HIP_INDEX = r"0|[1-9][0-9]{0,9}"  # what clr accepts: str_id == std::to_string(atoi(str_id))
_ATOI = r"[ \t\n\v\f\r]*([+-]?)([0-9]*)"  # strtol(s, NULL, 10): C-locale space, a sign, decimal digits


def remove_quotes(value: str) -> str:
    """clr's ``removeQuotes``: skip leading blanks (``' '`` only); if a ``"`` follows and the last ``"`` is
    followed by blanks only, the text between the first and that last quote; otherwise the value unchanged."""
    p = len(value) - len(value.lstrip(" "))
    if value[p:p + 1] != '"':
        return value
    end = None
    for i in range(p + 1, len(value)):
        if value[i] == '"':
            end = i
        elif end is not None and value[i] != " ":
            end = None
    return value if end is None else value[p + 1:end]


def flag_text(raw: Optional[str]) -> Optional[str]:
    """The text clr's ``Flag::init`` hands ``setValue``: None when unset, ``" "`` for an empty value."""
    if raw is None:
        return None
    return " " if raw == "" else raw


def clr_cstring(raw: Optional[str]) -> str:
    """The value a clr ``cstring`` flag holds (its default ``""`` where the variable is unset)."""
    text = flag_text(raw)
    return "" if text is None else remove_quotes(text)


def clr_uint(raw: Optional[str], default: int) -> int:
    """The value a clr ``uint``/``int`` flag holds: ``*(int*)value_ = atoi(value)`` (glibc: ``(int)strtol``,
    clamped to LONG_MAX/LONG_MIN, then cut to 32 bits)."""
    text = flag_text(raw)
    if text is None:
        return default
    m = re.match(_ATOI, text)
    if m is None or not m.group(2):
        return 0
    sign, digits = m.groups()
    value = 2**63 if len(digits.lstrip("0")) > 20 else int(digits)
    value = min(value, 2**63 - 1) if sign != "-" else -min(value, 2**63)
    value &= 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


class HipMask(NamedTuple):
    """The variable HIP takes its device list from: its name, the value as set, the value clr holds."""

    name: str
    raw: str
    value: str

    @property
    def note(self) -> str:
        """How clr turned ``raw`` into ``value``, where they differ ("" otherwise)."""
        if self.raw == "":
            return "clr stores an empty value as ' ' (Flag::init), which is no device index"
        if self.value != self.raw:
            return f"clr strips the quotes (removeQuotes): {self.value!r}"
        return ""


def hip_mask_source(environ: Any) -> Optional[HipMask]:
    """The mask HIP reads: ``HIP_VISIBLE_DEVICES`` if its flag value is non-empty, else
    ``CUDA_VISIBLE_DEVICES`` if its is (``Device::init``: ``HIP_VISIBLE_DEVICES[0] != '\\0'``). An empty
    variable is ``" "`` to clr, so ``HIP_VISIBLE_DEVICES=`` hides every GPU; only a quoted empty value
    (``'""'``) or an unset variable falls through."""
    for name in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        raw = environ.get(name)
        value = clr_cstring(raw)
        if raw is not None and value:
            return HipMask(name, raw, value)
    return None


def _devices(devices: Union[Sequence[Any], int]) -> list[Optional[str]]:
    if isinstance(devices, int):
        return [None] * max(devices, 0)
    return [d if isinstance(d, str) else getattr(d, "uuid", None) for d in devices]


def pal_uuid(pci: Optional[str]) -> Optional[str]:
    """The string clr's PAL backend (Windows) compares a ``GPU-`` token with (``pal/paldevice.cpp``
    ``parseRequestedDeviceList``): for each byte of the PCI domain, bus, device and function (four little-endian
    uint32), ``itoa((char)byte, &uuid[i], 10)`` at position i, each write over the tail of the one before: the
    first character of each byte's signed decimal, then the whole of the last byte's (16 characters)."""
    m = re.fullmatch(r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])", (pci or "").strip())
    if m is None:
        return None
    raw = b"".join(int(g, 16).to_bytes(4, "little") for g in m.groups())
    out = ""
    for i, byte in enumerate(raw):
        out = out[:i] + str(byte - 256 if byte >= 128 else byte)
    return out


def _getline_split(value: str) -> list[str]:
    tokens = value.split(",")
    return tokens[:-1] if len(tokens) > 1 and tokens[-1] == "" else tokens


def parse_hip(value: str, devices: Union[Sequence[Any], int], windows: bool = False) -> list[int]:
    """Positions in ``devices`` (what ROCr left) that a HIP-level mask selects, as clr reads it.

    ``value`` is the flag's value (``HipMask.value``). Linux, clr ``rocclr/device/rocm/rocdevice.cpp``
    ``Device::init``: tokens split at ``,``; a token holding ``GPU-`` becomes the index of the first device
    whose UUID contains it (case-sensitive); a token must then be exactly a decimal index
    (``str_id == std::to_string(atoi(str_id))``: no sign, space or leading zero) below the device count, else
    it ends the list and the devices already chosen stay; a repeated index is skipped. Windows, clr
    ``rocclr/device/pal/paldevice.cpp`` ``parseRequestedDeviceList``: empty tokens are skipped (``strtok``), a
    ``GPU-`` token names the device whose ``pal_uuid`` equals what follows its first four characters, a
    token must then be ASCII digits, and the chosen devices come in physical order, not the order given.
    """
    uuids = _devices(devices)
    if windows:  # PAL: "GPU-" then its PCI string (pal_uuid), compared whole with what follows the first 4 chars
        uuids = [None if isinstance(d, (int, str)) else pal_uuid(getattr(d, "pci", None))
                 for d in (devices if not isinstance(devices, int) else [])] or uuids
    tokens = [t for t in value.split(",") if t] if windows else _getline_split(value)
    out: list[int] = []
    for token in tokens:
        index = token
        if "GPU-" in token:
            hit = next((i for i, u in enumerate(uuids) if u and (u == token[4:] if windows else token in u)), None)
            index = token if hit is None else str(hit)
        valid = re.fullmatch(r"[0-9]{1,10}" if windows else _HIP_INDEX, index) is not None
        if not valid or int(index) >= len(uuids):
            break
        if int(index) not in out:
            out.append(int(index))
    return sorted(out) if windows else out
