"""The compiled-kernel cache: per-user, mode 0700, atomic writes, one compile under many processes.

What it serves runs in the test process (GPU code objects; shared libraries of the CPU executor), so an
entry is trusted only after these checks, made on EVERY load and store, through file descriptors:

- the directory: reached from ``/`` one folder at a time (``os.open(name, dir_fd=...)`` with
  ``O_NOFOLLOW | O_DIRECTORY``), so a folder swapped for a symbolic link is refused, not followed; every
  folder above it owned by root or you and not writable by others unless sticky (else someone else
  can replace the cache with their own); the cache folder itself (and its subfolders) yours and
  writable by nobody else. Otherwise: CacheDirError, never a silent fallback.
- the entry: opened ``O_NOFOLLOW | O_NONBLOCK`` (a link or a FIFO never redirects or blocks the load),
  a regular file of yours of at most MAX_ENTRY bytes (``fstat``, before reading), and its sha256 (which
  detects corruption; the folder checks keep out forgeries). A bad entry is removed (a folder in its
  place is moved aside) BEFORE its CacheWarning, so under ``-W error`` it fails one run, not every run;
  one that cannot be removed (a read-only cache) is named once on this machine, then skipped quietly.

A cache that cannot be used (a file, read-only, a full disk, no home directory) never fails a compile:
it is named once, with the reason and the fix (CacheWarning), and kernels are built uncached.

An entry is ``MAGIC | sha256(meta + binary) | len(meta) | meta (JSON) | binary``. The key (make_key)
hashes the source, every header it reaches, the kernel name, options, defines, arch and the compiler's
identity. The file lock (filelock) is the one path-based open; it only orders the compiles.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import stat
import struct
import warnings
from typing import Any, Callable, Iterator, Optional

from pytest_gpuenv.base.files import read_fd
from pytest_gpuenv.rtc.errors import CacheDirError
from pytest_gpuenv.rtc.source import digests

MAGIC = b"GPUENVK1"
_HEAD = struct.Struct("<8s32sI")
LOCK_TIMEOUT = 600.0
#: the largest entry read or written; a larger code object or library is used uncached
MAX_ENTRY = 512 * 2**20
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_ENTRY = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC
_SECURE = bool(_NOFOLLOW) and hasattr(os, "geteuid") and {os.open, os.mkdir, os.unlink} <= os.supports_dir_fd
FIX = "use a directory of your own: --gpuenv-cache-dir=PATH (or GPUENV_CACHE_DIR, or XDG_CACHE_HOME)"
_WARNED: set[str] = set()
_SHARED: dict[Optional[str], Cache] = {}


class CacheWarning(UserWarning):
    """A cache entry was bad and is rebuilt, or the cache cannot be used and kernels build uncached."""


def default_dir() -> Optional[str]:
    """``$XDG_CACHE_HOME/pytest-gpuenv``, else ``~/.cache/pytest-gpuenv``; None without a home directory."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        home = os.path.expanduser("~")
        if not os.path.isabs(home):  # HOME unset and no passwd entry: expanduser gives "~" back
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "pytest-gpuenv")


def shared(cache_dir: Optional[str] = None) -> Cache:
    """This process's Cache for ``cache_dir`` (None: default_dir()); made, and its problems named, once."""
    c = _SHARED.get(cache_dir)
    if c is None:
        c = _SHARED[cache_dir] = Cache(cache_dir)
    return c


