"""A kernel source, read once: its text, what the preprocessor and the parser see of it, the headers it reaches.

``load_source`` makes a ``Source`` from text or a path; every stage of a compile is handed that object and
asks it (``clean``, ``includes``, ``kernels``, ``targets``), each computed at most once, when first asked.
Pure Python, no compiler, linear in the text (104 KB of unclosed ``extern "C" {`` or 50,000 kernels parse
in milliseconds to a second; ``benchmarks/source_parse.py``). Files are read as regular files only (a
FIFO, a device or a 20 GiB sparse file is never read). ``find_headers`` lists the headers a source
reaches, for the cache key.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re
import struct
import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Iterable, Mapping, NamedTuple, Optional, Sequence

from pytest_gpuenv.base import files
from pytest_gpuenv.rtc.errors import KernelCompileError

#: the shipped HIP-on-CUDA device headers (``include/hip/hip_runtime.h``)
SHIPPED_INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
#: the shipped stand-in for ``hip/hip_runtime.h`` under hiprtc (takes the real header when present)
HIPRTC_INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include_hiprtc")
#: the largest kernel source or header read
MAX_SOURCE = 64 * 2**20
#: the most headers ``Source.quoted_headers`` reads
MAX_QUOTED_HEADERS = 256
#: file extensions that make a source CUDA-dialect (``rtc._cuda``)
CUDA_EXTENSIONS = (".cu", ".cuh")
DIALECTS = ("hip", "cuda")
#: headers whose ``#include`` makes a ``.cu`` file HIP (``dialect_of``)
HIP_RUNTIME_HEADERS = ("hip/hip_runtime.h", "hip/hip_runtime_api.h")

_SOURCE_HINT = re.compile(r"__global__|[\n;{}]")
# An unterminated comment runs to the end of the text and an unterminated literal to the end of its
# line, as in the compiler: every match then consumes what it scanned, so this is linear in the text.
_COMMENT = re.compile(
    r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:\\.|[^\"\\\n])*(?:\"|(?=\n)|\Z)|'(?:\\.|[^'\\\n])*(?:'|(?=\n)|\Z)", re.S
)
#: a file the preprocessor reads: ``#include``, ``#include_next``, ``%:include`` (the digraph) and ``#pragma GCC
#: dependency`` (which compares the file's date: it opens it)
_INCLUDE = re.compile(r'^[ \t]*(?:#|%:)[ \t]*(?:include(?:_next)?|pragma[ \t]+GCC[ \t]+dependency)[ \t]*([<"])([^>"\n]+)[>"]',
                      re.M)
#: a header probed, not included: ``__has_include("x.h")``, ``__has_include_next(<x.h>)``; what it finds, or that it
#: finds nothing, changes what the compile builds
_HAS_INCLUDE = re.compile(r'\b__has_include(?:_next)?\s*\(\s*([<"])([^>"\n]+)[>"]\s*\)')
#: a macro that names a header (``#define HP <hp.h>``), and an include or probe through one
_HEADER_MACRO = re.compile(r'^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([<"])([^>"\n]+)[>"][ \t]*$', re.M)
_MACRO_INCLUDE = re.compile(r'(?:^[ \t]*#[ \t]*include(?:_next)?[ \t]+|\b__has_include(?:_next)?\s*\(\s*)(\w+)', re.M)
#: the variables gcc and clang add to the include path (after the -I folders; C_INCLUDE_PATH for C sources only,
#: kept anyway: a header the compile does not read only costs a key that changes more often)
INCLUDE_PATH_VARS = ("CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH")
#: what a name expression may contain: C++ names, template arguments, numbers, simple constant expressions
_EXPR = re.compile(r"^[A-Za-z_:][\w:<>,\s*&().+\-]*$")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


@dataclass(frozen=True)
class Source:
    """A kernel source: its text, the file it came from (None for inline source) and its dialect; what is
    read from the text is computed once, when first asked, and kept with it (``replace`` starts afresh)."""

    text: str  # decoded as UTF-8; bytes that are not UTF-8 (a Latin-1 comment) kept as surrogate escapes
    path: Optional[str]
    #: display name handed to the compiler, so its log points at the real file
    display: str
    #: "hip", or "cuda" for a CUDA-dialect source (by extension or ``dialect=``; ``rtc._cuda`` builds it)
    dialect: str = "hip"
    #: the folders a quoted include is looked up in after the including file's (``quoted_headers``): the
    #: compile's include path (``searching`` sets it; empty: beside the including file only)
    search: tuple[str, ...] = ()
    #: name expressions -> their targets (``targets``)
    _targets: dict[tuple[str, ...], list[Target]] = field(default_factory=dict, init=False, repr=False,
                                                          compare=False)
    #: include paths -> this source searching them (``searching``)
    _searching: dict[tuple[str, ...], Source] = field(default_factory=dict, init=False, repr=False, compare=False)

    @cached_property
    def data(self) -> bytes:
        """The bytes of the source as read (what the compilers are given)."""
        return self.text.encode("utf-8", "surrogateescape")

    @property
    def dir(self) -> Optional[str]:
        return os.path.dirname(self.path) if self.path else None

    @cached_property
    def clean(self) -> str:
        """The text with its comments blanked out (``strip_comments``): offsets and line numbers as in ``text``."""
        return strip_comments(self.text)

    @cached_property
    def includes(self) -> list[tuple[bool, str]]:
        """The ``#include`` (and ``#include_next``) directives: (quoted, name), in order."""
        return _includes_in(self.clean)

    @cached_property
    def kernels(self) -> dict[str, KernelDecl]:
        """The ``__global__`` functions, by name, with their parameter lists: the source's own, then those of the
        headers it includes with quotes (``quoted_headers``: HeCBench's ``main.cu`` includes its ``kernels.h``,
        found beside it or through ``-I``); the first declaration of a name is kept."""
        out = _kernels_in(self.clean)
        for path, clean in self.quoted_headers:
            for name, decl in _kernels_in(clean).items():
                out.setdefault(name, replace(decl, file=path))
        return out

    @cached_property
    def function_uses(self) -> dict[str, frozenset[str]]:
        """Each function defined in the source and its quoted headers, by its unqualified name (overloads and
        template instances together): the identifiers its bodies use (``function_uses``)."""
        out = function_uses(self.clean)
        for _, clean in self.quoted_headers:
            for name, used in function_uses(clean).items():
                out[name] = out.get(name, frozenset()) | used
        return out

    @cached_property
    def quoted_headers(self) -> list[tuple[str, str]]:
        """(path, text with comments blanked) of each header the source reaches through quoted includes, each
        include taken from the first file the compiler would take (``lookup``: beside the including file, the
        working directory's for an inline source, then the folders of ``search``), in the order first met; at
        most ``MAX_QUOTED_HEADERS`` of them."""
        seen: dict[str, str] = {}
        stack = [(self.dir or os.getcwd(), [n for q, n in self.includes if q])]
        while stack and len(seen) < MAX_QUOTED_HEADERS:
            here, names = stack.pop()
            for n in reversed(names):
                for p in lookup(n, here, self.search):
                    got = None if p in seen or p == self.path else _scan(p)
                    if got is not None:
                        seen[p] = strip_comments(got[0].decode("utf-8", "replace"))
                        stack.append((os.path.dirname(p), [m for q, m in got[1] if q]))
                    if got is not None or p in seen or p == self.path:
                        break
        return list(seen.items())

    def searching(self, include_dirs: Sequence[str], options: Sequence[str] = ()) -> Source:
        """This source with its quoted includes looked up as a compile with ``include_dirs`` and ``options``
        looks them up (``search_path``); the same object for the same path, its text not read again."""
        dirs = tuple(search_path(self, include_dirs, options))
        if dirs == self.search:
            return self
        known = self._searching.get(dirs)
        if known is None:
            known = self._searching[dirs] = replace(self, search=dirs)
            for kept in ("data", "clean", "includes"):  # what the text alone gives
                if kept in self.__dict__:
                    known.__dict__[kept] = self.__dict__[kept]
        return known

    def targets(self, exprs: Sequence[str]) -> list[Target]:
        """Each name expression's declaration and whether it is simple, found once per list of expressions
        (KernelCompileError naming the kernels there when one is missing)."""
        key = tuple(exprs)
        known = self._targets.get(key)
        if known is None:
            known = self._targets[key] = [self._target(e) for e in key]
        return known

    def _target(self, raw: str) -> Target:
        e = check_expr(raw)
        try:
            decl = kernel_decl(self, e)
        except KernelCompileError:
            # declared in a way the parser does not read (a macro for __global__, say): the compiler decides
            base = e.split("<", 1)[0].rsplit("::", 1)[-1].strip()
            m = re.search(rf"\b{re.escape(base)}\s*\(", self.clean)
            if m is None:
                raise
            decl = KernelDecl(base, [], False, self.text.count("\n", 0, m.start()) + 1)
        simple = bool(_IDENT.match(e)) and decl.extern_c and decl.template is None and all(
            p.code is not None for p in decl.params)
        return Target(e, decl, simple)

    def with_dialect(self, dialect: Optional[str]) -> Source:
        """This source in ``dialect`` ("hip" or "cuda"; None: as it is); an inline CUDA source's display name
        ends in ``.cu``."""
        d = self.dialect if dialect is None else dialect_of(self.path, dialect, self.text)
        if d == self.dialect:
            return self
        display = self.display
        if self.path is None and display.endswith(".hip"):
            display = display[: -len(".hip")] + ".cu"
        return replace(self, dialect=d, display=display)


