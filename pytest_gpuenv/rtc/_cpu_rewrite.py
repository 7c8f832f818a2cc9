"""The rewrites a HIP source gets before the CPU executor's build (``rtc._cpu``), each keeping the line of every
other token: host-code ``k<<<g, b>>>(args)`` -> a call of the never-run launch stub then of ``k``
(``host_launches``); ``static __shared__`` -> ``__shared__``; ``extern __shared__ T x[];`` and
``HIP_DYNAMIC_SHARED(T, x)`` -> a pointer to the launch's dynamic shared memory; the globals' red zones
(``_cpu_globals``); and the quoted headers that need one of these, rewritten into copies the source includes
instead (``rewrite_with_headers``).
"""

from __future__ import annotations

import os
import re

from pytest_gpuenv.rtc import _cpu_globals
from pytest_gpuenv.rtc.source import Source, lookup, read_headers, strip_comments

_EXTERN_SHARED = re.compile(
    r"\bextern\s+__shared__\s+(?P<type>[^;\[\]{}()]*(?:\([^)]*\)[^;\[\]{}()]*)*?)\s*\b(?P<name>[A-Za-z_]\w*)"
    r"\s*\[\s*\]\s*;")
_ATTR = re.compile(r"__align__\s*\([^)]*\)|__attribute__\s*\(\([^)]*\)\)|\bHIP_DYNAMIC_SHARED_ATTRIBUTE\b")
_DYNAMIC_SHARED = re.compile(r"\bHIP_DYNAMIC_SHARED\s*\(\s*(?P<type>[^,()]+?)\s*,\s*(?P<name>[A-Za-z_]\w*)\s*\)")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)+\'')
#: what opens a brace that is still namespace scope: a namespace, an ``extern "C"`` block (string blanked)
_SCOPE_OPENER = re.compile(r'^(?:inline\s+)?namespace\b[^(){};=]*$|^extern\s*"\s*"$')

def _file_scope(scan: str, pos: int) -> bool:
    """Whether ``pos`` of ``scan`` (comments and string contents blanked) is at namespace scope: every brace
    open there opens a namespace or an ``extern "C"`` block."""
    opened: list[bool] = []
    last = 0
    for m in re.finditer(r"[{};]", scan[:pos]):
        c = m.group(0)
        if c == "{":
            head = "\n".join(ln for ln in scan[last:m.start()].splitlines() if not ln.lstrip().startswith("#"))
            opened.append(bool(_SCOPE_OPENER.match(" ".join(head.split()))))
        elif c == "}" and opened:
            opened.pop()
        last = m.end()
    return all(opened)


def _dynamic_shared(t: str, name: str, file_scope: bool) -> str:
    """An ``extern __shared__ t name[];`` made a pointer to the launch's dynamic shared memory, on one line. In
    a function a copy of the launch's pointer; at namespace scope, where an initialiser runs once when the
    module is loaded, a reference to the pointer the executor sets at each launch (through a may_alias type:
    the pointer is stored as a ``char*``)."""
    if not file_scope:
        return f"{t}* const {name} __attribute__((__unused__)) = ({t}*)__gpuenv_state.dyn_shared;"
    alias = f"__gpuenv_dyn_{name}_t"
    return (f"typedef {t}* __attribute__((__may_alias__)) {alias}; static {alias} const& {name} "
            f"__attribute__((__unused__)) = reinterpret_cast<{alias} const&>(__gpuenv_state.dyn_shared);")


def _blanked(text: str) -> str:
    """``text`` with its comments and the contents of its string and character literals blanked, offsets kept."""
    return _STRING.sub(lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[-1], strip_comments(text))


_CLOSE = {">": "<", ")": "(", "]": "["}


def _callee_start(scan: str, end: int) -> int:
    """Where the expression naming a launched kernel that ends at ``end`` of ``scan`` starts: a name, qualified
    (``ns::k``), with template arguments (``k<T, 256>``), or a parenthesised or subscripted expression."""
    j = end
    while True:
        while j > 0 and scan[j - 1].isspace():
            j -= 1
        if j > 0 and scan[j - 1] in _CLOSE:
            depth, k = 0, j - 1
            while k >= 0:
                c = scan[k]
                if c in _CLOSE:
                    depth += 1
                elif c in "<([":
                    depth -= 1
                    if depth == 0:
                        break
                k -= 1
            j = max(k, 0)
            if scan[j] != "<" and scan[j] != "[" and not (j > 0 and re.match(r"\w", scan[j - 1])):
                return j  # a parenthesised expression
            continue
        k = j
        while k > 0 and (scan[k - 1].isalnum() or scan[k - 1] == "_"):
            k -= 1
        j = k
        m = re.search(r"::\s*$", scan[:j])
        if not m:
            return j
        j = m.start()


