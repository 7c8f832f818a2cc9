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
    """``$GPUENV_LOCK_DIR`` or ``<tmp>/pytest-gpuenv-locks-<uid>``, mode 0700, owned by this user."""
    path = os.environ.get("GPUENV_LOCK_DIR")
    if not path:
        uid = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
        path = os.path.join(tempfile.gettempdir(), f"pytest-gpuenv-locks-{uid}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    if hasattr(os, "getuid"):
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise RuntimeError(f"GPU lock directory {path} is not a directory owned by this user; set GPUENV_LOCK_DIR")
        if st.st_mode & 0o022:
            os.chmod(path, 0o700)
    return path


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
