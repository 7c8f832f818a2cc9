"""A sanitizer's text turned into findings: compute-sanitizer's log (NVIDIA) and AddressSanitizer's reports
(ROCm), each finding with its kernel, access, thread/block and source line where the text has them.

compute-sanitizer writes one record per finding, each line behind its prefix (``========= ``): a head line
(``Invalid __global__ write of size 4 bytes``, ``Error: Race reported between Write access at k+0x90 in
f.cu:8``, ``Barrier error detected. Divergent thread(s) in block``, ``Uninitialized __global__ memory read of
size 4 bytes``, a hardware exception) and indented lines (``at k(float *)+0x70 in /path/k.hip:12``, ``by
thread (255,0,0) in block (3,0,0)``, ``Address 0x... is out of bounds``, a host backtrace); a blank line
ends it (NVIDIA, Compute Sanitizer user manual, "Understanding Memcheck Errors" and each tool's chapter).
Records that are not findings: the banner, the summaries (``ERROR SUMMARY``, ``RACECHECK SUMMARY``, ``LEAK
SUMMARY``), ``Target application returned an error``, and host API errors (``Program hit CUDA_ERROR_... on
CUDA API call to ...``: the run passes ``--report-api-errors no``; Python bindings probing driver entry points
provoke them). The ``at`` line's form without line info is ``at k+0x70``; before 2022 it was ``at 0x70 in
/path/k.cu:12:k``.

AddressSanitizer (ROCm): ``==PID==ERROR: AddressSanitizer: heap-buffer-overflow on amdgpu device 0 at pc 0x...
WRITE of size 4 in workgroup id (3,0,0)``, then frames ``#0 0x... in k(int*, int) at /path/k.hip:12:13``
(ROCm docs, "Using AddressSanitizer", "Device ASan output").
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional, Sequence

_PREFIX = "========= "
_NOT_FINDINGS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY", "Program hit ",
                 "Target application returned", "This can happen", "Note:")
_AT = (re.compile(r"\bat (?P<func>.+?)\+0x[0-9a-fA-F]+ in (?P<file>.+?):(?P<line>\d+)(?::\d+)?\s*(?:\[|$)"),
       re.compile(r"\bat 0x[0-9a-fA-F]+ in (?P<file>.+?):(?P<line>\d+):(?P<func>.+?)\s*$"),
       re.compile(r"\bat (?P<func>.+?)\+0x[0-9a-fA-F]+\s*(?:\[|$)"))
_THREAD = re.compile(r"by thread (\([\d, ]+\)) in block (\([\d, ]+\))")
_SUMMARY = re.compile(r"(?:ERROR SUMMARY: (\d+) errors?|RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?)")
_ASAN_HEAD = re.compile(r"==\d+==ERROR: AddressSanitizer: (?P<kind>[\w-]+) on amdgpu device (?P<dev>\d+) at pc \S+ "
                        r"(?P<access>(?:READ|WRITE) of size \d+) in workgroup id (?P<wg>\([\d, ]+\))")
_ASAN_FRAME = re.compile(r"#0 0x[0-9a-f]+ in (?P<func>.+?)(?: at)? (?P<file>/\S+?):(?P<line>\d+)(?::\d+)?$")


class Finding(NamedTuple):
    """One finding: what (the head line), the kernel (as the tool names it, or None), the access and
    thread/block where given, the file and line (None without line info), and the tool's own lines."""

    what: str
    kernel: Optional[str]
    where: str
    file: Optional[str]
    line: Optional[int]
    text: str

    def describe(self) -> str:
        loc = f" at {self.file}:{self.line}" if self.file else " (no line info)"
        return f"{self.what} in kernel {self.kernel or '?'}{loc}" + (f", {self.where}" if self.where else "")


def _record(lines: list[str]) -> Optional[Finding]:
    head = lines[0].strip()
    if head.startswith(_NOT_FINDINGS):
        return None
    kernel = file = None
    line: Optional[int] = None
    where = []
    for text in lines:
        if kernel is None:
            for rx in _AT:
                m = rx.search(text)
                if m:
                    kernel = m.group("func").strip()
                    if "file" in m.groupdict() and m.group("file"):
                        file, line = m.group("file").strip(), int(m.group("line"))
                    break
        t = _THREAD.search(text)
        if t:
            where.append(f"thread {t.group(1)} in block {t.group(2)}")
        s = text.strip()
        if s.startswith("Address ") or s.startswith("and is "):
            where.append(s)
    return Finding(head, kernel, "; ".join(where), file, line, "\n".join(lines))


def compute_sanitizer(log: str) -> tuple[list[Finding], int]:
    """The findings of a compute-sanitizer log, and the errors its summary counts (0 when it has none)."""
    out: list[Finding] = []
    counted = 0
    current: list[str] = []
    for raw in log.splitlines() + [_PREFIX]:
        if not raw.startswith(_PREFIX.rstrip()):
            continue  # the program's own output, when it shares the stream
        body = raw[len(_PREFIX):] if raw.startswith(_PREFIX) else ""
        m = _SUMMARY.search(body)
        if m:
            counted = max(counted, int(m.group(1) or m.group(2) or 0))
        if body.strip() and body.startswith(" ") and current:
            current.append(body)
            continue
        if current:
            found = _record(current)
            if found is not None:
                out.append(found)
        current = [body] if body.strip() else []
    return out, counted


def asan(text: str) -> list[Finding]:
    """The device findings of AddressSanitizer's reports (a host-side report is a finding too, without thread)."""
    out: list[Finding] = []
    blocks = re.split(r"(?m)^(?==+\n==\d+==ERROR: AddressSanitizer)", text)
    for block in blocks:
        lines = block.strip("\n").splitlines()
        head = next((ln for ln in lines if "ERROR: AddressSanitizer" in ln), None)
        if head is None:
            continue
        m = _ASAN_HEAD.search(head)
        frame = next((f for f in (_ASAN_FRAME.search(ln.strip()) for ln in lines) if f), None)
        what = (f"{m.group('kind')}: {m.group('access')}" if m else head.split("AddressSanitizer:", 1)[1].strip())
        where = f"workgroup {m.group('wg')} on device {m.group('dev')}" if m else ""
        out.append(Finding(what, frame.group("func") if frame else None, where,
                           frame.group("file") if frame else None, int(frame.group("line")) if frame else None,
                           block.strip("\n")))
    return out


def _base(name: str) -> str:
    """A kernel name as the tool prints it (``void transpose<16>(float *)``, ``k(int*)``) without return type and
    parameters."""
    name = name.strip()
    depth = 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and i:
            name = name[:i]
            break
    if name.startswith("void "):
        name = name[5:]
    return "".join(name.split())


def owned(finding: Finding, kernels: Sequence[str]) -> bool:
    """Whether the finding is in a kernel the test built (``kernels``: the name expressions and lowered names that
    ``rtc.instrument`` noted)."""
    if finding.kernel is None:
        return False
    base = _base(finding.kernel)
    for name in kernels:
        k = "".join(name.split())
        if base == k or finding.kernel.strip() == name or base.startswith(k + "<"):
            return True
    return False