def host_launches(text: str) -> str:
    """Each ``kernel<<<grid, block, shared, stream>>>(args)`` of a file's host code made
    ``(::__gpuenv_host::launch(grid, block, shared, stream), kernel(args))``, a call of the host API's never-run
    stub (hip_runtime_api.h) then of the kernel, so that host code compiles as it does for hipcc; comments and
    string literals left as they are, the line of every other token kept."""
    if "<<<" not in text:
        return text
    scan = _blanked(text)
    edits: list[tuple[int, int, str]] = []
    for m in re.finditer(r"<<<", scan):
        if edits and m.start() < edits[-1][1]:
            continue
        close = scan.find(">>>", m.end())
        paren = re.compile(r"\s*\(").match(scan, close + 3) if close >= 0 else None
        if paren is None:
            continue
        depth, k = 0, paren.end() - 1
        for k in range(paren.end() - 1, len(scan)):
            depth += {"(": 1, ")": -1}.get(scan[k], 0)
            if depth == 0:
                break
        if depth:
            continue
        start = _callee_start(scan, m.start())
        callee, config, args = text[start:m.start()], text[m.end():close], text[close + 3:k + 1]
        edits.append((start, k + 1, f"(::__gpuenv_host::launch({config}), {callee}{args})"))
    for start, end, new in reversed(edits):
        text = text[:start] + new + text[end:]
    return text


def rewrite(text: str, red_zones: bool = True) -> tuple[str, list[str]]:
    """The source with its host-code launches rewritten (``host_launches``), the two shared-memory rewrites
    (``HIP_DYNAMIC_SHARED`` too) and (``red_zones``) the globals one, line numbers kept, and the dynamic shared
    arrays' names."""
    names: list[str] = []
    text = host_launches(text)
    scan = _blanked(text)

    def ext(m: re.Match[str]) -> str:
        t = " ".join(_ATTR.sub(" ", m.group("type")).split())
        if scan[m.start():m.start() + 6] not in ("extern", "HIP_DY"):  # in a comment or a string
            return m.group(0)
        if m.group("name") not in names:
            names.append(m.group("name"))
        nl = m.group(0).count("\n")
        return _dynamic_shared(t, m.group("name"), _file_scope(scan, m.start())) + "\n" * nl

    text = _EXTERN_SHARED.sub(ext, text)
    scan = _blanked(text)
    text = _DYNAMIC_SHARED.sub(ext, text)
    text = re.sub(r"\bstatic(\s+)__shared__\b", lambda m: "\n" * m.group(1).count("\n") + "__shared__", text)
    return _cpu_globals.rewrite_globals(text) if red_zones else text, names


#: a quoted ``#include`` directive (``rewrite_with_headers`` points it at a header's rewritten copy)
_QUOTED_INCLUDE = re.compile(r'^([ \t]*#[ \t]*include[ \t]*)"([^"\n]+)"', re.M)


def rewrite_with_headers(src: Source, folder: str, red_zones: bool = True) -> tuple[str, list[str]]:
    """``rewrite`` of the source, and of the quoted headers it reaches (``Source.quoted_headers``): when one of
    them needs a rewrite (an ``extern __shared__`` array in HeCBench's kernels.h), each is written rewritten into
    ``folder`` (its first line a ``#line`` naming the header) and every quoted include of the source and of the
    copies names, by its absolute path, the copy or else the file the compiler would have taken. The globals
    rewrite stays the main file's. The text, and the dynamic shared arrays' names of them all."""
    raw = {p: data.decode("utf-8", "surrogateescape") for p, data in read_headers(p for p, _ in src.quoted_headers)}
    done = {p: rewrite(t, False) for p, t in raw.items()}
    if all(done[p][0] == t for p, t in raw.items()):
        return rewrite(src.text, red_zones)
    copies = {p: os.path.join(folder, f"h{i}_{os.path.basename(p)}") for i, p in enumerate(raw)}

    def point(text: str, here: str) -> str:
        def one(m: re.Match[str]) -> str:
            for p in lookup(m.group(2), here, src.search):
                if p in copies or p == src.path or os.path.isfile(p):
                    return f'{m.group(1)}"{copies.get(p, p)}"'
            return m.group(0)
        scan = strip_comments(text)
        edits = [(m.start(), m.end(), one(m)) for m in _QUOTED_INCLUDE.finditer(scan)]
        for start, end, new in reversed(edits):
            text = text[:start] + new + text[end:]
        return text

    names: list[str] = []
    for p, t in raw.items():
        text, got = rewrite(point(t, os.path.dirname(p)), False)
        names += [n for n in got if n not in names]
        display = p.replace("\\", "/").replace('"', "")
        with open(copies[p], "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(f'#line 1 "{display}"\n{text}')
    text, got = rewrite(point(src.text, src.dir or os.getcwd()), red_zones)
    return text, got + [n for n in names if n not in got]
