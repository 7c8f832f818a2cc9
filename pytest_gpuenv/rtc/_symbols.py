"""The symbol table of a code object and C++ demangling, for name expressions and module globals.

Reads the ELF symbol tables (``.symtab``, ``.dynsym``) of what the compilers produce: an AMD code
object (hiprtc), a clang offload bundle holding one (``hipcc --genco``), a cubin (NVRTC, nvcc) and the
CPU executor's shared library. Only 64-bit little-endian ELF, which all four are. Demangling uses the
C++ runtime's own demangler (``__cxa_demangle`` of libstdc++ or libc++, the one ``c++filt`` is built
from), through ctypes; ``c++filt``/``llvm-cxxfilt`` where no C++ runtime library can be loaded.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import shutil
import struct
import subprocess
from typing import NamedTuple, Optional, Sequence

_BUNDLE = b"__CLANG_OFFLOAD_BUNDLE__"
_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
STT_OBJECT, STT_FUNC = 1, 2


class Symbol(NamedTuple):
    name: str
    kind: int  # STT_OBJECT, STT_FUNC, ...
    value: int
    size: int
    section: int


def elf_images(binary: bytes) -> list[bytes]:
    """The device ELF images in ``binary``: itself, or each non-host entry of a clang offload bundle."""
    if not binary.startswith(_BUNDLE):
        return [binary]
    # clang-offload-bundler's binary format: magic, u64 count, then per entry u64 offset, u64 size,
    # u64 triple length and the triple (llvm clang/lib/Driver/OffloadBundler.cpp, BinaryFileHandler)
    (count,) = struct.unpack_from("<Q", binary, len(_BUNDLE))
    pos, out = len(_BUNDLE) + 8, []
    for _ in range(count):
        off, size, tlen = struct.unpack_from("<QQQ", binary, pos)
        triple = binary[pos + 24: pos + 24 + tlen]
        pos += 24 + tlen
        if size and not triple.startswith(b"host"):
            out.append(binary[off: off + size])
    return out


def symbols(binary: bytes) -> list[Symbol]:
    """Every named symbol of every ELF image in ``binary`` (duplicates from .symtab/.dynsym dropped)."""
    out: dict[str, Symbol] = {}
    for img in elf_images(binary):
        if img[:4] != b"\x7fELF" or img[4] != 2 or img[5] != 1:
            continue  # not a 64-bit little-endian ELF
        (shoff,) = struct.unpack_from("<Q", img, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", img, 0x3A)
        secs = [struct.unpack_from("<IIQQQQIIQQ", img, shoff + i * shentsize) for i in range(shnum)]
        for _name, stype, _fl, _addr, offset, size, link, _info, _al, entsize in secs:
            if stype not in (_SHT_SYMTAB, _SHT_DYNSYM) or link >= len(secs):
                continue
            stroff = secs[link][4]
            for i in range(size // (entsize or 24)):
                nm, info, _other, shndx, value, ssize = struct.unpack_from("<IBBHQQ", img, offset + i * (entsize or 24))
                if not nm:
                    continue
                end = img.index(b"\0", stroff + nm)
                name = img[stroff + nm: end].decode("utf-8", "replace")
                out.setdefault(name, Symbol(name, info & 0xF, value, ssize, shndx))
    return list(out.values())


@functools.cache
def _cxa() -> Optional[tuple[object, object]]:
    for lib in ("libstdc++.so.6", ctypes.util.find_library("stdc++"), "libc++abi.so.1", ctypes.util.find_library("c++")):
        if not lib:
            continue
        try:
            f = ctypes.CDLL(lib).__cxa_demangle
            free = ctypes.CDLL(None).free
        except (OSError, AttributeError):
            continue
        f.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        f.restype = ctypes.c_void_p
        free.argtypes = [ctypes.c_void_p]
        return f, free
    return None


def demangle(names: Sequence[str]) -> list[str]:
    """Each Itanium-mangled name demangled; a name that is not mangled (extern "C") comes back as is."""
    cxa = _cxa()
    if cxa is not None:
        f, free = cxa
        out = []
        for n in names:
            status = ctypes.c_int()
            p = f(n.encode(), None, None, ctypes.byref(status)) if n.startswith("_Z") else None  # type: ignore[operator]
            if p:
                out.append(ctypes.string_at(p).decode("utf-8", "replace"))
                free(p)  # type: ignore[operator]
            else:
                out.append(n)
        return out
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt")
    if tool is None:
        raise OSError("no C++ demangler: neither libstdc++/libc++ nor c++filt is installed")
    res = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=60, check=True)
    lines = res.stdout.splitlines()
    return lines if len(lines) == len(names) else list(names)
