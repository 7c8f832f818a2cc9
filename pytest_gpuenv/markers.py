"""The GPU markers: their table and the checks of their arguments.

``MARKERS`` holds each marker's signature line (what ``pytest --markers`` prints; ``_marknames``
registers them, with their ``gpuenv_`` aliases); ``validate(name, args, kwargs)`` parses one marker's
arguments or raises ``MarkerArgumentError`` naming the marker and the value; ``check_marks(marks)`` returns the first such error of a test (the
plugin makes it an error for that test alone). Evaluation against the environment: ``_skipping``.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

import pytest

from pytest_gpuenv.model import MAX_DEVICES, ArchPattern, parse_size, safe_repr

#: (name, signature help line) registered with config.addinivalue_line("markers", ...)
MARKERS = [
    ("requires_gpu", "requires_gpu: run only where some GPU is usable (ROCm or CUDA)."),
    ("requires_cuda", "requires_cuda: run only where an NVIDIA GPU is usable through CUDA."),
    ("requires_rocm", "requires_rocm: run only where an AMD GPU is usable through ROCm (native Linux or WSL 2)."),
    (
        "requires_hip",
        "requires_hip: run only where HIP kernels can be compiled and launched (ROCm, or NVIDIA through "
        "the HIP-on-CUDA path with NVRTC or nvcc).",
    ),
    ("requires_wsl", "requires_wsl(version=None): run only on WSL (that version, if given)."),
    ("requires_devices", "requires_devices(n): run only where at least n GPUs are visible and usable."),
    (
        "requires_memory",
        "requires_memory(size): run only where a usable GPU has at least that much memory: int bytes or "
        "'16GiB', '40GB', '512MiB'.",
    ),
    (
        "requires_arch",
        "requires_arch(*patterns): run only where a usable GPU's arch matches a pattern: 'gfx90a', "
        "'gfx94*', 'gfx11*', 'sm_90', 'sm_80+' (8.0 or newer); never matches the other vendor.",
    ),
    (
        "skip_on",
        "skip_on(*conditions, reason=None): skip where any condition holds: 'rocm', 'cuda', 'cpu', 'wsl', "
        "'windows' or an arch pattern.",
    ),
    (
        "xfail_on",
        "xfail_on(*conditions, reason=None, strict=False): as skip_on, but the test runs and is expected "
        "to fail there.",
    ),
    (
        "requires_capability",
        "requires_capability(*names): run only where a usable GPU has every capability named: fp64, fp64_full, "
        "fp16, bf16, fp8, fp8_ocp, fp8_fnuz, int8_dot, matrix_cores, tf32, wave32, wave64, cooperative_launch, "
        "unified_memory, ecc, peer_access, shared_memory>=SIZE (per block, e.g. 'shared_memory>=64KiB').",
    ),
    ("perf", "perf: a GPU performance test (tests using gpu_bench get it by themselves); -m 'not perf' leaves them out."),
]
MARKER_NAMES = tuple(n for n, _ in MARKERS)
#: the plugin's markers that exist only with the prefix (registered as they are, not evaluated as skips)
PREFIXED_ONLY = [
    "gpuenv_tolerance(dtype='*', rtol=None, atol=None, arch=None): tolerances for the gpu_assert_close fixture "
    "in this test: for that dtype (glob), on that arch pattern or vendor (amd, nvidia, cpu) if given.",
]
#: markers that only a test needing a GPU carries (the plugin skips it after a sticky GPU fault)
GPU_MARKERS = ("requires_gpu", "requires_cuda", "requires_rocm", "requires_hip", "requires_devices",
               "requires_capability")
#: the words skip_on/xfail_on accept besides arch patterns
CONDITIONS = ("rocm", "cuda", "cpu", "wsl", "windows")


class MarkerArgumentError(ValueError):
    """A GPU marker was given an argument it cannot use; names the marker and the value."""


def _fmt_call(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [safe_repr(a) for a in args] + [f"{k}={safe_repr(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _bad(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], why: str) -> MarkerArgumentError:
    return MarkerArgumentError(f"invalid marker {_fmt_call(name, args, kwargs)}: {why}")


def _raised(exc: Exception) -> str:
    """``Type: message`` of an exception an argument raised (its ``__str__`` may raise too)."""
    try:
        text = str(exc)[:200]
    except Exception:
        text = ""
    return f"an argument raised {type(exc).__name__}" + (f": {text}" if text else "")


def _no_kwargs(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], allowed: Iterable[str] = ()) -> None:
    extra = set(kwargs) - set(allowed)
    if extra:
        raise _bad(name, args, kwargs, f"unexpected keyword argument(s) {', '.join(sorted(extra))}")


def _parse_condition(c: Any) -> Any:
    if isinstance(c, str) and c.strip().lower() in CONDITIONS:
        return c.strip().lower()
    try:
        return ArchPattern.parse(c)
    except ValueError:
        raise ValueError(
            f"unknown condition {safe_repr(c)} (expected one of {', '.join(CONDITIONS)} or an arch pattern such as "
            "'gfx94*' or 'sm_80+')"
        ) from None


def validate(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Check one marker's arguments; returns the parsed value. Raises MarkerArgumentError."""
    try:
        if name in ("requires_gpu", "requires_cuda", "requires_rocm", "requires_hip", "perf"):
            if args or kwargs:
                raise ValueError("takes no arguments")
            return None
        if name == "requires_wsl":
            _no_kwargs(name, args, kwargs, ("version",))
            if len(args) > 1 or (args and "version" in kwargs):
                raise ValueError("takes at most one version")
            version = args[0] if args else kwargs.get("version")
            if version is not None and (isinstance(version, bool) or version not in (1, 2)):
                raise ValueError(f"version must be 1, 2 or None, got {safe_repr(version)}")
            return None if version is None else int(version)  # (a plain int: later checks call no method of it)
        if name == "requires_devices":
            _no_kwargs(name, args, kwargs)
            if len(args) != 1:
                raise ValueError("takes exactly one argument, the number of GPUs")
            n = args[0]
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"the number of GPUs must be an int >= 1, got {safe_repr(n)}")
            if n > MAX_DEVICES:
                raise ValueError(f"the number of GPUs must be at most {MAX_DEVICES}, got {safe_repr(n)}")
            return int(n)
        if name == "requires_memory":
            _no_kwargs(name, args, kwargs)
            if len(args) != 1:
                raise ValueError("takes exactly one size")
            return parse_size(args[0])
        if name == "requires_arch":
            _no_kwargs(name, args, kwargs)
            if not args:
                raise ValueError("needs at least one arch pattern")
            return [ArchPattern.parse(a) for a in args]
        if name == "requires_capability":
            _no_kwargs(name, args, kwargs)
            if not args:
                raise ValueError("needs at least one capability")
            from pytest_gpuenv import capabilities

            return [capabilities.parse(a) for a in args]
        if name in ("skip_on", "xfail_on"):
            allowed = ("reason",) if name == "skip_on" else ("reason", "strict")
            _no_kwargs(name, args, kwargs, allowed)
            if not args:
                raise ValueError("needs at least one condition")
            if kwargs.get("reason") is not None and not isinstance(kwargs["reason"], str):
                raise ValueError("reason must be a string")
            if not isinstance(kwargs.get("strict", False), bool):
                raise ValueError(f"strict must be True or False, got {safe_repr(kwargs['strict'])}")
            return [_parse_condition(c) for c in args]
    except MarkerArgumentError:
        raise
    except ValueError as exc:
        raise _bad(name, args, kwargs, str(exc)) from None
    except Exception as exc:  # the argument's own method (__eq__, strip, __lt__ ...) raised
        raise _bad(name, args, kwargs, _raised(exc)) from None
    return None


