"""Reading a kernel source: where it is, its kernels' parameter lists, and the first error of a compiler log.

Pure Python, no compiler, linear in the text (104 KB of unclosed ``extern "C" {`` or 50,000 kernels
parse in milliseconds to a second; ``benchmarks/source_parse.py``). The headers a source reaches, for
the cache key, are ``rtc.includes.find_headers`` (re-exported here).
"""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass
from typing import Optional, Sequence

from pytest_gpuenv.rtc.errors import KernelCompileError
from pytest_gpuenv.rtc.includes import find_headers as find_headers  # re-exported
from pytest_gpuenv.rtc.includes import read_regular, strip_comments

#: the shipped HIP-on-CUDA device headers (``include/hip/hip_runtime.h``)
SHIPPED_INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
#: the shipped stand-in for ``hip/hip_runtime.h`` under hiprtc (takes the real header when present)
HIPRTC_INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include_hiprtc")

_SOURCE_HINT = re.compile(r"__global__|[\n;{}]")


@dataclass
class Source:
    """A kernel source: its text and the file it came from (None for inline source)."""

    text: str  # decoded as UTF-8; bytes that are not UTF-8 (a Latin-1 comment) kept as surrogate escapes
    path: Optional[str]
    #: display name handed to the compiler, so its log points at the real file
    display: str
    #: "hip", or "cuda" for a CUDA-dialect source (``rtc._cuda``: by extension or ``dialect=``)
    dialect: str = "hip"

    @property
    def data(self) -> bytes:
        """The bytes of the source as read (what the compilers are given)."""
        return self.text.encode("utf-8", "surrogateescape")

    @property
    def dir(self) -> Optional[str]:
        return os.path.dirname(self.path) if self.path else None


def looks_like_source(text: str) -> bool:
    return bool(_SOURCE_HINT.search(text))


def _is_file(path: str) -> bool:
    return "__global__" not in path and os.path.isfile(path)  # isfile is False for a NUL or an overlong name


def load_source(source_or_path: str | os.PathLike[str], kernel_dirs: Sequence[str] = ()) -> Source:
    """Read a source given as text or as a path (absolute, relative to cwd, or in ``kernel_dirs``)."""
    name = os.fspath(source_or_path)
    candidates = [name] if os.path.isabs(name) else [os.path.join(d, name) for d in kernel_dirs] + [name]
    if isinstance(source_or_path, str) and looks_like_source(name) and not any(map(_is_file, candidates)):
        return Source(text=source_or_path, path=None, display="<source>.hip")  # a path may hold { } ; too
    for c in candidates:
        if os.path.isfile(c):
            path = os.path.abspath(c)
            try:
                data = read_regular(path)
                if data is None:
                    raise OSError("not a regular file")
                text = data.decode("utf-8", "surrogateescape")  # a Latin-1 licence comment is no error
            except OSError as exc:
                raise KernelCompileError(f"cannot read kernel file {path}: {exc}", file=path) from None
            return Source(text=text, path=path, display=path)
    searched = ", ".join(dict.fromkeys(os.path.abspath(c) for c in candidates))
    raise KernelCompileError(
        f"kernel file {name!r} not found (searched: {searched}); set the ini option gpuenv_kernel_dirs "
        "or pass an absolute path",
        file=name,
    )


# ------------------------------------------------------------------ kernel signatures
#: C type -> (ctypes kind, bytes); kinds are the struct-module codes used by _args
SCALAR_TYPES = {
    "bool": "?",
    "char": "b",
    "signed char": "b",
    "int8_t": "b",
    "unsigned char": "B",
    "uint8_t": "B",
    "short": "h",
    "short int": "h",
    "int16_t": "h",
    "unsigned short": "H",
    "unsigned short int": "H",
    "uint16_t": "H",
    "int": "i",
    "signed": "i",
    "signed int": "i",
    "int32_t": "i",
    "unsigned": "I",
    "unsigned int": "I",
    "uint32_t": "I",
    "long": "q",
    "long int": "q",
    "long long": "q",
    "long long int": "q",
    "int64_t": "q",
    "ptrdiff_t": "q",
    "ssize_t": "q",
    "intptr_t": "q",
    "unsigned long": "Q",
    "unsigned long int": "Q",
    "unsigned long long": "Q",
    "unsigned long long int": "Q",
    "uint64_t": "Q",
    "size_t": "Q",
    "uintptr_t": "Q",
    "float": "f",
    "double": "d",
    "__half": "e",
    "half": "e",
    "_Float16": "e",
}
#: HIP's vector type names: float4, uchar4, ulonglong2, ... -> (element C type, count)
_VECTOR_NAME = re.compile(r"^(u?)(char|short|int|long|longlong|float|double)([1-4])$")
_VECTOR_TEMPLATE = re.compile(r"^(?:\w+::)*HIP_vector_type<(?P<t>[\w ]+), (?P<n>[1-4])u?>$")
_ELEMENT = {"longlong": "long long", "char": "signed char"}