def dialect_of(path: Optional[str], dialect: Optional[str], text: Optional[str] = None) -> str:
    """``dialect`` when given ("hip" or "cuda"), else "cuda" for a ``.cu``/``.cuh`` file, unless its ``text``
    includes ``hip/hip_runtime.h`` (or ``hip_runtime_api.h``): HIP in a ``.cu`` file, which hipcc compiles as
    HIP (HeCBench's ``src/*-hip/main.cu``); else "hip"."""
    if dialect is not None:
        d = str(dialect).strip().lower()
        if d not in DIALECTS:
            raise ValueError(f"dialect must be 'hip' or 'cuda', got {dialect!r}")
        return d
    if not (path and path.lower().endswith(CUDA_EXTENSIONS)):
        return "hip"
    hip = text is not None and "hip_runtime" in text and any(
        name.replace(" ", "") in HIP_RUNTIME_HEADERS for _, name in includes_of(text))
    return "hip" if hip else "cuda"


def looks_like_source(text: str) -> bool:
    return bool(_SOURCE_HINT.search(text))


def _is_file(path: str) -> bool:
    return "__global__" not in path and os.path.isfile(path)  # isfile is False for a NUL or an overlong name


def load_source(source_or_path: str | os.PathLike[str], kernel_dirs: Sequence[str] = (),
                dialect: Optional[str] = None) -> Source:
    """The Source of text or of a path (absolute, relative to cwd, or in ``kernel_dirs``), in ``dialect``
    (None: "cuda" for a ``.cu``/``.cuh`` file that includes no ``hip/hip_runtime.h``, else "hip")."""
    name = os.fspath(source_or_path)
    candidates = [name] if os.path.isabs(name) else [os.path.join(d, name) for d in kernel_dirs] + [name]
    if isinstance(source_or_path, str) and looks_like_source(name) and not any(map(_is_file, candidates)):
        d = dialect_of(None, dialect)  # a path may hold { } ; too
        return Source(text=source_or_path, path=None, display="<source>.cu" if d == "cuda" else "<source>.hip",
                      dialect=d)
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
            return Source(text=text, path=path, display=path, dialect=dialect_of(path, dialect, text))
    searched = ", ".join(dict.fromkeys(os.path.abspath(c) for c in candidates))
    raise KernelCompileError(
        f"kernel file {name!r} not found (searched: {searched}); set the ini option gpuenv_kernel_dirs "
        "or pass an absolute path",
        file=name,
    )


