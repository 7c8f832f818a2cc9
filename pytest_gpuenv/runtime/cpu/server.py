"""The CPU executor's child process: ``python -I -S server.py REQ_FD REPLY_FD ARENA_FD``.

pytest starts one per process (``runtime.cpu.child``); it loads the executor and the kernel modules from
their bytes (anonymous memfds) and serves load, launch and symbol requests, one at a time. Whatever a
kernel does here (exit, abort, a fault outside a launch, fork, a thread, a hang) ends or wedges this
process only; pytest reads the death note (``src/death_note.cpp``) and starts a fresh one.

A Python server (rather than a C++ one) reuses the ctypes descriptions pytest already has, needs no
second build product, and costs one interpreter start (about 20 ms) per pytest process. A launch request is
read by the executor itself (``gpuenv_server_launch`` in src/request.cpp): the Python here handles its module
globals, picks the workers and replies, so that a small launch's round trip is mostly the pipes' own.
Standard library only; ``protocol`` is loaded from this file's folder by its path. The executor's structs
were checked against protocol.py's field by field when it was built (src/protocol.h), so nothing is
checked at load.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import resource
import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_gpuenv.runtime.cpu import protocol
elif __name__ == "__main__":  # started by runtime.cpu.child as a script with -I -S: the protocol by its path
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "gpuenv_cpu_protocol", os.path.join(os.path.dirname(os.path.abspath(__file__)), "protocol.py"))
    assert _spec is not None and _spec.loader is not None
    protocol = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = protocol  # its dataclasses look their module up
    _spec.loader.exec_module(protocol)
else:  # imported as part of the package (tools, type checks)
    from pytest_gpuenv.runtime.cpu import protocol

_RTLD_DL_SYMENT = 1
READ_AHEAD = 1 << 16  # the parent writes a request at once and waits for its reply: a read takes no more than it


class Dlinfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                ("saddr", ctypes.c_void_p)]


class Elf64Sym(ctypes.Structure):
    _fields_ = [("name", ctypes.c_uint32), ("info", ctypes.c_uint8), ("other", ctypes.c_uint8),
                ("shndx", ctypes.c_uint16), ("value", ctypes.c_uint64), ("size", ctypes.c_uint64)]


def load_bytes(binary: bytes, name: str, global_symbols: bool = False) -> ctypes.CDLL:
    """A shared library loaded from its bytes through an anonymous memfd; the fd stays open here (the
    loader knows a library by its path, so ``/proc/self/fd/N`` must not name another library later)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    view = memoryview(binary)
    while view:
        view = view[os.write(fd, view):]
    return ctypes.CDLL(f"/proc/self/fd/{fd}", mode=ctypes.RTLD_GLOBAL if global_symbols else ctypes.RTLD_LOCAL)


def read_exact(fd: int, n: int) -> bytes:
    parts, left = [], n
    while left:
        b = os.read(fd, left)
        if not b:
            raise EOFError
        parts.append(b)
        left -= len(b)
    return b"".join(parts)


class Module:
    """A kernel module loaded in this process, and its further copies for worker threads (``copies``)."""

    def __init__(self, lib: ctypes.CDLL, binary: bytes = b"", name: str = "") -> None:
        self.lib = lib
        self.binary, self.name = binary, name
        self.copies: list[ctypes.CDLL] = []  # each with its own globals, static __shared__ and gpuenv_state
        self._workers: dict[int, ctypes.Array[protocol.Worker]] = {}
        lo, hi = ctypes.c_void_p(), ctypes.c_void_p()
        lib["__gpuenv_shared_range"](ctypes.byref(lo), ctypes.byref(hi))
        self.lo, self.hi = lo.value or 0, hi.value or 0
        try:  # modules built before the globals section existed have no range
            lib["__gpuenv_globals_range"](ctypes.byref(lo), ctypes.byref(hi))
            self.glo, self.ghi = lo.value or 0, hi.value or 0
        except AttributeError:
            self.glo = self.ghi = 0
        self.entry = ctypes.cast(lib["__gpuenv_entry"], ctypes.c_void_p).value or 0
        info = Dlinfo()
        self.base = (info.fbase or 0) if _dladdr(self.entry, info) else 0

    def libs(self, n: int) -> list[ctypes.CDLL]:
        """This module and copies of it, ``n`` in all (a copy is a second load from its own memfd)."""
        while len(self.copies) < n - 1:
            self.copies.append(load_bytes(self.binary, f"{self.name}-copy{len(self.copies) + 1}"))
        return [self.lib, *self.copies[:n - 1]]

    def workers(self, n: int) -> ctypes.Array[protocol.Worker]:
        """Entry and ``gpuenv_state`` of this module and its copies, ``n`` in all (made once for each ``n``)."""
        out = self._workers.get(n)
        if out is None:
            out = self._workers[n] = (protocol.Worker * n)()
            for i, lib in enumerate(self.libs(n)):
                state = lib["__gpuenv_state_ptr"]
                state.restype = ctypes.c_void_p
                out[i] = protocol.Worker(ctypes.cast(lib["__gpuenv_entry"], ctypes.c_void_p).value, state())
        return out


