"""The copies of a CPU launch's argument buffers into the executor's arena and back, split over a few
threads when they are large: ``ctypes.memmove`` releases the GIL, so the pieces run on as many cores as
the launch's blocks may use (``GPUENV_CPU_WORKERS``). Small copies stay on the calling thread.

The copy threads are a pool kept from launch to launch and shut down before any ``os.fork``: a forked
process never inherits them, and the parent has no extra threads when it forks (Python 3.12 warns of a fork
from a process with threads). The next large copy starts the pool again. Pieces are handed to the pool under
the lock ``shutdown`` takes, so a fork from another thread waits for them instead of cutting them off."""

from __future__ import annotations

import concurrent.futures
import ctypes
import os
import threading
from typing import Optional, Sequence

PIECE_MIN = 1 << 20  # bytes: no thread gets less than this to copy
PIECE_ALIGN = 4096  # every piece but the last copies a multiple of this many bytes

Move = tuple[int, int, int]  # (destination address, source address, bytes)

_POOL: Optional[tuple[int, concurrent.futures.ThreadPoolExecutor]] = None  # (threads, the pool)
_POOL_LOCK = threading.Lock()


def _submit(parts: Sequence[Sequence[Move]]) -> list[concurrent.futures.Future[None]]:
    """Each of ``parts`` handed to a copy thread (the pool grown to one thread per part where needed)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] < len(parts):
            pool = concurrent.futures.ThreadPoolExecutor(len(parts), thread_name_prefix="gpuenv-cpu-copy")
            old, _POOL = _POOL, (len(parts), pool)
            if old is not None:
                old[1].shutdown(wait=False)  # its threads end once their pieces are copied
        return [_POOL[1].submit(_run, part) for part in parts]


def shutdown() -> None:
    """End the copy threads (waiting for copies under way); the next large copy starts them again."""
    global _POOL
    with _POOL_LOCK:
        old, _POOL = _POOL, None
    if old is not None:
        old[1].shutdown(wait=True)


os.register_at_fork(before=shutdown)


def split(moves: Sequence[Move], pieces: int) -> list[list[Move]]:
    """``moves`` cut into at most ``pieces`` lists of about equal bytes."""
    total = sum(n for _, _, n in moves)
    share = -(-total // pieces)
    share += -share % PIECE_ALIGN
    out: list[list[Move]] = [[]]
    room = share
    for dst, src, n in moves:
        done = 0
        while done < n:
            if room == 0:
                out.append([])
                room = share
            step = min(room, n - done)
            out[-1].append((dst + done, src + done, step))
            done += step
            room -= step
    return out


def _run(moves: Sequence[Move]) -> None:
    for dst, src, n in moves:
        ctypes.memmove(dst, src, n)


def copy_all(moves: Sequence[Move], threads: int) -> None:
    """Every copy of ``moves`` done when it returns; on up to ``threads`` threads (the caller's among them)."""
    pieces = min(threads, sum(n for _, _, n in moves) // PIECE_MIN) if threads > 1 else 1
    if pieces <= 1:
        _run(moves)
        return
    parts = split(moves, pieces)
    pending = _submit(parts[1:])
    _run(parts[0])
    for f in pending:
        f.result()


def copy_threads(workers: int) -> int:
    """How many threads copy: ``workers`` (``GPUENV_CPU_WORKERS``; 0: one per core this process may use)."""
    return workers or len(os.sched_getaffinity(0))


def mapped(addr: int, size: int, writable: bool) -> bool:
    """Whether ``[addr, addr + size)`` lies in mappings of this process that are readable (and writable, where
    ``writable``), as /proc/self/maps lists them: a host pointer from an object that only claims to be an array
    (a forged ``__array_interface__``) is checked before a copy touches it. True where there is no such file."""
    try:
        with open("/proc/self/maps", "rb") as f:
            maps = f.read().decode("ascii", "replace").splitlines()
    except OSError:
        return True
    want = addr
    end = addr + max(size, 1)
    for line in maps:  # sorted by address
        span, perms = line.split(maxsplit=2)[:2]
        lo, hi = (int(x, 16) for x in span.split("-"))
        if hi <= want or lo > want:
            continue
        if perms[0] != "r" or (writable and perms[1] != "w"):
            return False
        want = hi
        if want >= end:
            return True
    return False

