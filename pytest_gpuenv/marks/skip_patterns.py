"""GPU skips written without the plugin, recognised from their reasons.

A suite that gates its GPU tests itself (``unittest.skipUnless(torch.cuda.is_available(), "test requires
a GPU")``, ``pytest.skip("CUDA not available")``, ``skipif(..., reason="requires multiple GPUs")``) skips
for a hardware reason just as a ``requires_gpu`` test does; ``is_hardware_reason`` says so from the reason
text, so those skips are counted in the hardware-skip summary and in ``--gpuenv-json`` (category
``suite``). The tables are regular expressions, searched case-insensitively: ``NOT_HARDWARE`` first (a
missing Python package, an operating system), then ``HARDWARE``. Patterns from the ini option
``gpuenv_skip_patterns`` are searched before both, so a project can claim any reason of its own.
"""

from __future__ import annotations

import functools
import re
import signal
import sys
import threading
import warnings
from typing import Any, Iterable, Optional

import pytest

from pytest_gpuenv.base.model import safe_repr

#: reasons that are never hardware skips, though they may name a GPU word: an import that failed
#: (``pytest.importorskip``: "could not import 'cupy': No module named 'cupy'") or an operating system
NOT_HARDWARE = [
    r"\bcould not import\b",
    r"\bno module named\b",
    r"\bcannot import name\b",
    r"\b(ModuleNotFoundError|ImportError)\b",
    r"\bpip install\b",
    r"\b(windows|win32|linux|macos|mac ?os ?x?|darwin|os ?x|freebsd)\b",
]

#: what a GPU skip's reason says, with the published suites whose messages each pattern was written for
HARDWARE = [
    # a GPU: "test requires a GPU" (transformers), "Need at least 2 GPUs", "no GPU available",
    # "multi-GPU not supported" (PyTorch TEST_MULTIGPU), "FP8 not supported on this GPU" (Triton),
    # "not supported on gpu." (JAX skip_on_devices), "2 GPUs required" (CuPy multi_gpu)
    r"\b(multi-?)?gpus?\b",
    # CUDA: "CUDA not available" (PyTorch TEST_CUDA), "Insufficient cuda:0 memory" (PyTorch
    # largeTensorTest), "condition: not torch.cuda.is_available()", "Torch not compiled with CUDA enabled"
    r"\bcuda\b",
    # AMD: "test doesn't currently work on the ROCm stack" (PyTorch skipIfRocm), "HIP", "AMD GPU"
    r"\b(rocm|hip|amdgpu|amd|nvidia)\b",
    # other accelerators: "requires an accelerator", TPU, Intel XPU, Ascend NPU, Apple MPS
    r"\baccelerators?\b",
    r"\b(tpu|xpu|npu|mps)s?\b",
    # device count: "Need at least 2 CUDA devices" (PyTorch TEST_SKIPS), "Not enough devices (1)"
    # (JAX-based suites), "requires 4 devices"
    r"\b(not enough|insufficient|multiple|several|more|fewer|at least \d+|>= ?\d+|\d+)\b[\w\s-]{0,25}?\bdevices\b",
    # GPU memory: "not enough GPU memory" (above), "insufficient device memory", "not enough VRAM"
    r"\bdevice memory\b",
    r"\b(vram|hbm)\b",
    # arch and compute capability: "requires compute capability >= 8.0", "pre-SM80 hardware" (PyTorch
    # SDPA), "sm_90", "gfx90a", "MI300X", Hopper, Ampere
    r"\bcompute capability\b",
    r"\bsm_?\d{2,3}a?\b",
    r"\bgfx\d{2,4}[a-z]?\b",
    r"\bmi\d{3}[a-z]?\b",
    r"\b(volta|turing|ampere|hopper|blackwell|cdna\d?|rdna\d?)\b",
    r"\btensor ?cores?\b",
    # GPU libraries and toolchains: "CUDNN not available" (PyTorch), "c10d was not compiled with the NCCL
    # backend" (PyTorch), "CUBLASLT not available" (bitsandbytes), "nvcc not found"
    r"\b(cudnn|miopen|nccl|rccl|cublas(lt)?|rocblas|hipblas(lt)?)\b",
    r"\b(nvcc|hipcc|nvrtc|hiprtc)\b",
]

#: how much of a reason the summary shows as the cause
CAUSE_CHARS = 100
#: how much of a reason a project's own patterns search: with no repeat of a repeat (``parse_extra``) a pattern's
#: backtracking grows as a power of the text's length, and this bound keeps that power small
EXTRA_CHARS = 1000