def make_key(parts: dict[str, Any], source: bytes, headers: list[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(parts, sort_keys=True, default=str).encode())
    h.update(b"\0src\0" + source)
    for (path, _), sha in zip(headers, digests(headers)):
        h.update(b"\0hdr\0" + os.path.basename(path).encode() + b"\0" + sha)
    return h.hexdigest()


def encode_entry(meta: dict[str, Any], binary: bytes) -> bytes:
    m = json.dumps(meta, sort_keys=True).encode()
    return _HEAD.pack(MAGIC, hashlib.sha256(m + binary).digest(), len(m)) + m + binary


def decode_entry(blob: bytes) -> tuple[dict[str, Any], bytes]:
    """(meta, binary); ValueError when the entry is truncated or its checksum does not match."""
    if len(blob) < _HEAD.size:
        raise ValueError(f"truncated ({len(blob)} bytes)")
    magic, digest, mlen = _HEAD.unpack_from(blob)
    if magic != MAGIC:
        raise ValueError("bad magic")
    body = blob[_HEAD.size :]
    if len(body) < mlen:
        raise ValueError("truncated metadata")
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("checksum mismatch")
    meta = json.loads(body[:mlen])
    if not isinstance(meta, dict):
        raise ValueError("metadata is not an object")
    return meta, body[mlen:]


# ------------------------------------------------------------------------------ folders, through fds
def _refuse(path: str, why: str, fix: str = "Use a directory of your own (--gpuenv-cache-dir=PATH)") -> CacheDirError:
    return CacheDirError(
        f"refusing the compile cache {path}: {why}. A code object planted there would run on the GPU (a CPU "
        f"kernel's library, in this process). {fix}"
    )


def _check_above(cache: str, where: str, st: os.stat_result) -> None:
    """A folder above the cache: owned by root or you, and not writable by others unless sticky."""
    if st.st_uid not in (0, os.geteuid()):
        raise _refuse(cache, f"{where} is owned by uid {st.st_uid}, who can replace the cache with their own")
    if st.st_mode & 0o002 and not st.st_mode & stat.S_ISVTX:
        raise _refuse(cache, f"{where} is writable by others without the sticky bit (mode "
                             f"{stat.S_IMODE(st.st_mode):o}), so anyone can replace the cache with their own")


def _check_own(cache: str, where: str, st: os.stat_result) -> None:
    """The cache folder or one of its subfolders: yours, writable by nobody else."""
    uid = os.geteuid()
    if st.st_uid != uid:
        raise _refuse(cache, f"{'it' if where == cache else where} is owned by uid {st.st_uid}, not by you (uid {uid})")
    if st.st_mode & 0o022:
        mode = st.st_mode
        who = "group and others" if mode & 0o020 and mode & 0o002 else "group" if mode & 0o020 else "others"
        fix = "Use a directory of your own (--gpuenv-cache-dir=PATH)"
        # never chmod 700 a shared folder: /tmp (sticky, world-writable) or a team's (setgid, group-writable)
        if not mode & (stat.S_ISVTX | stat.S_ISGID | 0o002):
            fix += f", or, if this one is yours alone: chmod 700 {where}"
        raise _refuse(cache, f"{'it' if where == cache else where} is writable by {who} (mode "
                             f"{stat.S_IMODE(mode):o})", fix)


def _open_child(fd: int, name: str, where: str, create: bool) -> int:
    """``name`` in folder ``fd`` (at ``where``), not following a link; made (0700) when missing and ``create``."""
    full = os.path.join(where, name)
    try:
        try:
            return os.open(name, _DIR, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=fd)
            return os.open(name, _DIR, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            with contextlib.suppress(OSError):
                if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise CacheDirError(f"refusing the compile cache: {full} is a symbolic link now (was the folder "
                                        "replaced?); a link is never followed there") from None
        raise OSError(exc.errno, exc.strerror, full) from None


def _open_path(path: str, parts: list[str], create: bool) -> int:
    """An fd of ``path`` + ``parts``, every folder on the way checked (see the module docstring)."""
    fd = os.open("/", _DIR)
    where = "/"
    try:
        names = [p for p in path.split("/") if p]
        if not names:
            _check_own(path, where, os.fstat(fd))
        for i, name in enumerate(names + parts):
            if i < len(names):
                _check_above(path, where, os.fstat(fd))
            nxt = _open_child(fd, name, where, create)
            os.close(fd)
            fd, where = nxt, os.path.join(where, name)
            if i >= len(names) - 1:
                _check_own(path, where, os.fstat(fd))
        return fd
    except BaseException:
        os.close(fd)
        raise


def _reason(exc: OSError) -> str:
    return f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc.strerror or exc)


def _warn_once(tag: str, message: str) -> None:
    if tag not in _WARNED:
        _WARNED.add(tag)
        warnings.warn(CacheWarning(message), stacklevel=4)


def _entry_problem(st: os.stat_result) -> Optional[str]:
    if not stat.S_ISREG(st.st_mode):
        kind = {stat.S_IFIFO: "a FIFO", stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device",
                stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}.get(stat.S_IFMT(st.st_mode), "not a file")
        return f"{kind}, not a regular file"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not by you"
    if st.st_size > MAX_ENTRY:
        return f"{st.st_size} bytes, more than the {MAX_ENTRY} a cache entry may have"
    return None


def _remove(fd: int, name: str, aside: str) -> Optional[OSError]:
    """Unlink ``name`` in folder ``fd`` (rename a folder there to ``aside``); the error when it stays."""
    try:
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    except OSError as exc:  # EISDIR/EPERM: a folder; renamed, as it may not be empty
        try:
            os.rename(name, aside, src_dir_fd=fd, dst_dir_fd=fd)
        except FileNotFoundError:
            pass
        except OSError as again:
            return again if again.errno == errno.EROFS else exc
    return None


def _first_sighting(identity: str) -> bool:
    """True once per ``identity`` on this machine (a marker file in the private lock folder; always True
    when that folder cannot be used)."""
    from pytest_gpuenv.base.lock import lock_dir  # here: only for a bad entry that cannot be removed

    try:
        folder = os.path.join(lock_dir(), "cache-bad")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        marker = os.path.join(folder, hashlib.sha256(identity.encode()).hexdigest()[:32])
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600))
    except FileExistsError:
        return False
    except (OSError, RuntimeError):
        pass
    return True


