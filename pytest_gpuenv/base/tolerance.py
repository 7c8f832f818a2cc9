"""``gpu_assert_close``: ``rtol``/``atol`` from a profile keyed by dtype, vendor and arch.

The base is ``torch.testing.assert_close``'s documented defaults per dtype (``torch/testing/_comparison.py``
``_DTYPE_PRECISIONS``; https://docs.pytorch.org/docs/stable/testing.html): float16 1e-3/1e-5, bfloat16
1.6e-2/1e-5, float32 1.3e-6/1e-5, float64 1e-7/1e-7, complex likewise. What differs on GPUs (``BUILTIN``):

- fp8 (torch has no default): rtol one unit in the last place (2**-3 for e4m3, 2**-2 for e5m2), atol the
  smallest normal of the encoding (OCP e4m3fn 2**-6, e5m2 2**-14; FNUZ one binade lower).
- TF32 on sm_80+ (and xf32 on gfx94x): float32 at rtol=atol=1e-3 (PyTorch's own tests use
  ``tf32_on_and_off(0.001)``), applied only while TF32 is on for matmuls in this process
  (``torch.backends.cuda.matmul.allow_tf32`` or ``torch.get_float32_matmul_precision() != "highest"``) for a
  tensor on such a GPU; ``tf32=True`` forces it (cuDNN convolutions use TF32 by default).
- CDNA1/CDNA2 MFMA (gfx908, gfx90a): fp16 GEMMs and convolutions flush denormal inputs and outputs to zero
  (PyTorch "Numerical accuracy", "Reduced Precision FP16 and BF16 GEMMs and Convolutions on AMD Instinct
  MI200 devices"), so float16's atol is the smallest normal, 2**-14.

Overrides, lowest to highest: ini ``gpuenv_tolerances`` (lines ``DTYPE [ARCH|VENDOR]: rtol=X atol=Y``, later
lines win), the ``@gpuenv_tolerance(dtype=..., rtol=..., atol=..., arch=...)`` marker (the fixture reads both),
then the call's ``rtol=``/``atol=``. The profile is the actual's dtype (the expected may be a float64
reference). torch is imported only when given a tensor, numpy only when given anything else.
"""

from __future__ import annotations

import contextlib
import fnmatch
import re
import sys
from typing import Any, Iterable, NamedTuple, Optional

from pytest_gpuenv.base.model import ArchPattern, safe_repr

#: torch.testing.assert_close's defaults (torch/testing/_comparison.py _DTYPE_PRECISIONS): dtype -> (rtol, atol)
TORCH_DEFAULTS = {
    "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7),
    "complex32": (1e-3, 1e-5), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7),
}
_ALIASES = {"half": "float16", "fp16": "float16", "bf16": "bfloat16", "float": "float32", "fp32": "float32",
            "double": "float64", "fp64": "float64", "fp8": "float8*"}


class Rule(NamedTuple):
    """One line of a profile: for dtypes matching ``dtype`` (a glob) where ``where`` holds (None: anywhere;
    "amd", "nvidia", "cpu"; or an ArchPattern), these ``rtol``/``atol`` (None: not set here). ``source``:
    default, built-in, ini, marker or call; ``label`` says why or where."""

    dtype: str
    where: Any
    rtol: Optional[float]
    atol: Optional[float]
    source: str
    label: str
    tf32: bool = False

    def applies(self, dtype: str, vendor: str, arch: Optional[str], tf32: bool) -> bool:
        if not fnmatch.fnmatchcase(dtype, self.dtype) or (self.tf32 and not tf32):
            return False
        if self.where is None:
            return True
        if isinstance(self.where, ArchPattern):
            return self.where.matches(arch)
        return bool(self.where == vendor)


_TF32 = "TF32 matmul on"
BUILTIN = (
    Rule("float8_e4m3fn", None, 2**-3, 2**-6, "built-in", "fp8 e4m3 (OCP): 1 ulp relative, smallest normal"),
    Rule("float8_e4m3fnuz", None, 2**-3, 2**-7, "built-in", "fp8 e4m3 (FNUZ): 1 ulp relative, smallest normal"),
    Rule("float8_e5m2", None, 2**-2, 2**-14, "built-in", "fp8 e5m2 (OCP): 1 ulp relative, smallest normal"),
    Rule("float8_e5m2fnuz", None, 2**-2, 2**-15, "built-in", "fp8 e5m2 (FNUZ): 1 ulp relative, smallest normal"),
    Rule("float32", ArchPattern("sm_80+"), 1e-3, 1e-3, "built-in", f"{_TF32} (sm_80+ tensor cores)", tf32=True),
    Rule("float32", ArchPattern("gfx94?"), 1e-3, 1e-3, "built-in", f"{_TF32} (xf32 MFMA, CDNA3)", tf32=True),
    Rule("float16", ArchPattern("gfx908"), None, 2**-14, "built-in", "CDNA1 MFMA flushes fp16 denormals"),
    Rule("float16", ArchPattern("gfx90a"), None, 2**-14, "built-in", "CDNA2 MFMA flushes fp16 denormals"),
)


