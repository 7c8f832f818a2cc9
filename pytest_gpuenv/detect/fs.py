"""File access for the detector: every path is resolved under a root, nothing ever raises.

Under a root (``gpuenv info --root``, ``detect(root=...)``) paths resolve as they would after
``chroot(root)``: each component is looked at with ``lstat``, a symlink's target is followed inside
the root (an absolute target starts again at the root, ``..`` stops at the root), at most 40 links
for one name (Linux's limit; more is ``ELOOP``). Nothing outside the root is read, listed or stat'ed,
whatever the tree's links or the ``..`` in an environment variable say (a tree changed while it is
read is not defended against). Resolved folders are remembered: a read costs what it costs on the
real system (``lstat``, open, read, close) plus one ``lstat`` per folder met for the first time. On
the real system (``root=None``) the kernel resolves paths as usual.

Reads are small (64 KiB at most), only of regular files (a FIFO, a device node or a folder where a
file was expected is junk, never opened; the file is opened ``O_NONBLOCK``, and ``O_NOFOLLOW`` under
a root), and decoded leniently. Failures other than "not there" are remembered in ``Fs.errors`` so the
detector can report them as one ``sysfs-unreadable`` problem.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import shutil
import stat
from typing import TYPE_CHECKING, Optional, Union

_LIMIT = 65536
_HOPS = 40  # symlinks followed in one lookup (Linux's MAXSYMLINKS)
_PATH_MAX = 4096  # longer paths are ENAMETOOLONG, as for the kernel
_STEPS = 4096  # components walked in one lookup (links expanding into links): more is ELOOP
_MAGIC = r"[*?[]"  # compiled by re on first use
if TYPE_CHECKING:  # (an alias for the checker: a typing subscript costs every import)
    _Dir = Union[list[str], tuple[int, str]]  # canonical components, or (errno, "") of why it is no folder


def _error(code: int, path: str = "") -> OSError:
    return OSError(code, os.strerror(code), path) if path else OSError(code, os.strerror(code))


def _absolute(path: str) -> str:
    """``path`` as an absolute path of the examined system; OSError for what no kernel would take."""
    if "\0" in path:
        raise _error(errno.EINVAL)
    if len(path) >= _PATH_MAX:
        raise _error(errno.ENAMETOOLONG)
    return path if path.startswith("/") else "/" + path


class Fs:
    """Paths under ``root`` (``None`` or ``""``: the real system, ``/``)."""

    def __init__(self, root: Optional[str]) -> None:
        self.root_mode = bool(root)
        self.base = os.path.abspath(root) if root else ""
        self._prefix = self.base.rstrip("/")
        #: (path as the detector named it, error text) for files that exist but could not be read
        self.errors: list[tuple[str, str]] = []
        #: paths whose read failed with EPERM/EACCES (device-cgroup hiding looks like this)
        self.denied: set[str] = set()
        #: root mode: folder path as asked -> its canonical components, or (errno, message)
        self._dirs: dict[str, _Dir] = {"": []}
        #: root mode: folder path as asked -> its host path (resolved folders only)
        self._hosts: dict[str, str] = {}

    # ------------------------------------------------------------------------------- resolution
    def _join(self, parts: list[str]) -> str:
        return self._prefix + "/" + "/".join(parts)

    def _lookup(self, path: str, follow: bool) -> tuple[str, os.stat_result]:
        """(host path, stat) of ``path``; the last component's link is followed when ``follow``."""
        if not self.root_mode:
            if "\0" in path:
                raise _error(errno.EINVAL)
            return path, (os.stat(path) if follow else os.lstat(path))
        path = _absolute(path)
        head, _, name = path.rpartition("/")
        if name in ("", ".", ".."):
            host = self._join(self._dir(path))
            return host, os.lstat(host)
        where = self._hosts.get(head)
        if where is None:
            where = self._hosts[head] = self._join(self._dir(head)).rstrip("/")
        host = where + "/" + name
        st = os.lstat(host)
        if not (follow and stat.S_ISLNK(st.st_mode)):
            return host, st
        done, st = self._walk(self._dir(head), name, follow)
        return self._join(done), st

    def _dir(self, path: str) -> list[str]:
        """Canonical components of the folder ``path`` (absolute, as asked); raises OSError."""
        hit = self._dirs.get(path)
        if hit is None:
            names: list[str] = []
            head = path
            while head not in self._dirs:
                head, _, name = head.rpartition("/")
                names.append(name)
            hit = self._dirs[head]
            for name in reversed(names):
                head = head + "/" + name
                hit = self._dirs[head] = self._step(hit, name)
        if isinstance(hit, tuple):
            raise _error(*hit)
        return hit

    def _step(self, parent: _Dir, name: str) -> _Dir:
        if isinstance(parent, tuple) or name in ("", "."):
            return parent
        if name == "..":
            return parent[:-1]
        try:
            done, st = self._walk(parent, name, True)
        except OSError as exc:
            return (exc.errno or errno.EIO, "")
        return done if stat.S_ISDIR(st.st_mode) else (errno.ENOTDIR, "")

    def _walk(self, start: list[str], name: str, follow: bool) -> tuple[list[str], os.stat_result]:
        """Resolve ``name`` in the folder ``start`` (canonical), following links inside the root."""
        done, todo = list(start), [name]
        hops = steps = 0
        st: Optional[os.stat_result] = None
        while todo:
            part = todo.pop()
            steps += 1
            if steps > _STEPS:
                raise _error(errno.ELOOP)
            if part in ("", "."):
                continue
            if part == "..":
                done, st = done[:-1], None
                continue
            host = self._join(done + [part])
            st = os.lstat(host)
            if stat.S_ISLNK(st.st_mode) and (todo or follow):
                hops += 1
                if hops > _HOPS:
                    raise _error(errno.ELOOP)
                target = os.readlink(host)
                if target.startswith("/"):
                    done = []
                todo.extend(reversed(target.split("/")))
                st = None
                continue
            if todo and not stat.S_ISDIR(st.st_mode):
                raise _error(errno.ENOTDIR)
            done.append(part)
        if st is None:
            st = os.lstat(self._join(done))
        return done, st

    # ------------------------------------------------------------------------------- reads
    def read(self, path: str, limit: int = _LIMIT) -> Optional[str]:
        """Text of a small regular file, or None (missing, unreadable, not a file)."""
        data = self._read(path, limit, True)
        return None if data is None else data.decode("utf-8", errors="replace")

    def read_bytes(self, path: str, limit: int = _LIMIT) -> Optional[bytes]:
        """The first ``limit`` bytes of a regular file, or None; failures are not recorded."""
        return self._read(path, limit, False)

    def _read(self, path: str, limit: int, record: bool) -> Optional[bytes]:
        try:
            real, st = self._lookup(path, True)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if record:
                self._fail(path, exc)
            return None
        if not stat.S_ISREG(st.st_mode):
            if record:
                self.errors.append((path, "not a regular file"))
            return None
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (getattr(os, "O_NOFOLLOW", 0) if self.root_mode else 0)
        try:
            fd = os.open(real, flags)
            try:
                return os.read(fd, max(0, min(limit, _LIMIT)))
            finally:
                os.close(fd)
        except OSError as exc:
            if record:
                self._fail(path, exc)
            return None

    def _fail(self, path: str, exc: OSError) -> None:
        if exc.errno in (errno.EPERM, errno.EACCES):
            self.denied.add(path)
        self.errors.append((path, exc.strerror or type(exc).__name__))

    def listdir(self, path: str) -> list[str]:
        """Sorted names in a folder; [] when missing or not a folder (other failures are recorded)."""
        return self._names(path, True)

    def _names(self, path: str, record: bool) -> list[str]:
        try:
            real = self._join(self._dir(_absolute(path))) if self.root_mode else path
            return sorted(os.listdir(real))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            if record and isinstance(exc, OSError) and exc.errno not in (errno.ENOTDIR,):
                self._fail(path, exc)
            return []

    def glob(self, pattern: str) -> list[str]:
        """Existing paths matching ``pattern`` (``*``, ``?``, ``[..]`` within a component; a leading dot
        is matched only by a leading dot), as the examined system names them, sorted per component."""
        paths = [""]
        for part in (c for c in pattern.split("/") if c):
            magic = re.search(_MAGIC, part)
            if magic:
                hidden, lead = part.startswith("."), part[:magic.start()]  # lead: a cheap first filter
                paths = [f"{p}/{n}" for p in paths for n in self._names(p or "/", False)
                         if n.startswith(lead) and (hidden or not n.startswith(".")) and fnmatch.fnmatchcase(n, part)]
            else:
                paths = [f"{p}/{part}" for p in paths]
        return [p for p in paths if self.exists(p or "/")]

    # ------------------------------------------------------------------------------- stat-level
    def _stat(self, path: str, follow: bool = True) -> Optional[os.stat_result]:
        try:
            return self._lookup(path, follow)[1]
        except (OSError, ValueError):
            return None

    def exists(self, path: str) -> bool:
        """The path is there (a dangling or looping link counts, as for ``os.path.lexists``)."""
        return self._stat(path, False) is not None

    def isdir(self, path: str) -> bool:
        st = self._stat(path)
        return st is not None and stat.S_ISDIR(st.st_mode)

    def isfile(self, path: str) -> bool:
        st = self._stat(path)
        return st is not None and stat.S_ISREG(st.st_mode)

    def stat(self, path: str) -> Optional[os.stat_result]:
        return self._stat(path)

    def access(self, path: str, mode: int) -> bool:
        """``os.access`` (real uid/gid, as the kernel checks): stat-level only, nothing is opened."""
        try:
            return os.access(self._lookup(path, True)[0] if self.root_mode else path, mode)
        except (OSError, ValueError):
            return False

    def mtime(self, path: str) -> Optional[float]:
        st = self.stat(path)
        return None if st is None else st.st_mtime

    def winpath(self, path: str) -> str:
        """A Windows path (``C:\\X\\Y``) as this Fs names it: in root mode, under the root as ``/C/X/Y``
        (or ``/c/X/Y``, whichever drive folder holds ``Windows``); else unchanged."""
        if not self.root_mode:
            return path
        m = re.match(r"^([A-Za-z]):[\\/]*(.*)$", path)
        rest = (m.group(2) if m else path).replace("\\", "/").strip("/")
        drive = self.isdir("/C/Windows") and "/C" or self.isdir("/c/Windows") and "/c" or ""
        return f"{drive}/{rest}" if rest else drive or "/"

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
            if self.isfile(cand) and (self.root_mode or os.access(cand, os.X_OK)):
                return cand
        return None
