"""One exclusive lock per physical GPU, shared by every process of the same user.

An OS file lock (``flock`` through filelock): when the holder dies, even by SIGKILL, the kernel
releases it, so a killed xdist worker never wedges the others. Locks are re-entrant within a process.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import threading
from typing import Iterator, Optional

import filelock

_LOCKS: dict[str, filelock.BaseFileLock] = {}
_GUARD = threading.Lock()


def lock_dir() -> str:
    """The folder of the lock files: private to this user (owned by it, writable by no one else).

    ``$GPUENV_LOCK_DIR`` (default ``<tmp>/pytest-gpuenv-locks-<uid>``) when it is such a folder or does not
    exist yet (then it is made, mode 0700). A folder others may write to (``/tmp``, a group's setgid folder,
    one of another user) gets a private subfolder ``pytest-gpuenv-locks-<uid>`` instead: the mode of a
    folder this code did not make is never changed.
    """
    path = os.environ.get("GPUENV_LOCK_DIR") or os.path.join(tempfile.gettempdir(), _private_name())
    os.makedirs(path, mode=0o700, exist_ok=True)
    if not hasattr(os, "getuid"):
        return path
    if _private(os.lstat(path)):
        return path
    sub = os.path.join(path, _private_name())
    with contextlib.suppress(FileExistsError):
        os.mkdir(sub, mode=0o700)
    if not _private(os.lstat(sub)):
        raise RuntimeError(
            f"GPU lock directory {sub} is not a directory of this user that only it can write to; "
            "set GPUENV_LOCK_DIR to a folder of yours"
        )
    return sub


def _private_name() -> str:
    uid = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return f"pytest-gpuenv-locks-{uid}"


def _private(st: os.stat_result) -> bool:
    """A real directory (not a link) of this user that no one else can write to."""
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def lock_path(key: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", str(key)).strip("_") or "gpu"
    return os.path.join(lock_dir(), safe[:120] + ".lock")


def holder(key: str) -> Optional[int]:
    """PID written by the last holder of the lock (advisory; for messages)."""
    try:
        with open(lock_path(key) + ".pid", encoding="ascii") as f:
            return int(f.read().strip() or 0) or None
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def gpu_lock(key: str, timeout: float = 600.0) -> Iterator[str]:
    """Hold the exclusive lock of one GPU (key: its UUID) while measuring.

    Waits up to ``timeout`` seconds (``-1``: forever) and raises ``TimeoutError`` naming the holder.
    Yields the lock file's path.
    """
    path = lock_path(key)
    with _GUARD:
        lock = _LOCKS.get(path)
        if lock is None:
            lock = filelock.FileLock(path, thread_local=False, mode=0o600)
            _LOCKS[path] = lock
    try:
        lock.acquire(timeout=timeout)
    except filelock.Timeout:
        who = holder(key)
        raise TimeoutError(
            f"waited {timeout:g} s for the GPU lock {path}" + (f" held by pid {who}" if who else "")
        ) from None
    try:
        if lock.lock_counter == 1:
            try:
                with open(path + ".pid", "w", encoding="ascii") as f:
                    f.write(str(os.getpid()))
            except OSError:
                pass
        yield path
    finally:
        lock.release()