#: a bare number below this given to requires_memory is taken for a size meant in another unit (it is bytes)
SMALL_SIZE = 2**20


def warn_small_sizes(item: pytest.Item, marks: Iterable[Any]) -> None:
    """A PytestWarning naming the test for ``requires_memory(16)``: a bare number under 1 MiB means bytes.
    ``marks``: the item's plugin marks (``_marknames.plugin_marks``)."""
    for m in marks:
        size = m.args[0] if m.name == "requires_memory" and len(m.args) == 1 and not m.kwargs else None
        if isinstance(size, (int, float)) and not isinstance(size, bool) and 1 <= size < SMALL_SIZE:
            item.warn(pytest.PytestWarning(
                f"{item.nodeid}: @{m.name}({size!r}) means {size!r} bytes; give a unit, e.g. "
                f"@{m.name}('{size!r}GiB'), or an int of bytes of at least 1 MiB"))


def check_marks(marks: Iterable[Any]) -> Optional[str]:
    """Validate every GPU marker on an item (``_marknames.plugin_marks``); return the first error, or None."""
    for m in marks:
        if m.name in MARKER_NAMES:
            try:
                validate(m.name, tuple(m.args), dict(m.kwargs))
            except MarkerArgumentError as exc:
                return str(exc)
    return None


