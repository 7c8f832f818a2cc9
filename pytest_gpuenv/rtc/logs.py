"""Compiler logs for people: each error line names the kernel whose source it is in, and a log is shown once.

A source with several kernels is compiled whole for each of them, so an error in kernel ``bad`` also fails
the compile of kernel ``good``, with the same log for each kernel and arch. ``attribute`` tags each error
line of the source with the kernel whose body holds it (``  [kernel 'bad']``) and, when that is not the
kernel being compiled, says so in the message. ``LogOnce`` prints a log in full the first time it is met
for an arch and compiler, and afterwards the message and where the log was shown.
"""

from __future__ import annotations

import bisect
import re
from typing import Optional

from pytest_gpuenv.rtc.errors import KernelCompileError
from pytest_gpuenv.rtc.source import _GLOBAL, Source, strip_comments

#: an error line of a clang-style (``f.hip:5:10: error: ...``) or EDG-style (``f.hip(5): error: ...``) log:
#: file, line, kind, message
_ERROR_LINE = re.compile(
    r"^(?P<file>[^\s:()][^:()\n]*?)(?::(?P<l1>\d+):(?:\d+:)?|\((?P<l2>\d+)\):?)\s*"
    r"(?P<kind>fatal error|catastrophic error|error)\b:?\s*(?P<msg>.*)$",
    re.M,
)


def first_error(log: str) -> Optional[tuple[str, int, str]]:
    """(file, line, message) of the first error a compiler's log reports (clang or EDG style)."""
    m = _ERROR_LINE.search(log)
    if not m:
        return None
    return m.group("file").strip(), int(m.group("l1") or m.group("l2")), m.group("msg").strip()


_BODY_OR_END = re.compile(r"[{;]")
_BRACE = re.compile(r"[{}]")


def kernel_spans(text: str) -> list[tuple[int, int, str]]:
    """(first line, last line, name) of each ``__global__`` function defined (with a body) in ``text``,
    in source order; a prototype has no span."""
    clean = strip_comments(text)
    spans: list[tuple[int, int, str]] = []
    pos = 0
    for m in _GLOBAL.finditer(clean, 0, clean.rfind(")") + 1):
        if m.start() < pos:  # inside the body of the kernel before
            continue
        b = _BODY_OR_END.search(clean, m.end())
        if b is None or b.group() == ";":
            continue
        depth, end = 0, len(clean)
        for c in _BRACE.finditer(clean, b.start()):
            depth += 1 if c.group() == "{" else -1
            if depth == 0:
                end = c.end()
                break
        first = clean.count("\n", 0, m.start()) + 1
        spans.append((first, first + clean.count("\n", m.start(), end), m.group("name")))
        pos = end
    return spans


def _owner(spans: list[tuple[int, int, str]], line: int) -> Optional[str]:
    i = bisect.bisect_right([s[0] for s in spans], line) - 1
    return spans[i][2] if i >= 0 and line <= spans[i][1] else None


def attribute(exc: KernelCompileError, src: Source, name: str) -> KernelCompileError:
    """Tag ``exc``'s log and message with the kernel each error of ``src`` is in (in place; returned).
    ``exc.kernels`` lists those kernels, in the order of the log."""
    spans = kernel_spans(src.text) if exc.log else []
    names = {src.display, src.path} - {None}
    kernels: list[str] = []
    out = []
    for line in exc.log.splitlines(keepends=True):
        m = _ERROR_LINE.match(line)
        k = _owner(spans, int(m.group("l1") or m.group("l2"))) if m and m.group("file").strip() in names else None
        if k is not None:
            kernels += [k] if k not in kernels else []
            end = "\n" if line.endswith("\n") else ""
            out.append(f"{line.rstrip()}  [kernel {k!r}]{end}")
        else:
            out.append(line)
    if kernels:
        exc.log = "".join(out)
    exc.kernels = kernels  # type: ignore[attr-defined]
    k = _owner(spans, exc.line) if exc.line and exc.file in names else None
    marker = f" (compiling kernel {name!r}"
    if k is not None and k != name and marker in exc.message:
        exc.message = exc.message.replace(marker, f" in kernel {k!r}{marker}", 1)
        exc.args = (exc.message,)
    return exc


class LogOnce:
    """Shows each compiler log once: ``text(exc, where)`` is ``str(exc)`` the first time its log is met (for
    its arch and compiler), afterwards the message and ``where`` (said when it was first met) it was shown."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str, str], str] = {}

    def text(self, exc: KernelCompileError, where: str) -> str:
        if not exc.log.strip() or exc.log.strip() in exc.message:
            return str(exc)
        key = (exc.arch or "", exc.compiler or "", exc.log)
        if key not in self._seen:
            self._seen[key] = where
            return str(exc)
        return f"{exc.message} (the {exc.compiler or 'compiler'} log is shown {self._seen[key]})"
