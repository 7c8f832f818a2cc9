"""Parsing and formatting of budgets: times ("250us"), fractions ("10%"), byte counts.

Pure functions; every error is a ``ValueError`` that names the bad value and what was expected.
"""

from __future__ import annotations

import math
import re
from typing import Any, Optional

from pytest_gpuenv.base.model import safe_repr

_TIME_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign
    "\u03bcs": 1e-6,  # greek mu
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
}
_TIME_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z\u00b5\u03bc]+)\s*$")
_PERCENT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*%\s*$")


def printable(text: str) -> str:
    """``text`` with each character that is not printable (control characters, line separators, lone
    surrogates) written as its escape (``\\x1b``, ``\\n``, ``\\u2028``): a measurement's name reaches the
    terminal and JUnit XML, where such a character would act or make the file ill-formed."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _float(value: Any) -> float:
    """A number as a float; an int too large for one (``10**400``) is infinite, so the finiteness checks
    name it instead of ``float()`` raising OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def parse_time(value: Any, what: str = "time budget") -> float:
    """Seconds from ``"250us"``, ``"1.5 ms"``, ``"2s"``, or a plain number of seconds.

    >>> parse_time("250us")
    0.00025
    """
    if _is_number(value):
        seconds = _float(value)
    elif isinstance(value, str):
        m = _TIME_RE.match(value)
        unit = m.group(2).lower() if m else None
        if m is None or unit not in _TIME_UNITS:
            raise ValueError(
                f"invalid {what} {safe_repr(value, 80)}: expected a number with a unit "
                f"(ns, us, ms or s), e.g. '250us' or '1.5ms'"
            )
        seconds = float(m.group(1)) * _TIME_UNITS[unit]
    else:
        raise ValueError(
            f"invalid {what} {safe_repr(value, 80)}: expected a string such as '250us' or seconds as a number"
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"invalid {what} {safe_repr(value, 80)}: must be a positive, finite duration")
    return seconds


_FRACTION_HINT = "expected a percentage such as '10%' or a fraction such as 0.1"


def parse_fraction(value: Any, what: str = "threshold") -> float:
    """A relative amount from ``"10%"`` or ``0.10``; must be positive and finite."""
    if _is_number(value):
        frac = _float(value)
    elif isinstance(value, str):
        m = _PERCENT_RE.match(value)
        if m is None:
            raise ValueError(f"invalid {what} {safe_repr(value, 80)}: {_FRACTION_HINT}")
        frac = float(m.group(1)) / 100.0
    else:
        raise ValueError(f"invalid {what} {safe_repr(value, 80)}: {_FRACTION_HINT}")
    if not math.isfinite(frac) or frac <= 0:
        raise ValueError(f"invalid {what} {safe_repr(value, 80)}: must be positive")
    return frac


def _positive(value: Any) -> Optional[float]:
    """A plain number, positive and finite, as a float; None for anything else."""
    v = _float(value) if _is_number(value) else math.nan
    return v if math.isfinite(v) and v > 0 else None


def check_count(value: Any, what: str) -> Optional[float]:
    """``bytes=``/``flops=``: None, or a positive finite number."""
    if value is None:
        return None
    v = _positive(value)
    if v is None:
        raise ValueError(f"invalid {what}={safe_repr(value, 80)}: expected a positive number (or None)")
    return v


def check_unit_fraction(value: Any, what: str) -> float:
    """``at_least=0.8``: a fraction in (0, 1]."""
    if not _is_number(value) or not (0 < _float(value) <= 1):
        raise ValueError(f"invalid {what}={safe_repr(value, 80)}: expected a fraction in (0, 1], e.g. 0.8")
    return float(value)


def check_ratio(value: Any, what: str) -> float:
    v = _positive(value)
    if v is None:
        raise ValueError(f"invalid {what}={safe_repr(value, 80)}: expected a positive ratio such as 1.2")
    return v


# --------------------------------------------------------------------------- formatting
def _time_unit(seconds: float) -> tuple[str, float]:
    a = abs(seconds)
    if a < 1e-6:
        return "ns", 1e9
    if a < 1e-3:
        return "us", 1e6
    if a < 1.0:
        return "ms", 1e3
    return "s", 1.0


def _decimals(x: float) -> int:
    a = abs(x)
    return 1 if a >= 100 else 2 if a >= 10 else 3


def format_time(seconds: Optional[float]) -> str:
    """``262.1 us``; budgets print without trailing zeros through :func:`format_budget`."""
    if seconds is None:
        return "-"
    unit, scale = _time_unit(seconds)
    v = seconds * scale
    return f"{v:.{_decimals(v)}f} {unit}"


def format_time_interval(lo: Optional[float], hi: Optional[float], like: Optional[float]) -> str:
    """``[259.8, 264.0]`` in the unit of ``like`` (the median), so the three read together."""
    if lo is None or hi is None:
        return "-"
    unit, scale = _time_unit(like if like else hi)
    d = _decimals(like * scale if like else hi * scale)
    return f"[{lo * scale:.{d}f}, {hi * scale:.{d}f}]"


def format_budget(seconds: float) -> str:
    unit, scale = _time_unit(seconds)
    return f"{seconds * scale:.6g} {unit}"


def format_rate(value: Optional[float], unit: str) -> str:
    """``4.25 TB/s`` or ``61.3 TFLOP/s``."""
    if value is None:
        return "-"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"