def vector_type(t: str) -> Optional[tuple[str, int]]:
    """``float4`` / ``HIP_vector_type<float, 4u>`` (as demangled) -> ("f", 4); None for anything else."""
    m = _VECTOR_NAME.match(t)
    if m:
        elem = _ELEMENT.get(m.group(2), m.group(2))
        elem = ("unsigned " + elem.replace("signed ", "")) if m.group(1) else elem
        code = SCALAR_TYPES.get(elem)
        return (code, int(m.group(3))) if code else None
    m = _VECTOR_TEMPLATE.match(t)
    if m and m.group("t") in SCALAR_TYPES:
        return SCALAR_TYPES[m.group("t")], int(m.group("n"))
    if t == "__half2":
        return "e", 2
    return None


def vector_name(t: str) -> str:
    """HIP's name of a vector type as demangled: ``HIP_vector_type<unsigned char, 4u>`` -> ``uchar4``."""
    m = _VECTOR_TEMPLATE.match(t)
    if not m or m.group("t") not in SCALAR_TYPES:
        return t
    elem = re.sub(r"^signed ", "", m.group("t").replace("long long", "longlong"))
    return re.sub(r"^unsigned ", "u", elem) + m.group("n")
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "std"}


@dataclass(frozen=True)
class Param:
    """One declared kernel parameter: ``const float* __restrict__ a`` -> Param("a", "float", True)."""

    name: str
    type: str  # base type without qualifiers: "float", "unsigned int", "__half", "HIP_vector_type<float, 4u>"
    pointer: bool
    decl: str  # as written (or as instantiated), for messages
    #: bytes and alignment of the parameter as the compiler laid it out (0: not asked, a plain extern "C" kernel)
    size: int = 0
    align: int = 0

    @property
    def code(self) -> Optional[str]:
        """struct code of a by-value scalar ("i", "f", ...), "P" for pointers, None otherwise (vectors, structs)."""
        return "P" if self.pointer else SCALAR_TYPES.get(self.type)

    @property
    def vector(self) -> Optional[tuple[str, int]]:
        """(element struct code, count) when the type (pointed to) is a HIP vector type, else None."""
        return vector_type(self.type)


# Linear in the text (issue 12): a launch-bounds argument list is at most 256 characters, and the
# search stops at the last ")" so a parameter list always finds its ")" and is never rescanned.
_GLOBAL = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]{0,256}\)\s*)?(?:(?:static|inline|__forceinline__)\s+)?void\s+"
    r"(?:__launch_bounds__\s*\([^)]{0,256}\)\s*)?"
    r"(?P<name>[A-Za-z_]\w*)\s*\((?P<params>[^)]*)\)",
    re.S,
)
_EXTERN_C_BLOCK = re.compile(r'extern\s+"C"\s*\{')
_EXTERN_C = re.compile(r'extern\s+"C"')
_BRACE = re.compile(r"[{}]")
_STATEMENT_END = re.compile(r"[;}{]")
_TEMPLATE = re.compile(r"\btemplate\s*<(.*)>\s*(?:static\s+|inline\s+|__host__\s+|__device__\s+)*$", re.S)


def _extern_c_spans(text: str) -> tuple[list[int], list[int]]:
    """The ``extern "C" { ... }`` blocks as sorted disjoint (starts, ends); an unclosed one runs to the end."""
    opens = {m.end() - 1 for m in _EXTERN_C_BLOCK.finditer(text)}
    spans, stack = [], []
    for m in _BRACE.finditer(text):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            start = stack.pop()
            if start in opens:
                spans.append((start, m.end()))
    spans = sorted(spans + [(o, len(text)) for o in stack if o in opens])
    starts: list[int] = []
    ends: list[int] = []
    for a, b in spans:
        if ends and a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return starts, ends