# ------------------------------------------------------------------ reading files

def read_regular(path: str, limit: int = MAX_SOURCE) -> Optional[bytes]:
    """A kernel source or header through ``base.files.read_regular`` (None for a FIFO, device or folder):
    KernelCompileError naming the file when it holds more than ``limit`` bytes."""
    try:
        return files.read_regular(path, limit)
    except files.FileTooLarge as exc:
        raise KernelCompileError(f"{path} is {exc.size} bytes; a kernel source or header may have at most "
                                 f"{limit} bytes", file=path) from None


class FileVersion(NamedTuple):
    """What tells one version of a file from another without reading it (its ``os.stat``)."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: str) -> Optional[FileVersion]:
        """The version of the file at ``path`` now, None if it cannot be stat'ed."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def settled(self) -> bool:
        """Changed more than 2 s ago. A same-size edit within a coarse timestamp's tick (FAT: 2 s) leaves
        the version alone, so what was read of a file that is not settled is read again."""
        return max(self.mtime_ns, self.ctime_ns) < time.time_ns() - 2_000_000_000


def versions(paths: Iterable[str]) -> list[Optional[FileVersion]]:
    """The version of each file now (None for one that cannot be stat'ed)."""
    return [FileVersion.of(p) for p in paths]


def unchanged(paths: Iterable[str], known: Sequence[Optional[FileVersion]]) -> bool:
    """Whether the files at ``paths`` are still at the versions ``known`` (``versions`` then), each settled:
    what was read of them stands."""
    return versions(paths) == list(known) and all(v is None or v.settled() for v in known)