def _dladdr(addr: int, info: Dlinfo) -> int:
    return int(_LIBC.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)))


def bind(exe: ctypes.CDLL) -> None:
    """The argument types of the executor's server entry points."""
    exe.gpuenv_server_init.argtypes = [ctypes.c_void_p]
    exe.gpuenv_server_after.argtypes = [ctypes.c_int, ctypes.c_int64]
    # request, its bytes, where its SVAR section starts; arena, report, printf output, its capacity; the
    # module's shared range and globals section; its workers and their number
    u64, ptr = ctypes.c_uint64, ctypes.c_void_p
    exe.gpuenv_server_launch.argtypes = (ctypes.c_char_p, u64, u64, ptr, ptr, ptr, u64, ptr, ptr, u64, u64,
                                         ctypes.POINTER(protocol.Worker), ctypes.c_int32)
    exe.gpuenv_server_launch.restype = ctypes.c_int64


_LIBC = ctypes.CDLL(None)
_LIBC.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(Dlinfo)]
_LIBC.dladdr1.argtypes = [ctypes.c_void_p, ctypes.POINTER(Dlinfo), ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]


#: the limits a kernel could change for the rest of the process's life (a lower RLIMIT_NOFILE fails every later
#: module load, a lower RLIMIT_FSIZE every later write), and the interval timers it could arm (alarm() would end
#: a later launch with SIGALRM); the executor's own watchdog is a POSIX timer (src/signals.cpp), not one of these
LIMITS = ("RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_STACK", "RLIMIT_CORE", "RLIMIT_CPU",
          "RLIMIT_NPROC", "RLIMIT_MEMLOCK")
TIMERS = ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF")


def process_state() -> dict[str, object]:
    """What of this process a kernel must leave as it found it: its resource limits, working folder, signal mask
    and umask."""
    state: dict[str, object] = {n: resource.getrlimit(getattr(resource, n)) for n in LIMITS if hasattr(resource, n)}
    here = os.stat(".")  # (getcwd() fails once the folder is deleted; its identity does not)
    state["working folder"] = (here.st_dev, here.st_ino)
    # blocked signals stop the executor's watchdog and fault reports in later launches
    state["blocked signals"] = sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))
    umask = os.umask(0o077)  # (read by setting: this process runs no other thread between launches)
    os.umask(umask)
    state["umask"] = oct(umask)
    return state


def state_changes(before: dict[str, object]) -> list[str]:
    """How the process differs from ``before`` (``process_state``), and the interval timers armed."""
    now = process_state()
    out = [f"{name} {before[name]} -> {now[name]}" for name in before if now.get(name) != before[name]]
    out += [f"{t} armed (alarm() or setitimer())" for t in TIMERS if signal.getitimer(getattr(signal, t)) != (0.0, 0.0)]
    return out