def canonical_dtype(name: str) -> str:
    n = name.strip().lower().removeprefix("torch.")
    return _ALIASES.get(n, n)


def _tol(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{what} must be a number, got {safe_repr(value)}")
    try:
        v = float(value) if len(str(value)) <= 50 else -1.0
    except ValueError:
        v = -1.0
    if not (0 <= v < float("inf")):
        raise ValueError(f"{what} must be a finite number >= 0, got {safe_repr(value)}")
    return v


def _where(text: Optional[str]) -> Any:
    if text is None or text in ("", "*"):
        return None
    if text.lower() in ("amd", "nvidia", "cpu"):
        return text.lower()
    return ArchPattern.parse(text)


def rule(dtype: Any = "*", rtol: Any = None, atol: Any = None, arch: Any = None, *, source: str,
         label: str) -> Rule:
    """A checked Rule; ``ValueError`` naming the bad value."""
    if not isinstance(dtype, str) or not dtype.strip() or len(dtype) > 60:
        raise ValueError(f"dtype must be a dtype name such as 'float16' or a glob such as 'float*', got "
                         f"{safe_repr(dtype)}")
    if rtol is None and atol is None:
        raise ValueError("give rtol, atol or both")
    if arch is not None and not isinstance(arch, str):
        raise ValueError(f"arch must be an arch pattern or amd/nvidia/cpu, got {safe_repr(arch)}")
    r = None if rtol is None else _tol(rtol, "rtol")
    a = None if atol is None else _tol(atol, "atol")
    return Rule(canonical_dtype(dtype), _where(arch), r, a, source, label)


_LINE = r"^\s*(\S+)(?:\s+(\S+))?\s*:\s*(.*)$"


def parse_ini(lines: Iterable[Any], where: str) -> list[Rule]:
    """``gpuenv_tolerances`` lines; ``ValueError`` naming the line and ``where``."""
    out = []
    for n, line in enumerate(lines, 1):
        text = str(line)
        if not text.strip() or text.strip().startswith("#"):
            continue
        m = re.match(_LINE, text) if len(text) <= 300 else None
        try:
            if not m:
                raise ValueError("expected 'DTYPE [ARCH]: rtol=X atol=Y'")
            values: dict[str, str] = {}
            for part in m.group(3).replace(",", " ").split():
                key, eq, val = part.partition("=")
                if not eq or key not in ("rtol", "atol") or key in values:
                    raise ValueError(f"unexpected {safe_repr(part)} (expected rtol=X and/or atol=Y)")
                values[key] = val
            out.append(rule(m.group(1), values.get("rtol"), values.get("atol"), m.group(2), source="ini",
                            label=f"{where} line {n}: {text.strip()!r}"))
        except ValueError as exc:
            raise ValueError(f"invalid line {safe_repr(text)} in {where}: {exc}") from None
    return out


def ini_rules(lines: Any, where: str) -> list[Rule]:
    """The ini option's rules; a ``pytest.UsageError`` naming the bad line."""
    import pytest

    try:
        return parse_ini(lines if isinstance(lines, list) else str(lines).splitlines(), where)
    except ValueError as exc:
        raise pytest.UsageError(f"gpuenv: {exc}") from None


class Context(NamedTuple):
    """Where the compared values live: ``vendor`` ("amd", "nvidia", "cpu"), ``arch``, and whether TF32 is on."""

    vendor: str
    arch: Optional[str]
    tf32: bool


def _is_tensor(x: Any) -> bool:
    return "torch" in sys.modules and isinstance(x, sys.modules["torch"].Tensor)


def context_of(x: Any, arch: Optional[str] = None, tf32: Optional[bool] = None) -> Context:
    """The device of a tensor (torch's answer: ``sm_XY`` or ``gcnArchName``); "cpu" for anything else."""
    if not _is_tensor(x) or x.device.type != "cuda":
        return Context("cpu", arch, bool(tf32))
    import torch

    vendor = "amd" if getattr(torch.version, "hip", None) else "nvidia"
    if arch is None:
        props = torch.cuda.get_device_properties(x.device)
        arch = (str(props.gcnArchName).split(":")[0] if vendor == "amd" else f"sm_{props.major}{props.minor}")
    if tf32 is None:
        tf32 = bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"
    return Context(vendor, arch, tf32)


class Profile(NamedTuple):
    """The tolerances chosen for one comparison and where each came from."""

    dtype: str
    rtol: float
    atol: float
    rtol_from: str
    atol_from: str
    ctx: Context

    def describe(self) -> str:
        on = self.ctx.arch or self.ctx.vendor
        src = (f"rtol and atol from {self.rtol_from}" if self.rtol_from == self.atol_from
               else f"rtol from {self.rtol_from}; atol from {self.atol_from}")
        return f"profile {self.dtype} on {on}: rtol={self.rtol:.3g}, atol={self.atol:.3g} ({src})"


def choose(dtype: str, ctx: Context, rules: Iterable[Rule] = ()) -> Profile:
    """The profile for ``dtype``: the highest matching rule for each of rtol/atol (``rules`` lowest first,
    after the built-in ones), over torch's default (0/0, exact, for integers and bool)."""
    base = TORCH_DEFAULTS.get(dtype)
    rtol, atol = base if base is not None else (0.0, 0.0)
    origin = f"torch.testing default for {dtype}" if base is not None else f"exact for {dtype}"
    r_from = a_from = origin
    for rl in list(BUILTIN) + list(rules):
        if rl.applies(dtype, ctx.vendor, ctx.arch, ctx.tf32):
            label = f"{rl.source}: {rl.label}"
            if rl.rtol is not None:
                rtol, r_from = rl.rtol, label
            if rl.atol is not None:
                atol, a_from = rl.atol, label
    return Profile(dtype, rtol, atol, r_from, a_from, ctx)


def dtype_name(x: Any) -> str:
    """The canonical dtype name of a tensor or array (``float16``, ``bfloat16``, ``int64``)."""
    return canonical_dtype(str(x.dtype) if _is_tensor(x) else x.dtype.name)


def is_floating(name: str) -> bool:
    return name.startswith(("float", "bfloat", "complex"))


def _as_wide(x: Any, like_tensor: bool) -> Any:
    """float64 (complex128) on the CPU, as a torch tensor or a numpy array."""
    if like_tensor:
        import torch

        t = x.detach().cpu() if _is_tensor(x) else torch.as_tensor(x)
        return t.to(torch.complex128 if t.is_complex() else torch.float64)
    import numpy as np

    a = np.asarray(x)
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)


