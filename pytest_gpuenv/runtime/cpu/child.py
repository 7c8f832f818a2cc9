"""pytest's side of the CPU executor's child process: the shared arena, the pipes, the watchdog.

``Child`` starts ``server.py`` with a fresh interpreter (spawned, never a fork of pytest), in its
own process group, with its output in a private temporary file. ``request`` sends one request and
waits for the reply under a wall-clock limit; when the child dies, wedges or runs past the limit it
is killed and ``Gone`` says how it ended (``Death``: the note ``src/death_note.cpp`` left in the arena,
the wait status, what the process wrote).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import fcntl
import mmap
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

from pytest_gpuenv.runtime.cpu import protocol

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server.py")
START_TIMEOUT = 120.0
_SLICE_MS = 100  # how often a wait looks at the child's pid (a forked grandchild may hold the pipe open)
_TAIL = 1500


class Arena:
    """The shared memfd: note, report, printf output, argument copies; it grows, never shrinks."""

    def __init__(self, data_bytes: int = 16 << 20) -> None:
        self.fd = os.memfd_create("gpuenv-cpu-arena", os.MFD_CLOEXEC)
        self.size = 0
        self.mm: Optional[mmap.mmap] = None
        self._anchor: Optional[ctypes.c_char] = None
        self.base = 0
        self.reserve(data_bytes)

    def reserve(self, data_bytes: int) -> None:
        need = protocol.DATA_OFF + data_bytes
        if need <= self.size:
            return
        size = max(need, 2 * self.size)
        size += -size % mmap.PAGESIZE
        try:  # the larger mapping first: where it fails (ENOMEM), the arena stays as it was and usable
            os.ftruncate(self.fd, size)
            mm = mmap.mmap(self.fd, size)
        except (OSError, OverflowError, ValueError) as exc:
            raise MemoryError(f"the CPU executor's arena cannot grow to {size} bytes for this launch's arguments: "
                              f"{exc}") from None
        anchor = ctypes.c_char.from_buffer(mm)
        if self.mm is not None:
            self._anchor = None  # the mapping cannot close while ctypes holds a pointer into it
            self.mm.close()
        self.mm, self._anchor = mm, anchor
        self.base = ctypes.addressof(self._anchor)
        self.size = size

    def note(self) -> protocol.Note:
        assert self.mm is not None
        return protocol.Note.from_buffer_copy(self.mm, 0)

    def clear_note(self) -> None:
        ctypes.memset(self.base, 0, protocol.NOTE_BYTES)


@dataclass
class Death:
    """How the child ended."""

    note: protocol.Note
    returncode: Optional[int]  # negative: the signal that ended it
    watchdog: bool  # pytest killed it at the wall-clock limit
    output: str  # what it wrote to stdout/stderr during the request (glibc's heap messages)


class Gone(Exception):
    def __init__(self, death: Death) -> None:
        super().__init__(f"the CPU executor process ended ({death.returncode})")
        self.death = death


class Child:
    """One executor process. Not thread-safe: ``CpuRuntime`` serialises requests."""

    def __init__(self, executor: bytes, arena: Arena) -> None:
        self.arena = arena
        arena.clear_note()
        req_r, self.req = os.pipe()
        self.reply, rep_w = os.pipe()
        self.out = tempfile.TemporaryFile(prefix="gpuenv-cpu-")  # noqa: SIM115 (the child's, closed by close())
        # appended to whatever a kernel does to the offset (lseek(1, ...)): the file's size is where output ends
        fd = self.out.fileno()
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
        env = dict(os.environ, LIBC_FATAL_STDERR_="1")
        cmd = [sys.executable, "-I", "-S", SERVER, str(req_r), str(rep_w), str(arena.fd)]
        try:
            # from one long-lived thread: the child's PR_SET_PDEATHSIG fires when the thread that started
            # it ends, and a test's own thread may make the first launch and then end
            self.proc = _spawner().submit(
                subprocess.Popen, cmd, pass_fds=(req_r, rep_w, arena.fd), stdin=subprocess.DEVNULL,
                stdout=self.out, stderr=self.out, start_new_session=True, env=env).result()
        except BaseException:
            for fd in (req_r, rep_w, self.req, self.reply):
                os.close(fd)
            self.out.close()
            raise
        os.close(req_r)
        os.close(rep_w)
        os.set_blocking(self.reply, True)
        self.poller = select.poll()
        self.poller.register(self.reply, select.POLLIN)
        self.loaded: dict[int, int] = {}  # module handle -> its load address in this process
        self._shown = 0
        status, _, data = self.request(protocol.OP_INIT, 0, executor, START_TIMEOUT)
        if status != protocol.ST_OK:
            self.discard()
            raise OSError(f"the CPU executor did not load in its process: {data.decode('utf-8', 'replace')}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def new_output(self) -> str:
        """What the child wrote to stdout/stderr since the last call (a kernel's puts or std::cout)."""
        fd = self.out.fileno()
        end = os.fstat(fd).st_size
        if end <= self._shown:
            return ""
        text = os.pread(fd, min(end - self._shown, protocol.PRINTF_CAPACITY), self._shown)
        self._shown = end
        return text.decode("utf-8", "replace")

    def request(self, op: int, handle: int, payload: bytes, timeout: Optional[float]) -> tuple[int, int, bytes]:
        """(status, value, payload) of the reply; Gone when the child ended or ran past ``timeout`` (a child
        that ended before the request is found by the write, or by the read's end of file)."""
        mark = 0 if self.out.closed else os.fstat(self.out.fileno()).st_size
        try:
            self._write(protocol.HEAD.pack(op, handle, len(payload)) + payload)
            deadline = None if timeout is None else time.monotonic() + timeout
            status, value, n = protocol.REPLY.unpack(self._read(protocol.REPLY.size, deadline))
            return status, value, self._read(n, deadline) if n else b""
        except _Timeout:
            self._ask_where()
            self.kill()
            raise Gone(self._death(True, mark)) from None
        except (OSError, EOFError):
            self.kill()
            raise Gone(self._death(False, mark)) from None
        except BaseException:  # KeyboardInterrupt mid-request: the reply would answer the next request
            self.kill()
            raise

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.req, view):]

    def _read(self, n: int, deadline: Optional[float]) -> bytes:
        parts = []
        while n:
            while not self.poller.poll(_SLICE_MS if deadline is None else
                                       max(0, min(_SLICE_MS, int((deadline - time.monotonic()) * 1000) + 1))):
                if not self.alive():
                    raise EOFError
                if deadline is not None and time.monotonic() >= deadline:
                    raise _Timeout
            b = os.read(self.reply, n)
            if not b:
                raise EOFError
            parts.append(b)
            n -= len(b)
        return b"".join(parts)

    def _ask_where(self) -> None:
        """Past the watchdog: SIGUSR2 makes the child note its stack (unless it blocked signals). The wait is
        generous: on a loaded machine the child may not run for a while, and only a hung launch pays it."""
        try:
            os.kill(self.proc.pid, protocol.STUCK_SIGNAL)
        except OSError:
            return
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and not self.arena.note().kind and self.alive():
            time.sleep(0.01)

    def kill(self) -> None:
        """End the child and everything in its process group; close the pipes."""
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        for fd in (self.req, self.reply):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.req = self.reply = -1

    def discard(self) -> None:
        """Kill the child and drop its output file."""
        self.kill()
        self.out.close()

    def close(self) -> None:
        """Let the child end by itself (end of file on its request pipe), else kill it."""
        try:
            os.close(self.req)
            self.req = -1
            self.proc.wait(2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()
        self.out.close()

    def _death(self, watchdog: bool, mark: int) -> Death:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        output = ""
        if not self.out.closed:
            end = os.lseek(self.out.fileno(), 0, os.SEEK_END)
            start = max(mark, end - _TAIL)
            output = os.pread(self.out.fileno(), end - start, start).decode("utf-8", "replace").strip()
            self.out.close()
        return Death(self.arena.note(), self.proc.returncode, watchdog, output)


class _Timeout(Exception):
    pass


_SPAWNER: Optional[tuple[int, concurrent.futures.ThreadPoolExecutor]] = None


def _spawner() -> concurrent.futures.ThreadPoolExecutor:
    """The thread that starts executor processes (a fork of pytest makes its own: threads do not fork)."""
    global _SPAWNER
    if _SPAWNER is None or _SPAWNER[0] != os.getpid():
        _SPAWNER = os.getpid(), concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gpuenv-cpu-spawner")
    return _SPAWNER[1]
