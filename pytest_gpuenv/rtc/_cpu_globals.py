"""``__device__`` and ``__constant__`` variables for the CPU executor: red zones between them, and their
extents from the symbol table, so an array that overflows into its neighbour is reported in checked mode.

A line-preserving rewrite puts every file-scope ``__device__``/``__constant__`` variable definition into
the ``gpuenv_globals`` section, each after a 64-byte red zone (``include/gpuenv_globals.h``); g++ emits
a section's variables in source order or in reverse, so each variable has a red zone past its end
(the one appended after the source covers the last). Left alone: ``extern`` declarations, templates,
``const``/``constexpr`` variables (read-only data cannot share the section) and anything the scan
does not recognise as a plain variable definition.
"""

from __future__ import annotations

import re
from typing import Sequence

SECTION = "gpuenv_globals"
RZ_MARKER = "__gpuenv_grz"
_TOKEN = re.compile(r"\b__(?:device|constant)__\b")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_BEFORE_OK = {"static", "volatile", "inline"}
_SKIP_WORDS = re.compile(r"\b(?:extern|template|typedef|const|constexpr|__global__|__host__|__shared__|operator|"
                         r"using|friend|return)\b")


def rewrite_globals(text: str) -> str:
    """``text`` with each plain ``__device__``/``__constant__`` variable definition in the red-zoned section."""
    out, last = [], 0
    scan = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)  # same length, comments blanked
    for m in _TOKEN.finditer(scan):
        end = _decl_end(scan, m.end())
        if end is None or _SKIP_WORDS.search(scan, m.end(), end):
            continue
        start = _statement_start(scan, m.start())
        if start is None or start < last or _SKIP_WORDS.search(scan, start, m.start()):
            continue
        out += [text[last:start], "GPUENV_GLOBAL_RZ ", text[start:m.start()], "GPUENV_GLOBAL"]
        last = m.end()
    out.append(text[last:])
    return "".join(out)


def _decl_end(text: str, pos: int) -> int | None:
    """Where the declarator part ends (``=``, ``;``, ``{`` of an initialiser); None for a function."""
    for i in range(pos, min(len(text), pos + 500)):
        c = text[i]
        if c in "(#}":
            return None
        if c in "=;":
            return i
        if c == "{":  # brace initialisation: int x{3};  a function body would have had "(" first
            return i
    return None


def _statement_start(text: str, pos: int) -> int | None:
    """The start of the declaration that ``__device__`` at ``pos`` begins (only storage words before it)."""
    i = pos
    while True:
        j = i
        while j > 0 and text[j - 1] in " \t\r\n":
            j -= 1
        k = j
        while k > 0 and (text[k - 1].isalnum() or text[k - 1] == "_"):
            k -= 1
        if k < j and text[k:j] in _BEFORE_OK:
            i = k
            continue
        if j == 0 or text[j - 1] in ";{}" or _after_directive(text, j):
            return i
        return None


def _after_directive(text: str, j: int) -> bool:
    """True when the line that position ``j`` ends is a preprocessor directive (a declaration follows)."""
    return text[text.rfind("\n", 0, j) + 1:j].lstrip().startswith("#")


def section_symbols(nm_lines: Sequence[str], section: str, rz_marker: str) -> list[tuple[str, int, int]]:
    """(name, offset in ``section``, size) of every variable there, red zones left out (``nm -S -C``)."""
    syms, start, stop = [], None, None
    for line in nm_lines:
        parts = line.split(None, 3)
        if len(parts) == 3 and parts[2].startswith("__st"):
            parts = [parts[0], "0", parts[1], parts[2]]
        if len(parts) < 4:
            continue
        try:
            addr, size, name = int(parts[0], 16), int(parts[1], 16), parts[3]
        except ValueError:
            continue
        if name == f"__start_{section}":
            start = addr
        elif name == f"__stop_{section}":
            stop = addr
        else:
            syms.append((name, addr, size))
    if start is None or stop is None:
        return []
    out = [(n.split("::")[-1], a - start, s) for n, a, s in syms if start <= a < stop and rz_marker not in n and s > 0]
    return sorted(out, key=lambda v: v[1])