def compare(actual: Any, expected: Any, rules: Iterable[Rule] = (), *, rtol: Any = None, atol: Any = None,
            equal_nan: bool = False, arch: Optional[str] = None, tf32: Optional[bool] = None,
            msg: Optional[str] = None, dtype: Any = None) -> Profile:
    """Assert closeness under the chosen profile (AssertionError naming it, the worst element and its
    index); returns the profile. ``rules``: ini and marker rules, lowest first. ``dtype``: the profile's dtype
    (a name or a torch dtype) when not the actual's (a result computed in bfloat16 and compared as float32)."""
    __tracebackhide__ = True
    tensor = _is_tensor(actual) or _is_tensor(expected)
    if not tensor:
        import numpy as np

        actual = np.asarray(actual)
    extra = []
    if rtol is not None or atol is not None:
        extra.append(rule("*", rtol, atol, source="call", label="gpu_assert_close arguments"))
    name = canonical_dtype(str(dtype)) if dtype is not None else dtype_name(actual)
    prof = choose(name, context_of(actual, arch, tf32), list(rules) + extra)
    a, e = _as_wide(actual, tensor), _as_wide(expected, tensor)
    head = f"gpu_assert_close: {msg + ': ' if msg else ''}"
    if tuple(a.shape) != tuple(e.shape):
        raise AssertionError(f"{head}shapes differ: actual {tuple(a.shape)}, expected {tuple(e.shape)}")
    total = a.numel() if tensor else a.size
    if total == 0:
        return prof
    xp = sys.modules["torch"] if tensor else sys.modules["numpy"]
    with contextlib.nullcontext() if tensor else xp.errstate(invalid="ignore"):  # inf - inf: nan, not close
        diff = abs(a - e)
        allowed = prof.atol + prof.rtol * abs(e)
        ok = (diff <= allowed) | (a == e)
        if equal_nan:
            ok = ok | (xp.isnan(a) & xp.isnan(e))
        bad = ~ok
        n_bad = int(bad.sum())
        if n_bad == 0:
            return prof
        excess = xp.nan_to_num(diff - allowed, nan=float("inf"))
    flat = int(xp.where(bad, excess, -float("inf")).reshape(-1).argmax())
    index = _unravel(flat, tuple(a.shape))
    av, ev = a.reshape(-1)[flat].item(), e.reshape(-1)[flat].item()
    d, al = diff.reshape(-1)[flat].item(), allowed.reshape(-1)[flat].item()
    raise AssertionError(
        f"{head}{n_bad} of {total} element(s) are not close ({100 * n_bad / total:.3g}%)\n"
        f"  {prof.describe()}\n"
        f"  worst element at index {index}: actual {av!r}, expected {ev!r}, difference {d:.6g} "
        f"(allowed {al:.6g} = atol + rtol * |expected|)")


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for dim in reversed(shape):
        flat, rest = divmod(flat, dim)
        out.append(rest)
    return tuple(reversed(out))


def gpu_assert_close(actual: Any, expected: Any, **overrides: Any) -> None:
    """``torch.testing.assert_close``-like, with tolerances from the profile of the actual's dtype on its
    device (vendor and arch). ``overrides``: rtol, atol, equal_nan, arch, tf32, msg, dtype. The ``gpu_assert_close``
    fixture adds the ini ``gpuenv_tolerances`` lines and ``@gpuenv_tolerance`` markers, and in a ``@gpu_dtypes``
    test the test's dtype for a floating-point actual."""
    __tracebackhide__ = True
    compare(actual, expected, (), **overrides)