class Server:
    def __init__(self, req: int, reply: int, arena_fd: int) -> None:
        self.req, self.reply, self.arena_fd = req, reply, arena_fd
        self.note = mmap.mmap(arena_fd, protocol.NOTE_BYTES)  # its own mapping: never moves when the arena grows
        self.note_anchor = ctypes.c_char.from_buffer(self.note)
        self.arena = mmap.mmap(arena_fd, os.fstat(arena_fd).st_size)
        self.anchor = ctypes.c_char.from_buffer(self.arena)
        self.base = ctypes.addressof(self.anchor)
        self.exe: ctypes.CDLL | None = None
        self.modules: dict[int, Module] = {}
        self.report = protocol.Report.from_address(self.base + protocol.REPORT_OFF)
        # the threads of this process, plus 2, are the link count of /proc/self/task (gpuenv_server_after)
        self.task_dir = os.open("/proc/self/task", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.tasks = os.fstat(self.task_dir).st_nlink

    def remap(self, size: int) -> None:
        """Map the arena at ``size`` bytes (it only grows). The new mapping is made before the old one is let go:
        a size the shared file does not have (a malformed request) fails that request and leaves the arena as
        it was, so the next launch works."""
        if size <= len(self.arena):
            return
        have = os.fstat(self.arena_fd).st_size
        if size > have:
            raise ValueError(f"the request names an arena of {size} bytes; the shared arena has {have}")
        arena = mmap.mmap(self.arena_fd, size)
        anchor = ctypes.c_char.from_buffer(arena)
        del self.report, self.anchor
        self.arena.close()
        self.arena, self.anchor = arena, anchor
        self.base = ctypes.addressof(self.anchor)
        self.report = protocol.Report.from_address(self.base + protocol.REPORT_OFF)

    def send(self, status: int, value: int = 0, payload: bytes = b"") -> None:
        data = protocol.REPLY.pack(status, value, len(payload)) + payload
        while data:
            data = data[os.write(self.reply, data):]

    def serve(self) -> None:
        while True:
            try:
                data = os.read(self.req, READ_AHEAD)  # the head and, mostly, all of the payload
                if not data:
                    return
                if len(data) < protocol.HEAD.size:
                    data += read_exact(self.req, protocol.HEAD.size - len(data))
                op, handle, n = protocol.HEAD.unpack_from(data)
                payload = data[protocol.HEAD.size:]
                if len(payload) < n:
                    payload += read_exact(self.req, n - len(payload))
            except EOFError:
                return
            try:
                self.one(op, handle, payload)
            except Exception as e:  # a module that does not load, a bad request: say so, keep serving
                self.send(protocol.ST_ERROR, 0, f"{type(e).__name__}: {e}".encode())

    def one(self, op: int, handle: int, payload: bytes) -> None:
        if op == protocol.OP_INIT:
            self.init(payload)
        elif op == protocol.OP_LOAD:
            name = f"gpuenv-kernel-{handle}"
            mod = self.modules[handle] = Module(load_bytes(payload, name), payload, name)
            self.after(protocol.ST_OK, mod.base)
        elif handle not in self.modules:
            self.send(protocol.ST_MISSING)
        elif op == protocol.OP_LAUNCH:
            self.launch(self.modules[handle], payload)
        else:
            self.symbol(self.modules[handle], op, payload)

    def init(self, executor: bytes) -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # one memfd per kernel module lives here
        self.exe = load_bytes(executor, "gpuenv-cpu-executor", global_symbols=True)
        bind(self.exe)
        self.exe.gpuenv_server_init(ctypes.addressof(self.note_anchor))
        self.state = process_state()
        self.send(protocol.ST_OK, os.getpid())

    def after(self, status: int, value: int = 0, payload: bytes = b"") -> None:
        """Reply, unless the kernel forked, left a thread running or changed the process's limits, timers or
        working folder: then say that instead (pytest starts a fresh child for the next launch)."""
        assert self.exe is not None
        left = self.exe.gpuenv_server_after(self.task_dir, self.tasks)
        changes = state_changes(self.state) if left == 0 else []
        if changes:
            self.send(protocol.ST_STATE, 0, "; ".join(changes).encode())
        elif left > 0:
            self.send(protocol.ST_FORK, left)
        elif left < 0:
            self.send(protocol.ST_THREAD, -left)
        else:
            self.send(status, value, payload)

    def launch(self, mod: Module, payload: bytes) -> None:
        """The symbol sections are handled here, the rest of the request by ``gpuenv_server_launch`` (C)."""
        assert self.exe is not None
        (gx, gy, gz, _, _, _, _, arena_bytes, _, _, mode, _, _, _, _, nwrites, nreads) = protocol.LAUNCH.unpack_from(payload)
        self.remap(arena_bytes)
        pos = protocol.LAUNCH.size
        reads = []
        try:
            for _ in range(nwrites):
                n, size = protocol.SYM_WRITE.unpack_from(payload, pos)
                pos += protocol.SYM_WRITE.size
                write_symbol(mod, payload[pos:pos + n].decode(), payload[pos + n:pos + n + size])
                pos += n + size
            for _ in range(nreads):
                (n,) = protocol.SYM_READ.unpack_from(payload, pos)
                pos += protocol.SYM_READ.size
                reads.append(payload[pos:pos + n].decode())
                pos += n
                symbol_at(mod, reads[-1])
        except SymbolError as e:
            self.send(protocol.ST_ERROR, 0, str(e).encode())
            return
        nworkers = 1
        if mode & protocol.Mode.PARALLEL and gx * gy * gz > 1:  # one worker per core this process may use, at most one
            # per block, at most the cap
            cap = mode >> protocol.WORKERS_SHIFT
            nworkers = max(1, min(len(os.sched_getaffinity(0)), gx * gy * gz, cap or protocol.MAX_WORKERS))
        out_len = self.exe.gpuenv_server_launch(payload, len(payload), pos, self.base, self.base + protocol.REPORT_OFF,
                                                self.base + protocol.OUT_OFF, protocol.PRINTF_CAPACITY, mod.lo, mod.hi, mod.glo,
                                                mod.ghi, mod.workers(nworkers), nworkers)
        if out_len < 0:
            raise ValueError("malformed launch request")
        back = b"".join([protocol.SYM_SIZE.pack(len(b)) + b for b in [read_symbol(mod, name) for name in reads]]) if reads else b""
        self.after(protocol.ST_OK, out_len, back)

    def symbol(self, mod: Module, op: int, payload: bytes) -> None:
        """OP_READ: payload is the name; OP_WRITE: 2-byte name length, name, data."""
        if op == protocol.OP_WRITE:
            n = int.from_bytes(payload[:2], "little")
            name, data = payload[2:2 + n].decode(), payload[2 + n:]
        else:
            name, data = payload.decode(), b""
        try:
            if op == protocol.OP_READ:
                data = read_symbol(mod, name)
                self.after(protocol.ST_OK, len(data), data)
            else:
                self.after(protocol.ST_OK, write_symbol(mod, name, data))
        except SymbolError as e:
            self.send(protocol.ST_ERROR, e.size, str(e).encode())


class SymbolError(Exception):
    def __init__(self, text: str, size: int = 0) -> None:
        super().__init__(text)
        self.size = size


def symbol_at(mod: Module, name: str) -> tuple[int, int]:
    """(address, bytes) of global ``name`` of ``mod``; SymbolError when it has none."""
    try:
        addr = ctypes.addressof(ctypes.c_char.in_dll(mod.lib, name))
    except ValueError:
        raise SymbolError(f"no symbol {name!r} in the kernel module") from None
    info, sym = Dlinfo(), ctypes.c_void_p()
    if not _LIBC.dladdr1(ctypes.c_void_p(addr), ctypes.byref(info), ctypes.byref(sym), _RTLD_DL_SYMENT) \
            or (info.fbase or 0) != mod.base or not sym.value:
        raise SymbolError(f"no symbol {name!r} in the kernel module")
    return addr, Elf64Sym.from_address(sym.value).size


def read_symbol(mod: Module, name: str) -> bytes:
    addr, size = symbol_at(mod, name)
    return ctypes.string_at(addr, size)


def write_symbol(mod: Module, name: str, data: bytes) -> int:
    """Overwrite the start of ``name`` in the module and its copies; the symbol's size."""
    addr, size = symbol_at(mod, name)
    if len(data) > size:
        raise SymbolError(f"{name!r} has {size} bytes; {len(data)} given", size)
    ctypes.memmove(addr, data, len(data))
    for copy in mod.copies:  # the workers' copies see what the kernel's first copy sees
        ctypes.memmove(ctypes.addressof(ctypes.c_char.in_dll(copy, name)), data, len(data))
    return size

if __name__ == "__main__":
    Server(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])).serve()
