"""Configure-time checks of the path options: the ``--gpuenv-json`` target, the compile cache and the kernel
directories. Each returns why a path cannot serve, or None; ``_options`` turns that into a
``pytest.UsageError`` naming the value and where it came from, before any test runs.

Only type and permission are checked here (``os.access``, which a read-only filesystem fails too); the
compile cache's ownership and mode rules are ``rtc._cache``'s, checked where it is opened (an unsafe
cache fails the test that compiles, naming the reason).
"""

from __future__ import annotations

import os
import stat
from typing import Optional

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a file"), (stat.S_ISLNK, "a symbolic link"))


def _kind(mode: int) -> str:
    return next((k for test, k in _KINDS if test(mode)), "not a directory")


def _nearest_existing(path: str) -> str:
    """``path`` or the nearest folder above it that exists (what a ``makedirs`` would create under)."""
    path = os.path.abspath(path)
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _dir_access_problem(directory: str, what: str) -> Optional[str]:
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{what} {directory} is not writable (read-only, or its permissions exclude you)"
    return None


def new_file_problem(path: str) -> Optional[str]:
    """Why a file cannot be written at ``path`` by creating a temporary file beside it and renaming it over
    ``path`` (the ``--gpuenv-json`` writer), or None: its folder, or the nearest one above it that exists,
    must be writable. The path's own type is ``perf.session.json_target_problem``'s."""
    parent = os.path.dirname(os.path.abspath(path))
    base = _nearest_existing(parent)
    if not os.path.isdir(base):
        return f"cannot be created: {base} is not a directory"
    if base != parent:
        return _dir_access_problem(base, "its folder would be created under")
    return _dir_access_problem(parent, "its folder")  # a read-only file there is replaced, as any other


def directory_problem(path: str, create: bool) -> Optional[str]:
    """Why ``path`` cannot be the folder of a cache (``create``: made when missing, so it must be writable)
    or of kernel sources (read only; it must exist), or None."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        if not create:
            return "does not exist"
        base = _nearest_existing(path)
        if not os.path.isdir(base):
            return f"cannot be created: {base} is {_kind(os.lstat(base).st_mode)}, not a directory"
        return _dir_access_problem(base, "it would be created in")
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISDIR(mode):
        return f"is {_kind(mode)}, not a directory"
    if create:
        return _dir_access_problem(path, "the folder")
    if not os.access(path, os.R_OK | os.X_OK):
        return "cannot be read (its permissions exclude you)"
    return None
