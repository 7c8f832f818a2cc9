"""What the preprocessor sees of a kernel source: comments, ``#include`` lines and the headers they reach.

Pure Python, no compiler, linear in the text; files are read as regular files only (a FIFO, a device
or a 20 GiB sparse file is never read). The cache key is built from ``find_headers``.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from typing import TYPE_CHECKING, Iterable, NamedTuple, Optional, Sequence

from pytest_gpuenv.rtc.errors import KernelCompileError

if TYPE_CHECKING:
    from pytest_gpuenv.rtc.source import Source

#: the largest kernel source or header read
MAX_SOURCE = 64 * 2**20

# An unterminated comment runs to the end of the text and an unterminated literal to the end of its
# line, as in the compiler: every match then consumes what it scanned, so this is linear in the text.
_COMMENT = re.compile(
    r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:\\.|[^\"\\\n])*(?:\"|(?=\n)|\Z)|'(?:\\.|[^'\\\n])*(?:'|(?=\n)|\Z)", re.S
)


def strip_comments(text: str) -> str:
    """Blank out comments (keeping newlines, so offsets and line numbers stay), keep string literals."""

    def repl(m: re.Match[str]) -> str:
        s = m.group(0)
        if s.startswith(("//", "/*")):
            return re.sub(r"[^\n]", " ", s)
        return s

    return _COMMENT.sub(repl, text)


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include(?:_next)?[ \t]*([<"])([^>"\n]+)[>"]', re.M)
#: options that add an include directory (``-Idir`` or ``-I dir``; NVRTC's ``--include-path=dir``)
_DIR_OPTIONS = ("--include-path", "-isystem", "-iquote", "-idirafter", "-I")
#: options that include a file before the source (``-include f``; NVRTC's ``--pre-include=f``)
_FILE_OPTIONS = ("--pre-include", "-include")
#: path -> (its version, bytes, includes): a header is read and scanned again only when it changed
_SCANNED: dict[str, tuple[FileVersion, bytes, list[tuple[bool, str]]]] = {}
#: id(bytes of a scanned header) -> (those bytes, their sha256)
_DIGESTS: dict[int, tuple[bytes, bytes]] = {}


def read_regular(path: str, limit: int = MAX_SOURCE) -> Optional[bytes]:
    """The bytes of a regular file, None for a FIFO, device or directory (never blocks on one).

    OSError when it cannot be read; KernelCompileError when it is larger than ``limit``.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size > limit:
            raise KernelCompileError(f"{path} is {st.st_size} bytes; a kernel source or header may have at most "
                                     f"{limit} bytes", file=path)
        return read_fd(fd, st.st_size + 1)
    finally:
        os.close(fd)


def read_fd(fd: int, size: int) -> bytes:
    """At most ``size`` bytes from ``fd``, fewer at end of file (the cache's entries use it too)."""
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 24))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


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


def digest(data: bytes) -> bytes:
    """sha256 of ``data``; computed once for a header object ``find_headers`` returned (the CUDA
    headers NVRTC reaches are 1.3 MB: hashed on every warm compile_kernel call, they cost a millisecond)."""
    known = _DIGESTS.get(id(data))
    return known[1] if known is not None and known[0] is data else hashlib.sha256(data).digest()


def includes_of(text: str) -> list[tuple[bool, str]]:
    """The ``#include`` (and ``#include_next``) directives of a text: (quoted, name), in order."""
    return [(m.group(1) == '"', m.group(2).strip()) for m in _INCLUDE.finditer(strip_comments(text))]


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
    reads). ``irregular`` gets the paths met that are there but no regular file (a FIFO, a device).
    """
    opt_dirs, opt_files = option_includes(options)
    given = ([src.dir] if src.dir else []) + list(include_dirs) + opt_dirs
    dirs = list(dict.fromkeys(os.path.abspath(d) for d in given))
    cwd = os.getcwd()
    seen: dict[str, bytes] = {}
    first = [(True, n, cwd) for n in list(pre_includes) + opt_files]
    first += [(q, n, src.dir or cwd) for q, n in includes_of(src.text)]
    stack = [iter(first)]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            continue
        quoted, name, here = item
        found = []
        for d in ([here] if quoted else []) + dirs:
            p = os.path.abspath(os.path.join(d, name))
            got = None if p in seen else _scan(p, irregular)
            if got is not None:
                seen[p] = got[0]
                found.append(iter([(q, n, os.path.dirname(p)) for q, n in got[1]]))
        stack.extend(reversed(found))
    return list(seen.items())
