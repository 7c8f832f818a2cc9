"""The CPU backend of the runtime layer: HIP kernels run on the CPU by the executor in ``cpu_src``.

The executor (C++, built once per compiler and cached like a kernel) is loaded into the process with
``RTLD_GLOBAL``; kernel modules built for it (``pytest_gpuenv.rtc._cpu``) resolve its entry points.
Both are loaded from their bytes through an anonymous ``memfd``: no path on disk is trusted. A launch
runs every block on this OS thread; it never hangs (watchdog) and never crashes the process (faults
and failed checks come back as a report, formatted by ``_cpu_report``).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

SRC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu_src")
INCLUDE_DIR = os.path.join(SRC_DIR, "include")
EXECUTOR_SOURCES = ("executor.cpp", "signals.cpp", "warps.cpp", "checks.cpp")
EXECUTOR_HEADERS = ("executor_int.h", os.path.join("include", "gpuenv_cpu.h"))
PRINTF_CAPACITY = 1 << 20
c_u32x3 = ctypes.c_uint32 * 3


class Region(ctypes.Structure):
    _fields_ = [("base", ctypes.c_uint64), ("size", ctypes.c_uint64), ("readonly", ctypes.c_int32),
                ("index", ctypes.c_int32)]


class Report(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("is_write", ctypes.c_int32), ("size", ctypes.c_int32),
                ("region_kind", ctypes.c_int32), ("region_index", ctypes.c_int32), ("other_thread", ctypes.c_int32),
                ("offset", ctypes.c_int64), ("addr", ctypes.c_uint64), ("pc", ctypes.c_uint64),
                ("block", c_u32x3), ("thread", c_u32x3), ("text", ctypes.c_char * 2048),
                ("warnings", ctypes.c_char * 2048)]


class LaunchDesc(ctypes.Structure):
    _fields_ = [("entry", ctypes.c_void_p), ("args", ctypes.c_void_p), ("grid", c_u32x3), ("block", c_u32x3),
                ("shared_bytes", ctypes.c_uint64), ("warp_size", ctypes.c_int32), ("check", ctypes.c_int32),
                ("shared_lo", ctypes.c_void_p), ("shared_hi", ctypes.c_void_p),
                ("regions", ctypes.POINTER(Region)), ("nregions", ctypes.c_int32), ("nvars", ctypes.c_int32),
                ("vars", ctypes.POINTER(Region)), ("watchdog_s", ctypes.c_double), ("out", ctypes.c_void_p),
                ("out_cap", ctypes.c_uint64), ("out_len", ctypes.c_uint64)]


def executor_sources() -> list[tuple[str, bytes]]:
    """(name, bytes) of every file the executor library is built from (its cache key)."""
    out = []
    for name in EXECUTOR_SOURCES + EXECUTOR_HEADERS:
        with open(os.path.join(SRC_DIR, name), "rb") as f:
            out.append((name, f.read()))
    return out


def load_bytes(binary: bytes, name: str, global_symbols: bool = False) -> ctypes.CDLL:
    """Load a shared library from its bytes through an anonymous memfd (no file path is trusted).

    The memfd stays open for the life of the process: the dynamic loader knows a library by its path
    (``/proc/self/fd/N``), so N must not name another library later.
    """
    fd = os.memfd_create(name, getattr(os, "MFD_CLOEXEC", 1))
    try:
        view = memoryview(binary)
        while view:
            view = view[os.write(fd, view):]
        mode = ctypes.RTLD_GLOBAL if global_symbols else ctypes.RTLD_LOCAL
        lib = ctypes.CDLL(f"/proc/self/fd/{fd}", mode=mode)
    except BaseException:
        os.close(fd)
        raise
    _OPEN_FDS.append(fd)
    return lib


_OPEN_FDS: list[int] = []


@dataclass
class CpuModule:
    """A kernel module loaded into the process: its entry point and static shared-memory section."""

    lib: ctypes.CDLL
    entry: int
    shared_lo: int
    shared_hi: int


@dataclass
class LaunchResult:
    report: Report
    output: str


class CpuRuntime:
    """The one CPU runtime of the process: the loaded executor and the kernel modules, by digest."""

    def __init__(self, executor_binary: bytes) -> None:
        self.lib = load_bytes(executor_binary, "gpuenv-cpu-executor", global_symbols=True)
        self.lib.gpuenv_launch.argtypes = [ctypes.POINTER(LaunchDesc), ctypes.POINTER(Report)]
        self.lib.gpuenv_launch.restype = ctypes.c_int
        self._modules: dict[str, CpuModule] = {}
        self._out = ctypes.create_string_buffer(PRINTF_CAPACITY)

    def load(self, binary: bytes, name: str) -> CpuModule:
        digest = hashlib.sha256(binary).hexdigest()
        mod = self._modules.get(digest)
        if mod is None:
            lib = load_bytes(binary, f"gpuenv-kernel-{name}")
            lo, hi = ctypes.c_void_p(), ctypes.c_void_p()
            lib["__gpuenv_shared_range"](ctypes.byref(lo), ctypes.byref(hi))
            entry = ctypes.cast(lib["__gpuenv_entry"], ctypes.c_void_p).value or 0
            mod = self._modules[digest] = CpuModule(lib, entry, lo.value or 0, hi.value or 0)
        return mod

    def _symbol(self, mod: CpuModule, name: str) -> tuple[int, int]:
        """(address, bytes) of global ``name``: dlsym, and the size from the library's symbol table."""
        addr = ctypes.cast(mod.lib[name], ctypes.c_void_p).value or 0
        return addr, _symbol_sizes(mod.lib._name).get(name, 0)

    def read_symbol(self, mod: CpuModule, name: str) -> bytes:
        """The bytes of global ``name`` (a ``__device__``/``__constant__`` variable) of ``mod``."""
        addr, size = self._symbol(mod, name)
        return ctypes.string_at(addr, size)

    def write_symbol(self, mod: CpuModule, name: str, data: bytes) -> None:
        """Overwrite the start of global ``name`` of ``mod`` with ``data`` (at most its size)."""
        addr, size = self._symbol(mod, name)
        ctypes.memmove(addr, bytes(data), min(len(data), size))

    def launch(self, mod: CpuModule, grid: Sequence[int], block: Sequence[int], args_address: int,
               regions: Sequence[tuple[int, int, bool, int]], shared_vars: Sequence[tuple[int, int, int]],
               shared_mem: int, warp_size: int, check: int, watchdog_s: float) -> LaunchResult:
        """Run one launch to its end; the report's ``kind`` is 0 when it succeeded.

        ``shared_vars``: (offset from the module's load address, bytes, variable number or -1 for a red
        zone), sorted by offset; ``check``: bit 0 checks accesses, bit 1 runs each wave in lockstep."""
        regs = (Region * max(1, len(regions)))(*[Region(b, s, int(ro), i) for b, s, ro, i in regions])
        var_arr = (Region * max(1, len(shared_vars)))(*[Region(o, s, int(i < 0), i) for o, s, i in shared_vars])
        d = LaunchDesc(entry=mod.entry, args=args_address, grid=c_u32x3(*grid), block=c_u32x3(*block),
                       shared_bytes=shared_mem, warp_size=warp_size, check=int(check), shared_lo=mod.shared_lo,
                       shared_hi=mod.shared_hi, regions=regs, nregions=len(regions), nvars=len(shared_vars),
                       vars=var_arr, watchdog_s=watchdog_s, out=ctypes.addressof(self._out),
                       out_cap=PRINTF_CAPACITY, out_len=0)
        rep = Report()
        self.lib.gpuenv_launch(ctypes.byref(d), ctypes.byref(rep))
        output = self._out.raw[: d.out_len].decode("utf-8", "replace")
        if d.out_len >= PRINTF_CAPACITY - 1:
            output += f"\n[gpuenv: device printf output truncated at {PRINTF_CAPACITY} bytes]\n"
        return LaunchResult(rep, output)


@functools.lru_cache(maxsize=64)
def _symbol_sizes(path: str) -> dict[str, int]:
    """name -> st_size of a loaded library's symbols (its memfd, ``/proc/self/fd/N``, stays open)."""
    from pytest_gpuenv.rtc._symbols import symbols

    with open(path, "rb") as f:
        return {s.name: s.size for s in symbols(f.read())}


_RUNTIME: Optional[CpuRuntime] = None


def get(build_executor: Callable[[], bytes]) -> CpuRuntime:
    """The process's CPU runtime, loading the executor ``build_executor()`` returns on first use."""
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = CpuRuntime(build_executor())
    return _RUNTIME