class Matcher:
    """The compiled tables, plus a project's own patterns (searched first)."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        flags = re.IGNORECASE
        self._extra = [re.compile(p, flags) for p in extra]
        self._not = re.compile("|".join(f"(?:{p})" for p in NOT_HARDWARE), flags)
        self._hw = re.compile("|".join(f"(?:{p})" for p in HARDWARE), flags)

    def is_hardware(self, reason: str) -> bool:
        head = reason[:EXTRA_CHARS]
        if any(_bounded_search(p, head) for p in self._extra):
            return True
        return self._not.search(reason) is None and self._hw.search(reason) is not None


class _TooLong(Exception):
    pass


def _stop_search(signum: int, frame: Any) -> None:
    raise _TooLong


def _bounded_search(pattern: re.Pattern[str], text: str) -> bool:
    """``pattern.search(text)`` stopped after ``SEARCH_CPU_SECONDS`` of CPU time: a project's pattern that
    backtracks without end (a shape ``parse_extra`` lets through: ``(\\w+\\s?){1,40}!``, ``a*a*a*a*b``) is
    reported once, by name, and not searched again. The bound is a CPU-time timer (SIGVTALRM, which pytest-timeout
    and the debuggers leave alone; CPython's regex engine answers signals); the timer and handler in place
    before are put back. Where there is no such timer (not the main thread, not POSIX) the search is unbounded."""
    if pattern.pattern in _ABANDONED:
        return False
    if not hasattr(signal, "ITIMER_VIRTUAL") or threading.current_thread() is not threading.main_thread():
        return pattern.search(text) is not None
    handler = signal.signal(signal.SIGVTALRM, _stop_search)
    timer = signal.setitimer(signal.ITIMER_VIRTUAL, SEARCH_CPU_SECONDS)
    try:
        return pattern.search(text) is not None
    except _TooLong:
        _ABANDONED.add(pattern.pattern)
        warnings.warn(pytest.PytestConfigWarning(
            f"gpuenv: gpuenv_skip_patterns entry {safe_repr(pattern.pattern, 200)} took more than "
            f"{SEARCH_CPU_SECONDS:g} s of CPU on one skip reason (it backtracks without end); it is not used for the "
            "rest of the run"), stacklevel=2)
        return False
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, *timer)
        signal.signal(signal.SIGVTALRM, handler)


#: the CPU time one search of a project's pattern may take
SEARCH_CPU_SECONDS = 0.5
#: the project's patterns that ran out of time, by their text
_ABANDONED: set[str] = set()


@functools.lru_cache(maxsize=8)
def matcher(extra: tuple[str, ...] = ()) -> Matcher:
    return Matcher(extra)


def is_hardware_reason(reason: str, extra: Iterable[str] = ()) -> bool:
    """Whether a skip reason (without pytest's ``Skipped: `` prefix) is a GPU/hardware skip."""
    return matcher(tuple(extra)).is_hardware(reason)


def reason_of(longrepr: Any) -> Optional[str]:
    """The reason of a skipped report's ``longrepr`` (``(path, line, "Skipped: reason")``), or None."""
    if not (isinstance(longrepr, tuple) and len(longrepr) == 3 and isinstance(longrepr[2], str)):
        return None
    text = longrepr[2]
    return text[len("Skipped: "):] if text.startswith("Skipped: ") else text


def cause_of(reason: str) -> str:
    """The reason as a summary group: its first line, at most ``CAUSE_CHARS`` characters."""
    line = reason.strip().splitlines()[0] if reason.strip() else "(no reason given)"
    return line if len(line) <= CAUSE_CHARS else line[: CAUSE_CHARS - 3] + "..."


def parse_extra(value: Any, where: str) -> list[str]:
    """The ini option ``gpuenv_skip_patterns``: one regular expression per line (or a TOML array). A
    pattern that does not compile is a ``pytest.UsageError`` naming it and ``where``."""
    lines = value if isinstance(value, (list, tuple)) else str(value or "").splitlines()
    out = []
    for line in (str(x).strip() for x in lines):
        if not line:
            continue
        try:
            re.compile(line)
            risk = _backtracking_risk(line)
        except (re.error, RecursionError, OverflowError) as exc:
            raise pytest.UsageError(
                f"gpuenv: invalid gpuenv_skip_patterns entry {safe_repr(line, 200)} from {where}: {exc}"
            ) from None
        if risk:
            raise pytest.UsageError(
                f"gpuenv: gpuenv_skip_patterns entry {safe_repr(line, 200)} from {where} repeats {risk} inside an "
                "unbounded repeat: on some skip reasons its search would backtrack for hours. Write it without "
                "the inner repeat or alternation (e.g. 'a+' for '(a+)+')"
            )
        out.append(line)
    return out


def _backtracking_risk(pattern: str) -> Optional[str]:
    """What makes ``pattern``'s search exponential in the worst case, or None: an unbounded repeat (``*``, ``+``,
    ``{n,}``) whose body holds a repeat of variable width or an alternation (``(a+)+``, ``(a|aa)*``, ``(\\w*x?)*``),
    the shape that lets a backtracking engine split one text in exponentially many ways. A possessive repeat or
    an atomic group does not backtrack into its body and is allowed."""
    parsed = _sre_parser.parse(pattern)

    def inner(items: Any) -> Optional[str]:  # a variable repeat or an alternation anywhere in ``items``
        for op, av in items:
            if op in _REPEATS and av[0] != av[1]:
                return "a repeat"
            if op is _c.BRANCH:
                return "an alternation"
            found = next((x for x in map(inner, _children(op, av)) if x), None)
            if found:
                return found
        return None

    def walk(items: Any) -> Optional[str]:
        for op, av in items:
            if op in _REPEATS and av[1] == _c.MAXREPEAT:
                found = inner(av[2])
                if found:
                    return found
            found = next((x for x in map(walk, _children(op, av)) if x), None)
            if found:
                return found
        return None

    return walk(parsed)


def _children(op: Any, av: Any) -> list[Any]:
    """The sub-patterns of one parsed node (not of possessive repeats or atomic groups: those never backtrack)."""
    if op in _REPEATS:
        return [av[2]]
    if op is _c.SUBPATTERN:
        return [av[3]]
    if op is _c.BRANCH:
        return list(av[1])
    if op in (_c.ASSERT, _c.ASSERT_NOT):
        return [av[1]]
    if op is _c.GROUPREF_EXISTS:
        return [x for x in av[1:] if x is not None]
    return []


if sys.version_info >= (3, 11):  # the parser behind ``re`` (typeshed lists only its older name)
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser as _sre_parser  # type: ignore[attr-defined]
else:  # pragma: no cover
    import sre_constants as _c
    import sre_parse as _sre_parser

_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT)