# ------------------------------------------------------------------------------ the cache
class Cache:
    """The compile cache in ``path`` (None: default_dir()). ``get_or_compile(key, build)`` is its use.

    Constructing it checks the folder (creating it, 0700, when missing): CacheDirError when it is unsafe;
    a CacheWarning, once, when it cannot be used (``usable`` is then False and nothing is cached).
    """

    def __init__(self, path: Optional[str] = None) -> None:
        given = os.path.expanduser(path) if path else default_dir()
        self.path = os.path.realpath(given) if given else ""
        #: False: nothing is read or written (the reason was warned once); ``writable``: new entries are stored
        self.usable = self.writable = True
        if not self.path:
            self._unusable(f"there is no home directory (HOME is unset and uid {os.geteuid()} has no passwd entry)")
        elif not _SECURE:
            self._unusable("this platform cannot open files relative to a folder without following links")
        else:
            try:
                os.close(_open_path(self.path, [], create=True))
            except OSError as exc:
                self._unusable(_reason(exc))

    def _unusable(self, why: str) -> None:
        self.usable = self.writable = False
        _warn_once(f"use:{self.path}", f"the compile cache {self.path or '(none)'} cannot be used ({why}); kernels "
                                      f"are compiled without a cache. To cache them, {FIX}")

    def _unwritable(self, exc: OSError) -> None:
        self.writable = False
        fix = f"free space on its disk, or {FIX}" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else FIX
        _warn_once(f"write:{self.path}", f"the compile cache {self.path} cannot be written ({_reason(exc)}); "
                                        f"kernels compiled from now on are not cached. To cache them, {fix}")

    def entry_path(self, key: str) -> str:
        return os.path.join(self.path, "v1", key[:2], key + ".bin")

    @contextlib.contextmanager
    def _folder(self, key: str, create: bool) -> Iterator[int]:
        """The checked fd of the entry's folder, ``v1/<key[:2]>``."""
        fd = _open_path(self.path, ["v1", key[:2]], create)
        try:
            yield fd
        finally:
            os.close(fd)

    def load(self, key: str) -> Optional[tuple[dict[str, Any], bytes]]:
        """(meta, binary) of a good entry; None on a miss (a bad entry is removed, then warned about)."""
        if not self.usable:
            return None
        try:
            with self._folder(key, create=False) as fd:
                return self._load_in(fd, key)
        except FileNotFoundError:
            return None
        except OSError as exc:  # CacheDirError is not an OSError: it propagates
            self._unusable(_reason(exc))
            return None

    def _load_in(self, fd: int, key: str) -> Optional[tuple[dict[str, Any], bytes]]:
        try:
            efd = os.open(key + ".bin", _ENTRY, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP: a symbolic link; ENXIO: a socket; EACCES
            self._discard(fd, key, "a symbolic link" if exc.errno == errno.ELOOP else _reason(exc))
            return None
        try:
            st = os.fstat(efd)
            problem = _entry_problem(st)
            blob = b"" if problem else read_fd(efd, st.st_size)
        finally:
            os.close(efd)
        if problem:
            self._discard(fd, key, problem)
            return None
        try:
            return decode_entry(blob)
        except (ValueError, UnicodeDecodeError) as exc:
            self._discard(fd, key, str(exc))
            return None

    def _discard(self, fd: int, key: str, why: str) -> None:
        """Remove a bad entry (move a folder in its place aside), THEN warn: ``-W error`` fails one run only.

        One that cannot be removed (a read-only cache) is skipped: named once on this machine (a marker in
        the private lock folder), compiled uncached in this and later runs."""
        error = _remove(fd, key + ".bin", f".bad-{key}-{secrets.token_hex(4)}")
        tail = "recompiling"
        if error is not None:
            self.writable = False  # (no "cannot be written" warning: this one says why)
            with contextlib.suppress(OSError):
                st = os.stat(key + ".bin", dir_fd=fd, follow_symlinks=False)
                if not _first_sighting(f"{self.entry_path(key)}:{st.st_dev}:{st.st_ino}:{st.st_mtime_ns}"):
                    return
            tail = (f"it cannot be removed ({_reason(error)}), so it is compiled uncached from now on, named once "
                    f"on this machine: remove it, or {FIX}")
        warnings.warn(CacheWarning(f"compile cache entry {self.entry_path(key)} is corrupt ({why}); {tail}"),
                      stacklevel=5)

    def store(self, key: str, meta: dict[str, Any], binary: bytes) -> bool:
        """Write an entry atomically (O_EXCL temporary file, then rename); False when it was not written."""
        blob = encode_entry(meta, binary)
        if not self.writable or len(blob) > MAX_ENTRY:
            return False
        try:
            with self._folder(key, create=True) as fd:
                tmp = f".tmp-{key}-{secrets.token_hex(4)}"
                wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=fd)
                try:
                    with os.fdopen(wfd, "wb") as f:
                        f.write(blob)
                    os.replace(tmp, key + ".bin", src_dir_fd=fd, dst_dir_fd=fd)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp, dir_fd=fd)
                    raise
            return True
        except OSError as exc:  # a full disk, a read-only folder: the compile still succeeded
            self._unwritable(exc)
            return False

    def _lock(self, key: str) -> Any:
        """The key's acquired FileLock, or None when the cache is not writable (compile unlocked)."""
        if not self.writable:
            return None
        from filelock import FileLock

        try:
            with self._folder(key, create=True):
                pass
            lock = FileLock(self.entry_path(key)[: -len(".bin")] + ".lock", timeout=LOCK_TIMEOUT)
            lock.acquire()
            return lock
        except OSError as exc:
            self._unwritable(exc)
            return None

    def get_or_compile(
        self, key: str, compile_fn: Callable[[], tuple[dict[str, Any], bytes]]
    ) -> tuple[dict[str, Any], bytes, bool]:
        """(meta, binary, hit). Under a file lock, so concurrent processes compile a key once."""
        got = self.load(key)
        if got is not None:
            return got[0], got[1], True
        lock = self._lock(key)
        try:
            got = self.load(key) if lock is not None else None
            if got is not None:
                return got[0], got[1], True
            meta, binary = compile_fn()
            self.store(key, meta, binary)
            return meta, binary, False
        finally:
            if lock is not None:
                lock.release()