# ------------------------------------------------------------------ comments and includes
def strip_comments(text: str) -> str:
    """Blank out comments (keeping newlines, so offsets and line numbers stay), keep string literals."""

    def repl(m: re.Match[str]) -> str:
        s = m.group(0)
        if s.startswith(("//", "/*")):
            return re.sub(r"[^\n]", " ", s)
        return s

    return _COMMENT.sub(repl, text)


def includes_of(text: str) -> list[tuple[bool, str]]:
    """The ``#include`` (and ``#include_next``) directives of a text and the headers it probes with
    ``__has_include``: (quoted, name), directives first, in order."""
    return _includes_in(strip_comments(text))


def _includes_in(clean: str) -> list[tuple[bool, str]]:
    if "\\\n" in clean:  # lines joined by a backslash-newline are one line to the preprocessor
        clean = clean.replace("\\\n", "")
    found = [(m.group(1) == '"', m.group(2).strip()) for m in _INCLUDE.finditer(clean)]
    if "__has_include" in clean:
        found += [(m.group(1) == '"', m.group(2).strip()) for m in _HAS_INCLUDE.finditer(clean)]
    named = {m.group(1): (m.group(2) == '"', m.group(3).strip()) for m in _HEADER_MACRO.finditer(clean)}
    if named:  # ``#define HP <hp.h>`` then ``#include HP`` or ``__has_include(HP)``: the header it names
        found += [named[m.group(1)] for m in _MACRO_INCLUDE.finditer(clean) if m.group(1) in named]
    return found


def include_path_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The include-path variables set in ``environ`` (``INCLUDE_PATH_VARS``), for a cache key."""
    return {k: environ[k] for k in INCLUDE_PATH_VARS if k in environ}


def env_include_dirs(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The folders those variables add (an empty entry of a set value is the working directory, as gcc reads it;
    an empty value adds none)."""
    return [d or os.curdir for v in include_path_env(environ).values() if v for d in v.split(os.pathsep)]


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

    @property
    def element_bytes(self) -> int:
        """Bytes of one element of the type (pointed to): ``float4`` 16, ``float3`` 12; 0 when unknown (a struct)."""
        code = SCALAR_TYPES.get(self.type)
        vec = self.vector
        if vec is not None:
            return struct.calcsize(vec[0]) * vec[1]
        return struct.calcsize(code) if code else 0


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
    #: the header it is declared in, None for the source itself
    file: Optional[str] = None

    def describe(self, always_line: bool = False) -> str:
        """``vector_add`` or ``transpose<int TILE> declared at line 12`` (``... at kernels.h:12`` in a header),
        for "kernels there" messages."""
        name = self.name if self.template is None else f"{self.name}<{self.template}>"
        at = f"{os.path.basename(self.file)}:{self.line}" if self.file else f"line {self.line}"
        return f"{name} declared at {at}" if self.template is not None or always_line else name


def find_kernels(text: str) -> dict[str, KernelDecl]:
    """The ``__global__`` functions of a text, by name, with their parameter lists (linear in the text)."""
    return _kernels_in(strip_comments(text))


