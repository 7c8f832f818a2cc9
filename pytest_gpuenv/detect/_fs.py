"""File access for the detector: every path is resolved under a root, nothing ever raises.

Reads are small (64 KiB at most), only of regular files (a FIFO or a device node where a sysfs
file was expected is junk, never opened), and decoded leniently. Failures other than "not there"
are remembered in ``Fs.errors`` so the detector can report them as one ``sysfs-unreadable`` problem.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from typing import Optional

_LIMIT = 65536


class Fs:
    """Paths under ``root`` (``None``: the real system, ``/``)."""

    def __init__(self, root: Optional[str]) -> None:
        self.root_mode = root is not None
        self.base = os.path.abspath(root) if root is not None else ""
        #: (path as the detector named it, error text) for files that exist but could not be read
        self.errors: list[tuple[str, str]] = []
        #: paths whose read failed with EPERM/EACCES (device-cgroup hiding looks like this)
        self.denied: set[str] = set()

    def p(self, path: str) -> str:
        """The real path for an absolute path of the examined system."""
        if not self.root_mode:
            return path
        return self.base + "/" + path.lstrip("/")

    def read(self, path: str, limit: int = _LIMIT) -> Optional[str]:
        """Text of a small regular file, or None (missing, unreadable, not a file)."""
        real = self.p(path)
        try:
            st = os.stat(real)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            return None
        except OSError as exc:
            self._fail(path, exc)
            return None
        if not stat.S_ISREG(st.st_mode):
            self.errors.append((path, "not a regular file"))
            return None
        try:
            fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            try:
                data = os.read(fd, limit)
            finally:
                os.close(fd)
        except OSError as exc:
            self._fail(path, exc)
            return None
        return data.decode("utf-8", errors="replace")

    def read_bytes(self, path: str, limit: int = _LIMIT) -> Optional[bytes]:
        real = self.p(path)
        try:
            if not stat.S_ISREG(os.stat(real).st_mode):
                return None
            with open(real, "rb") as f:
                return f.read(limit)
        except OSError:
            return None

    def _fail(self, path: str, exc: OSError) -> None:
        if exc.errno in (errno.EPERM, errno.EACCES):
            self.denied.add(path)
        self.errors.append((path, exc.strerror or type(exc).__name__))

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self.p(path)))
        except FileNotFoundError:
            return []
        except OSError as exc:
            if exc.errno not in (errno.ENOTDIR,):
                self._fail(path, exc)
            return []

    def exists(self, path: str) -> bool:
        return os.path.lexists(self.p(path))

    def isdir(self, path: str) -> bool:
        return os.path.isdir(self.p(path))

    def isfile(self, path: str) -> bool:
        return os.path.isfile(self.p(path))

    def stat(self, path: str) -> Optional[os.stat_result]:
        try:
            return os.stat(self.p(path))
        except OSError:
            return None

    def access(self, path: str, mode: int) -> bool:
        """``os.access`` (real uid/gid, as the kernel checks): stat-level only, nothing is opened."""
        try:
            return os.access(self.p(path), mode)
        except (OSError, ValueError):
            return False

    def mtime(self, path: str) -> Optional[float]:
        st = self.stat(path)
        return None if st is None else st.st_mtime

    def which(self, name: str, path_var: Optional[str], extra: tuple[str, ...] = ()) -> Optional[str]:
        """First executable ``name`` in PATH (resolved under the root), then in ``extra`` dirs.

        On the real system PATH is searched by ``shutil.which`` (Windows' PATHEXT included).
        """
        if not self.root_mode:
            found = shutil.which(name, path=path_var or "")
            if found:
                return found
        dirs = [d for d in (path_var or "").split(os.pathsep) if d.startswith("/")] if self.root_mode else []
        for d in dirs + list(extra):
            cand = d.rstrip("/") + "/" + name
            real = self.p(cand)
            if os.path.isfile(real) and (self.root_mode or os.access(real, os.X_OK)):
                return cand
        return None
