"""Instrumented builds: what a sanitizer run adds to every kernel this process compiles, and which kernels
those were.

``guards.sanitize`` sets it (``use``) in the process whose tests a sanitizer watches: the child that runs
under compute-sanitizer, the child whose kernels carry AddressSanitizer on AMD, or a CPU-only runner's own
process. ``build_kernels`` (``rtc.kernel``) asks ``apply`` for every GPU build and ``cpu_checked`` for every
CPU-executor build, and notes each kernel's names (``built``), so a finding can be told apart as the test's
own or another library's. Off (the default), nothing changes: no option is added and nothing is noted.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence


class Instrumentation(NamedTuple):
    """What every build of this process gets. ``nvidia``/``amd``: compile options added for sm_/gfx targets
    (``-lineinfo``; ``-fsanitize=address ...``); ``amd_features``: appended to a gfx target that has none
    (``:xnack+``); ``amd_compiler``: the compiler gfx builds must use (hipcc: the clang driver links the
    device ASan runtime); ``cpu_checked``: CPU-executor kernels are built checked, ``check=False`` or not."""

    nvidia: tuple[str, ...] = ()
    amd: tuple[str, ...] = ()
    amd_features: str = ""
    amd_compiler: Optional[str] = None
    cpu_checked: bool = False

    def apply(self, arch: str, options: Sequence[str], compiler: Optional[str]) -> tuple[str, tuple[str, ...],
                                                                                        Optional[str]]:
        """``(arch, options, compiler)`` of a GPU build, instrumented."""
        if arch.startswith("sm_"):
            return arch, (*options, *[o for o in self.nvidia if o not in options]), compiler
        if self.amd_features and ":" not in arch:
            arch += self.amd_features
        return arch, (*options, *[o for o in self.amd if o not in options]), self.amd_compiler or compiler


_OFF = Instrumentation()
_current = _OFF
#: the name expressions and lowered names of the kernels built while instrumentation is on
built: list[str] = []


def use(inst: Optional[Instrumentation]) -> None:
    """Turn instrumentation on for this process (None: off)."""
    global _current
    _current = inst or _OFF


def current() -> Instrumentation:
    return _current


def on() -> bool:
    return _current is not _OFF


def note(names: Sequence[str]) -> None:
    """Record kernels built while on (``build_kernels`` calls it)."""
    if _current is not _OFF:
        built.extend(n for n in names if n and n not in built)