def _kernels_in(clean: str) -> dict[str, KernelDecl]:
    """``find_kernels`` of a text whose comments are blanked out (``Source.clean``)."""
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


#: what a function definition's head ends with before its body: ``name(params) const noexcept -> T {``
_FUNCTION_HEAD = re.compile(
    r"(?:^|[^\w:])(?P<name>~?[A-Za-z_]\w*)\s*(?:<[^;{}()]*>\s*)?\((?P<params>(?:[^;{}()]|\([^;{}()]*\))*)\)\s*"
    r"(?:(?:const|volatile|noexcept|override|final|mutable|&&?)\s*|->[^;{}()]*|__attribute__\s*\(\([^;{}]*\)\)\s*)*$")
#: what opens a block whose contents are declarations (a function is looked for inside it)
_SCOPE_HEAD = re.compile(r'\b(?:namespace|struct|class|union)\b[^;{}()]*$|\bextern\s+"C"\s*$')
_NOT_FUNCTIONS = frozenset({"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignas",
                            "__attribute__", "__launch_bounds__", "__declspec"})
_WORD = re.compile(r"\b[A-Za-z_]\w*\b")
_DIRECTIVE = re.compile(r"^[ \t]*(?:#|%:)(?:[^\n]*\\\n)*[^\n]*", re.M)


def function_uses(clean: str) -> dict[str, frozenset[str]]:
    """The functions a text (comments blanked) defines, by unqualified name, each with the identifiers its bodies
    use: what it may call and which file-scope variables it may touch. Linear in the text; blocks that are
    neither a function nor a namespace, class or ``extern "C"`` scope (an initialiser) are skipped."""
    clean = _DIRECTIVE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), clean)  # a macro's braces are not blocks
    out: dict[str, set[str]] = {}
    # per open brace: ("", 0) a scope, (name, start) a function's body, (None, start) a block skipped; every block
    # inside a body or a skipped block is one of its own (None)
    stack: list[tuple[Optional[str], int]] = []
    outside = 0  # how many of the open braces are scopes, from the bottom: all of them when outside any body
    last = 0  # where the current declaration began (after the last ; { or } at scope level)
    for m in re.finditer(r"[{};]", clean):
        c, pos = m.group(), m.start()
        at_scope = outside == len(stack)
        if c == ";":
            last = pos + 1 if at_scope else last
        elif c == "{":
            if not at_scope:
                stack.append((None, pos))
                continue
            head = clean[max(last, pos - 2000):pos]
            f = _FUNCTION_HEAD.search(head)
            if _SCOPE_HEAD.search(head):
                stack.append(("", pos))
                outside += 1
            elif f and f.group("name") not in _NOT_FUNCTIONS:
                stack.append((f.group("name").lstrip("~"), pos + 1))
            else:
                stack.append((None, pos))  # an initialiser, an enum: skipped
            last = pos + 1
        elif stack:
            kind, start = stack.pop()
            if kind == "":
                outside -= 1
            elif kind is not None and outside == len(stack):
                out.setdefault(kind, set()).update(_WORD.findall(clean, start, pos))
            if outside == len(stack):
                last = pos + 1
    return {k: frozenset(v) for k, v in out.items()}


