"""The CPU backend of the runtime layer: HIP kernels run on the CPU by the executor in ``src``.

The executor (C++, built once per compiler and cached like a kernel) runs in a child process of pytest
(``runtime.cpu.server``, one per pytest process or xdist worker, started on first use and again after any
death), as a GPU kernel runs behind its driver. A launch is a request: each argument buffer is copied
into a shared arena before it and the writable ones back after it; the child rewrites pointer
arguments to its copies and runs every block on one OS thread. Whatever the kernel does to its process
(exit, abort, a fault, heap corruption, fork, a thread, a hang with signals blocked) ends that process
only: the launch comes back as a report (``KernelExitError``, ``KernelFaultError``, ``KernelWatchdogError``
from pytest's wall-clock limit, ...) and the next launch gets a fresh child. pytest holds no file
descriptor per kernel: the child loads every module from its bytes.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import signal
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from pytest_gpuenv.runtime.cpu import errors, protocol
from pytest_gpuenv.runtime.cpu.child import Arena, Child, Death, Gone
from pytest_gpuenv.runtime.cpu.copies import PIECE_MIN, copy_all, copy_threads
from pytest_gpuenv.runtime.cpu.protocol import PRINTF_CAPACITY, LaunchDesc, Region, Report, c_u32x3
from pytest_gpuenv.runtime.cpu.request import Buffer, LaunchRequest, launch_payload
from pytest_gpuenv.runtime.cpu.sources import INCLUDE_DIR, SRC_DIR

__all__ = ["CpuModule", "CpuRuntime", "INCLUDE_DIR", "LaunchDesc", "LaunchResult", "PRINTF_CAPACITY", "Region",
           "Report", "SRC_DIR", "c_u32x3", "get", "watchdog_seconds", "worker_limit"]

WATCHDOG_ENV = "GPUENV_CPU_WATCHDOG"
WORKERS_ENV = "GPUENV_CPU_WORKERS"
WATCHDOG_MAX = 86400.0
NO_THREAD = -4  # Report.other_thread of a report that belongs to no GPU thread (the process ended)
_SIGNAL_TEXT = {signal.SIGSEGV: "segmentation fault", signal.SIGBUS: "bus error", signal.SIGILL: "illegal instruction",
                signal.SIGFPE: "arithmetic exception", signal.SIGTRAP: "trap", signal.SIGSYS: "bad system call",
                signal.SIGABRT: "abort() was called (by the kernel, or by the C library on heap corruption)"}


def watchdog_seconds(environ: Any = os.environ) -> float:
    """``GPUENV_CPU_WATCHDOG`` (default 10): the seconds one launch may run; ValueError naming it if bad."""
    raw = environ.get(WATCHDOG_ENV, "10")
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= WATCHDOG_MAX:  # also rejects nan, inf and 1e400
        raise ValueError(f"{WATCHDOG_ENV}={raw!r} is not a number of seconds: give a finite number above 0 and "
                         f"at most {WATCHDOG_MAX:g} (the wall-clock limit of one CPU kernel launch)")
    return value


def worker_limit(environ: Any = os.environ) -> int:
    """``GPUENV_CPU_WORKERS``: at most this many threads run the blocks of one unchecked launch (default 0:
    one per core this process may use); ValueError naming it if bad."""
    raw = environ.get(WORKERS_ENV, "0")
    if not raw.strip().isdecimal() or int(raw) > protocol.MAX_WORKERS:
        raise ValueError(f"{WORKERS_ENV}={raw!r} is not a number of threads: give 1 to {protocol.MAX_WORKERS}, or 0 for one "
                         "per core (the threads that run the blocks of an unchecked CPU kernel launch)")
    return int(raw)


@dataclass
class CpuModule:
    """A kernel module: its bytes (a fresh child loads them again) and its handle in the protocol."""

    handle: int
    name: str
    binary: bytes


@dataclass
class LaunchResult:
    report: Report
    output: str
    symbols: list[bytes] = field(default_factory=list)  # the globals ``reads`` named, after the launch


def _grace(watchdog_s: float) -> float:
    """pytest's limit is the child's own watchdog (which names the line) plus this much."""
    return 1.0 + 0.1 * watchdog_s


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def death_report(death: Death, base: int, phase: str, watchdog_s: float) -> Report:
    """The report of a request the child did not live through (or that pytest's watchdog ended)."""
    r, note = Report(), death.note
    r.other_thread = NO_THREAD
    if note.in_launch:
        r.block[:], r.thread[:], r.other_thread = list(note.block), list(note.thread), 0
    exact = False
    for i in range(min(note.nframes, protocol.NOTE_FRAMES)):
        if not base and note.kmask >> i & 1:  # the module was being loaded: its frames are the kernel's
            base = note.bases[i]
        if base and note.bases[i] == base:
            exact = i == 0 and note.kind in (protocol.NOTE_SIGNAL, protocol.NOTE_STUCK)
            r.pc = note.pcs[i] - base
            break
    rc = death.returncode
    if death.watchdog:
        r.kind = 7
        if not exact and r.pc:
            r.pc -= 1
        text = (f"the {phase} ran for more than {watchdog_s:.3g} s; pytest killed the executor process (the kernel "
                "was waiting in a system call or a library, or had blocked signals)")
    elif note.kind in (protocol.NOTE_EXIT, protocol.NOTE_QUICK_EXIT):
        r.kind = protocol.KIND_EXIT
        how = "exit" if note.kind == protocol.NOTE_EXIT else "quick_exit"
        text = f"the kernel called {how}({note.value if note.kind == protocol.NOTE_EXIT else rc})"
    elif note.kind == protocol.NOTE_SIGNAL:
        r.kind, r.addr = 9, note.addr
        text = f"{_signal_name(note.value)}: {_SIGNAL_TEXT.get(note.value, 'fatal signal')}"
        if note.value in (signal.SIGSEGV, signal.SIGBUS):
            text += f" at address 0x{note.addr:x}"
        if not exact and r.pc:
            r.pc -= 1  # a return address: the call is the instruction before it
    elif rc is not None and rc >= 0:
        r.kind, r.pc = protocol.KIND_EXIT, 0
        text = f"the kernel ended the executor process with _exit({rc}) (or an exit system call)"
    else:
        r.kind, r.pc = 9, 0
        text = f"the executor process was killed by {_signal_name(-(rc or 0))}"
    if phase == "load":
        text += " while its module was loaded (the module's static initialisers run then)"
    if death.output:
        text += f"; the process wrote: {death.output}"
    r.text = (text + "; the next launch starts a fresh executor process").encode()[:2047]
    return r


class CpuRuntime:
    """The one CPU runtime of the process: the child that runs launches, and the modules, by digest.

    Launches from several Python threads are served one at a time (each under its own wall clock).
    """

    def __init__(self, executor_binary: bytes) -> None:
        self._executor = executor_binary
        self._lock = threading.Lock()
        self._modules: dict[str, CpuModule] = {}
        self._by_object: dict[int, tuple[bytes, CpuModule]] = {}
        self._arena = Arena()
        self._pid = os.getpid()
        self._child: Optional[Child] = None
        atexit.register(self.close)

    def close(self) -> None:
        with self._lock:
            if self._child is not None:
                self._child.close()
                self._child = None

    def load(self, binary: bytes, name: str) -> CpuModule:
        """The handle of module ``binary`` (the child loads it at its first use)."""
        seen = self._by_object.get(id(binary))
        if seen is not None and seen[0] is binary:  # the same kernel launching again: no hashing
            return seen[1]
        digest = hashlib.sha256(binary).hexdigest()
        with self._lock:
            mod = self._modules.get(digest)
            if mod is None:
                mod = self._modules[digest] = CpuModule(len(self._modules) + 1, name, bytes(binary))
            self._by_object[id(binary)] = (binary, mod)  # holds `binary`: its id is not reused
        return mod

    def _after_fork(self) -> None:
        """In a fork of pytest the child and the arena are the parent's: use new ones."""
        if self._pid != os.getpid():
            self._pid, self._child, self._arena = os.getpid(), None, Arena()

    def _request(self, mod: CpuModule, op: int, payload: bytes, watchdog_s: float, phase: str
                 ) -> tuple[int, int, bytes] | Report:
        """Run one request in a live child with ``mod`` loaded; a Report when the child did not survive."""
        timeout = watchdog_s + _grace(watchdog_s)
        child = self._child
        if child is None or not child.alive():
            if child is not None:
                child.discard()
            self._child = None
            try:
                child = self._child = Child(self._executor, self._arena)
            except (OSError, Gone) as e:
                text = f"the CPU executor's process did not start: {e}"
                if isinstance(e, Gone) and e.death.output:
                    text += f"; it wrote: {e.death.output}"
                return Report(kind=9, other_thread=NO_THREAD, text=text.encode()[:2047])
        base, what = child.loaded.get(mod.handle, 0), "load"
        try:
            if mod.handle not in child.loaded:
                status, base, data = child.request(protocol.OP_LOAD, mod.handle, mod.binary, timeout)
                if status in (protocol.ST_FORK, protocol.ST_THREAD, protocol.ST_STATE):
                    return self._process_report(status, base, "load", data)
                if status != protocol.ST_OK:
                    return Report(kind=9, other_thread=NO_THREAD, text=b"the kernel module could not be loaded: " + data[:1900])
                child.loaded[mod.handle] = base
            what = phase
            status, value, data = child.request(op, mod.handle, payload, timeout)
        except Gone as e:
            self._child = None
            return death_report(e.death, base, what, watchdog_s)
        if status in (protocol.ST_FORK, protocol.ST_THREAD, protocol.ST_STATE):
            return self._process_report(status, value, phase, data)
        return status, value, data

    def _process_report(self, status: int, count: int, phase: str, changes: bytes = b"") -> Report:
        assert self._child is not None
        self._child.discard()  # its extra threads or processes end with it
        self._child = None
        r = Report(kind=protocol.KIND_PROCESS, other_thread=NO_THREAD)
        if status == protocol.ST_STATE:
            r.text = (f"the kernel changed its process for later launches ({changes.decode('utf-8', 'replace')}) "
                      "during the " + phase + ": a GPU kernel cannot set limits, timers or the working folder; the "
                      "next launch starts a fresh executor process").encode()[:2047]
            return r
        what = (f"the kernel started a process ({count} time(s): fork(), system(), popen(), posix_spawn())"
                if status == protocol.ST_FORK
                else f"the kernel started {count} thread(s) that were still running when the {phase} ended")
        r.text = (f"{what}: a GPU kernel cannot start processes or threads; the next launch starts a fresh executor "
                  "process").encode()
        return r

    def launch(self, mod: CpuModule, request: LaunchRequest) -> LaunchResult:
        """Run one launch to its end; the report's ``kind`` is 0 when it succeeded. The globals that
        ``request.state.reads`` names come back in ``symbols``."""
        with self._lock:
            self._after_fork()
            spans, where, used = _spans(request.arguments.buffers)
            self._arena.reserve(used)
            a = self._arena
            threads = _copy_threads() if used >= 2 * PIECE_MIN else 1  # (smaller copies stay on this thread)
            copy_all([(a.base + protocol.DATA_OFF + off, base, length) for base, length, off, _ in spans], threads)
            res = self._request(mod, protocol.OP_LAUNCH, launch_payload(request, a.size, where), request.watchdog_s, "launch")
            if isinstance(res, Report):
                return LaunchResult(res, "")
            if res[0] == protocol.ST_ERROR:
                raise KeyError(f"kernel module {mod.name!r}: {res[2].decode('utf-8', 'replace')}")
            rep = Report.from_buffer_copy(a.mm, protocol.REPORT_OFF)  # type: ignore[arg-type]
            copy_all([(base, a.base + protocol.DATA_OFF + off, length) for base, length, off, writable in spans if writable],
                     threads)
            out_len = min(res[1], PRINTF_CAPACITY)
            output = ctypes.string_at(a.base + protocol.OUT_OFF, out_len).decode("utf-8", "replace") if out_len else ""
            if self._child is not None:
                output += self._child.new_output()
        if out_len >= PRINTF_CAPACITY - 1:
            output += f"\n[gpuenv: device printf output truncated at {PRINTF_CAPACITY} bytes]\n"
        return LaunchResult(rep, output, _symbols(res[2]))

    def read_symbol(self, mod: CpuModule, name: str) -> bytes:
        """The bytes of global ``name`` (a ``__device__``/``__constant__`` variable) of ``mod``."""
        return self._symbol(mod, protocol.OP_READ, name, name.encode())

    def write_symbol(self, mod: CpuModule, name: str, data: bytes) -> None:
        """Overwrite the start of global ``name`` of ``mod`` with ``data`` (at most its size)."""
        raw = name.encode()
        self._symbol(mod, protocol.OP_WRITE, name, len(raw).to_bytes(2, "little") + raw + bytes(data))

    def _symbol(self, mod: CpuModule, op: int, name: str, payload: bytes) -> bytes:
        watchdog = watchdog_seconds()
        with self._lock:
            self._after_fork()
            res = self._request(mod, op, payload, watchdog, "symbol access")
        if isinstance(res, Report):
            cls = {7: errors.KernelWatchdogError, protocol.KIND_EXIT: errors.KernelExitError,
                   protocol.KIND_PROCESS: errors.KernelProcessError}.get(res.kind, errors.KernelFaultError)
            raise cls(f"kernel module {mod.name!r}: {res.text.decode('utf-8', 'replace')}", code="process")
        status, _, data = res
        if status == protocol.ST_MISSING or (status == protocol.ST_ERROR and data.startswith(b"no symbol")):
            raise KeyError(f"kernel module {mod.name!r} has no global {name!r}")
        if status != protocol.ST_OK:
            raise ValueError(f"kernel module {mod.name!r}: {data.decode('utf-8', 'replace')}")
        return data


def _copy_threads() -> int:
    try:
        return copy_threads(worker_limit())
    except ValueError:  # (a kernel launch reports the bad value itself)
        return 1


def _spans(buffers: Sequence[Buffer]) -> tuple[list[tuple[int, int, int, bool]], dict[int, int], int]:
    """Group overlapping buffers: spans (address, bytes, arena offset, any writable), each buffer's
    arena offset by position, and the bytes used. A span's copy keeps its address modulo SPAN_ALIGN."""
    order = sorted(range(len(buffers)), key=lambda i: buffers[i][0])
    spans: list[tuple[int, int, int, bool]] = []
    where: dict[int, int] = {}
    used = k = 0
    while k < len(order):  # one span: the buffers from order[k] on that start before the span's end so far
        lo = hi = buffers[order[k]][0]
        writable, first = False, k
        while k < len(order) and (k == first or buffers[order[k]][0] < hi):
            addr, size, readonly, _ = buffers[order[k]]
            hi = max(hi, addr + size)
            writable = writable or not readonly
            k += 1
        used += protocol.SPAN_GAP  # a gap between copies: a[-1] or a[n] is out of bounds, not in a neighbour's copy
        used += (lo - used) % protocol.SPAN_ALIGN
        spans.append((lo, hi - lo, used, writable))
        for i in order[first:k]:
            where[i] = used + buffers[i][0] - lo
        used += max(hi - lo, 1)
    return spans, where, used


def _symbols(data: bytes) -> list[bytes]:
    """The reply's SYM_SIZE-prefixed symbol bytes."""
    out, pos = [], 0
    while pos < len(data):
        (n,) = protocol.SYM_SIZE.unpack_from(data, pos)
        out.append(data[pos + protocol.SYM_SIZE.size:pos + protocol.SYM_SIZE.size + n])
        pos += protocol.SYM_SIZE.size + n
    return out


_RUNTIME: Optional[CpuRuntime] = None
_RUNTIME_LOCK = threading.Lock()


def get(build_executor: Callable[[], bytes]) -> CpuRuntime:
    """The process's CPU runtime; the executor ``build_executor()`` returns is loaded by its child."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is None:
            _RUNTIME = CpuRuntime(build_executor())
        return _RUNTIME