def parse_param(decl: str) -> Param:
    d = " ".join(decl.split())
    pointer = "*" in d or "&" in d or d.endswith("]")
    d = re.sub(r"\s*\[\s*\]$", "", d)
    toks = [t for t in re.split(r"[\s*&]+", d) if t and t not in _QUALIFIERS]
    toks = [t.replace("std::", "") for t in toks]
    if len(toks) >= 2:
        name, base = toks[-1], " ".join(toks[:-1])
    else:  # unnamed parameter
        name, base = f"arg{0}", " ".join(toks)
    return Param(name=name, type=base, pointer=pointer, decl=d)


@dataclass
class KernelDecl:
    name: str
    params: list[Param]
    extern_c: bool
    line: int
    #: the template parameter list of a kernel template ("int TILE"), None for a plain function
    template: Optional[str] = None

    def describe(self, always_line: bool = False) -> str:
        """``vector_add`` or ``transpose<int TILE> declared at line 12``, for "kernels there" messages."""
        name = self.name if self.template is None else f"{self.name}<{self.template}>"
        return f"{name} declared at line {self.line}" if self.template is not None or always_line else name


def find_kernels(text: str) -> dict[str, KernelDecl]:
    """The ``__global__`` functions of a source, by name, with their parameter lists (linear in the text)."""
    clean = strip_comments(text)
    starts, ends = _extern_c_spans(clean)
    out: dict[str, KernelDecl] = {}
    line, counted = 1, 0
    for m in _GLOBAL.finditer(clean, 0, clean.rfind(")") + 1):
        before = clean[max(0, m.start() - 200) : m.start()]
        stmt = _STATEMENT_END.split(before)[-1]
        block = bisect.bisect_right(starts, m.start()) - 1
        extern_c = bool(_EXTERN_C.search(stmt)) or (block >= 0 and m.start() < ends[block])
        raw = m.group("params").strip()
        params = [] if raw in ("", "void") else [parse_param(p) for p in split_params(raw)]
        params = [p if not p.name.startswith("arg0") else Param(f"arg{i}", p.type, p.pointer, p.decl)
                  for i, p in enumerate(params)]
        line += clean.count("\n", counted, m.start())
        counted = m.start()
        tm = _TEMPLATE.search(stmt)
        out.setdefault(m.group("name"), KernelDecl(m.group("name"), params, extern_c, line,
                                                   " ".join(tm.group(1).split()) if tm else None))
    return out


def split_params(raw: str) -> list[str]:
    """A parameter list split at its top-level commas (none inside <>, () or [])."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(raw):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(raw[start:i])
            start = i + 1
    parts.append(raw[start:])
    return [p.strip() for p in parts if p.strip()]


def kernel_decl(src: Source, name: str) -> KernelDecl:
    """The declaration of kernel ``name`` (a name expression: ``k``, ``ns::k``, ``k<16>``, ``k<float, 256>``,
    looked up by its last unqualified name); KernelCompileError naming the kernels that do exist."""
    kernels = find_kernels(src.text)
    base = name.split("<", 1)[0].rsplit("::", 1)[-1].strip()
    if base not in kernels:
        where = src.path or "the given source"
        have = ", ".join(k.describe() for k in sorted(kernels.values(), key=lambda k: k.name)) or "none"
        raise KernelCompileError(
            f"kernel {name!r} not found in {where} (__global__ kernels there: {have})", file=src.path
        )
    return kernels[base]


# ------------------------------------------------------------------ compiler logs
_LOC = re.compile(
    r"^(?P<file>[^\s:()][^:()\n]*?)(?::(?P<l1>\d+):(?:\d+:)?|\((?P<l2>\d+)\):?)\s*"
    r"(?P<kind>fatal error|catastrophic error|error)\b:?\s*(?P<msg>.*)$",
    re.M,
)


def first_error(log: str) -> Optional[tuple[str, int, str]]:
    """(file, line, message) of the first error a compiler's log reports (clang or EDG style)."""
    m = _LOC.search(log)
    if not m:
        return None
    return m.group("file").strip(), int(m.group("l1") or m.group("l2")), m.group("msg").strip()