def split_outside_brackets(text: str, sep: str) -> list[str]:
    """``text`` split at each ``sep`` outside brackets (``<>``, ``()``, ``{}``, ``[]``), the pieces as they are:
    ``a<b, c>, d{e, f}`` at ``,`` is ``a<b, c>`` and `` d{e, f}``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<({[":
            depth += 1
        elif ch in ">)}]":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i) and i >= start:
            parts.append(text[start:i])
            start = i + len(sep)
    parts.append(text[start:])
    return parts


def split_params(raw: str) -> list[str]:
    """A parameter list split at its top-level commas (``split_outside_brackets``), blanks stripped."""
    return [p.strip() for p in split_outside_brackets(raw, ",") if p.strip()]


def kernel_decl(src: Source, name: str) -> KernelDecl:
    """The declaration of kernel ``name`` (a name expression: ``k``, ``ns::k``, ``k<16>``, ``k<float, 256>``,
    looked up by its last unqualified name); KernelCompileError naming the kernels that do exist."""
    kernels = src.kernels
    base = name.split("<", 1)[0].rsplit("::", 1)[-1].strip()
    if base not in kernels:
        where = src.path or "the given source"
        have = ", ".join(k.describe() for k in sorted(kernels.values(), key=lambda k: k.name)) or "none"
        raise KernelCompileError(
            f"kernel {name!r} not found in {where} (__global__ kernels there: {have})", file=src.path
        )
    return kernels[base]

# ------------------------------------------------------------------ name expressions
@dataclass
class Target:
    """One name expression of a compile: the declaration it names and whether it is simple (a plain
    identifier of an ``extern "C"`` kernel whose parameters are all scalars and pointers: compiled by its
    name; any other gets a marker, ``rtc.names``)."""

    expr: str
    decl: KernelDecl
    simple: bool


def check_expr(expr: str) -> str:
    e = " ".join(str(expr).split())
    if not e or not _EXPR.match(e) or e.count("<") != e.count(">") or e.count("(") != e.count(")"):
        raise KernelCompileError(
            f"{expr!r} is not a kernel name: expected a C++ name such as 'vector_add', 'ns::scale', 'transpose<16>' "
            "or 'reduce<float, 256>'")
    return e


# ------------------------------------------------------------------ the headers a source reaches
#: options that add an include directory (``-Idir`` or ``-I dir``; NVRTC's ``--include-path=dir``)
_DIR_OPTIONS = ("--include-path", "-isystem", "-iquote", "-idirafter", "-I")
#: options that include a file before the source (``-include f``; NVRTC's ``--pre-include=f``)
_FILE_OPTIONS = ("--pre-include", "-include")
#: path -> (its version, bytes, includes): a header is read and scanned again only when it changed
_SCANNED: dict[str, tuple[FileVersion, bytes, list[tuple[bool, str]]]] = {}
#: id(bytes of a scanned header) -> (those bytes, their sha256)
_DIGESTS: dict[int, tuple[bytes, bytes]] = {}


def _scan(path: str, irregular: Optional[list[str]] = None) -> Optional[tuple[bytes, list[tuple[bool, str]]]]:
    """(bytes, [(quoted, name)]) of a header, None if there is none; ``irregular`` gets ``path`` when
    something is there that is no regular file (a FIFO, a device) or cannot be read."""
    sig = FileVersion.of(path)
    if sig is None:
        return None
    known = _SCANNED.get(path)
    if known is not None and known[0] == sig and sig.settled():
        return known[1], known[2]
    try:
        data = read_regular(path)
    except OSError:
        data = None
    if data is None:
        if irregular is not None:
            irregular.append(path)
        return None
    includes = includes_of(data.decode("utf-8", "replace"))
    if known is not None:
        _DIGESTS.pop(id(known[1]), None)
    _SCANNED[path] = (sig, data, includes)
    _DIGESTS[id(data)] = (data, hashlib.sha256(data).digest())
    return data, includes


def read_headers(paths: Iterable[str]) -> list[tuple[str, bytes]]:
    """(path, bytes) of each of ``paths`` that is a regular file, read as ``find_headers`` reads a header
    (again only when it changed)."""
    out = []
    for path in paths:
        got = _scan(path)
        if got is not None:
            out.append((path, got[0]))
    return out


def digests(headers: Iterable[tuple[str, bytes]]) -> list[bytes]:
    """sha256 of each header's bytes; computed once for a header object ``find_headers`` or ``read_headers``
    returned (the CUDA headers NVRTC reaches are 1.3 MB: hashed on every warm compile_kernel call, they cost a
    millisecond)."""
    out = []
    for _, data in headers:
        known = _DIGESTS.get(id(data))
        out.append(known[1] if known is not None and known[0] is data else hashlib.sha256(data).digest())
    return out


def option_includes(options: Sequence[str]) -> tuple[list[str], list[str]]:
    """(include directories, pre-included files) named in compiler options (``-I dir``, ``-Idir``, ...)."""
    dirs: list[str] = []
    files: list[str] = []
    opts = list(options)
    for i, opt in enumerate(opts):
        for flag in _DIR_OPTIONS + _FILE_OPTIONS:
            out = files if flag in _FILE_OPTIONS else dirs
            if opt == flag:
                out.extend(opts[i + 1 : i + 2])
            elif opt.startswith(flag + "=") or (flag.startswith("-i") or flag == "-I") and opt.startswith(flag):
                out.append(opt[len(flag) :].lstrip("="))
            else:
                continue
            break
    return [d for d in dirs if d], [f for f in files if f]


def search_path(src: Source, include_dirs: Iterable[str], options: Sequence[str] = ()) -> list[str]:
    """The folders a compile searches for an include, in order, each once and absolute: the source's own folder
    (every compiler here gets it as ``-I``), ``include_dirs`` (the compiler's ``-I`` list), the include
    directories named in ``options``, then those of ``CPATH``/``CPLUS_INCLUDE_PATH``/``C_INCLUDE_PATH``, as gcc
    and clang search them."""
    given = ([src.dir] if src.dir else []) + list(include_dirs) + option_includes(options)[0] + env_include_dirs()
    return list(dict.fromkeys(os.path.abspath(d) for d in given))


def lookup(name: str, here: Optional[str], dirs: Iterable[str]) -> list[str]:
    """The paths an include of ``name`` may open, in the order the preprocessor tries them: for a quoted include
    the including file's folder ``here`` first (None for ``<name>``), then the folders of the search path."""
    return list(dict.fromkeys(os.path.abspath(os.path.join(d, name)) for d in ([here] if here else []) + list(dirs)))


def refuse_irregular_headers(src: Source, dirs: Sequence[str], *, pre_includes: Sequence[str] = (),
                             options: Sequence[str] = ()) -> None:
    """KernelCompileError naming the first header the compile would reach that is there but no regular file nor
    folder (a FIFO, a device): the compiler would block on it or read it without end. Called just before a
    compiler starts; the cache key is made without it (``find_headers``' ``irregular``)."""
    found: list[str] = []
    find_headers(src, dirs, pre_includes=pre_includes, options=options, irregular=found)
    junk = [p for p in found if not os.path.isdir(p)]  # a folder named like a header: compilers pass it by
    if junk:
        raise KernelCompileError(f"{junk[0]} is not a regular file (a FIFO, a device or a folder): a kernel's headers "
                                 "must be files; refused before the compiler started", file=junk[0])


def find_headers(src: Source, include_dirs: Iterable[str], *, pre_includes: Sequence[str] = (),
                 options: Sequence[str] = (), irregular: Optional[list[str]] = None) -> list[tuple[str, bytes]]:
    """Every header the compiler can reach from ``src``: (path, bytes), in the order first met.

    ``include_dirs`` is the compiler's ``-I`` list. Searched as well: the source's own directory (every
    compiler here gets it as ``-I``), the include directories named in ``options`` and, for a quoted
    include, the including file's directory (the working directory for an inline source, as NVRTC
    does). An include is followed into EVERY file of that name on the search path, not only the first:
    whichever the compiler takes, a change to it changes the cache key. ``pre_includes`` (and
    ``-include``/``--pre-include`` in options) are included before the source, looked up from the
    working directory on. Headers found nowhere are the compiler's or the system's (the compiler's
    identity stands for them); ``#include MACRO`` is not followed (``_deps`` lists what the preprocessor
    reads). ``irregular`` gets the paths met that are there but no regular file (a FIFO, a device). The folders
    of ``CPATH``/``CPLUS_INCLUDE_PATH``/``C_INCLUDE_PATH`` are searched after the others, as gcc and clang do, and
    a header a ``__has_include`` probes is followed as an include is (one that is not there changes the key
    when it appears).
    """
    opt_files = option_includes(options)[1]
    dirs = search_path(src, include_dirs, options)
    cwd = os.getcwd()
    seen: dict[str, bytes] = {}
    first = [(True, n, cwd) for n in list(pre_includes) + opt_files]
    first += [(q, n, src.dir or cwd) for q, n in src.includes]
    stack = [iter(first)]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            continue
        quoted, name, here = item
        found = []
        for p in lookup(name, here if quoted else None, dirs):
            got = None if p in seen else _scan(p, irregular)
            if got is not None:
                seen[p] = got[0]
                found.append(iter([(q, n, os.path.dirname(p)) for q, n in got[1]]))
        stack.extend(reversed(found))
    return list(seen.items())
