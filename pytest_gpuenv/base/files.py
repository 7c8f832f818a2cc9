"""Reading a file the run was pointed at without trusting it: regular files only (a FIFO, a device or a folder
is never read, and opening one never blocks), and never more than a bound. Standard library only; the kernel
sources, the cache's entries, the perf baselines, the crash guard's records and the plan's profiles read
through it."""

from __future__ import annotations

import os
import stat
from typing import Optional


class FileTooLarge(ValueError):
    """The file holds more than the reader's bound; ``size`` and ``limit`` in bytes."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(f"{path} is {size} bytes; at most {limit} are read")
        self.path, self.size, self.limit = path, size, limit


def read_regular(path: str, limit: int) -> Optional[bytes]:
    """The bytes of a regular file, None for a FIFO, device or folder (opened without blocking, never read).

    OSError when it cannot be read; ``FileTooLarge`` when it holds more than ``limit`` bytes (checked before the
    read, and by the read itself: a file that grows meanwhile is cut at ``limit + 1`` bytes and refused)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size > limit:
            raise FileTooLarge(path, st.st_size, limit)
        data = read_fd(fd, limit + 1)
        if len(data) > limit:
            raise FileTooLarge(path, len(data), limit)
        return data
    finally:
        os.close(fd)


def read_fd(fd: int, size: int) -> bytes:
    """At most ``size`` bytes from ``fd``, fewer at end of file."""
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 24))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
