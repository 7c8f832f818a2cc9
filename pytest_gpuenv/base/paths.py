"""The paths the run writes to or reads from, in one place: the configure-time checks of the path options
(the ``--gpuenv-json`` report, the ``--gpuenv-perf-plot`` PNG, the compile cache and the kernel
directories) and the one atomic writer of the files the run leaves (``write_atomically``: the report, the
plot, the baselines).

Each check returns why a path cannot serve, or None; ``session.options`` turns that into a ``pytest.UsageError``
naming the value and where it came from, before any test runs. Only type and permission are checked here
(``os.access``, which a read-only filesystem fails too); the compile cache's ownership and mode rules are
``rtc.cache``'s, checked where it is opened (an unsafe cache fails the test that compiles, naming the
reason).

Standard library only: the plugin layer (``session.options``) and ``perf`` (``session``, ``perf.plot``, ``_baseline``)
both import it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from typing import Any, BinaryIO, Callable, Optional

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISREG, "a file"), (stat.S_ISLNK, "a symbolic link"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    """What a file of this mode is, in words ("a FIFO")."""
    return next((k for test, k in _KINDS if test(mode)), "a special file")


def _nearest_existing(path: str) -> str:
    """``path`` or the nearest folder above it that exists (what a ``makedirs`` would create under)."""
    path = os.path.abspath(path)
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _creatable(path: str) -> Optional[str]:
    """Why the missing folder ``path`` cannot be created, or None: the nearest folder above it that exists
    must be a directory (write permission is ``_dir_access_problem``'s)."""
    base = _nearest_existing(path)
    if not os.path.isdir(base):
        return f"cannot be created: {base} is {_kind(os.lstat(base).st_mode)}, not a directory"
    return None


def _dir_access_problem(directory: str, what: str) -> Optional[str]:
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{what} {directory} is not writable (read-only, or its permissions exclude you)"
    return None


# ------------------------------------------------------------------------------------------ files
def file_target_problem(path: str, allow_link: bool = False, what: str = "the report") -> Optional[str]:
    """Why ``path`` cannot take ``what`` (a file the run writes), or None: it must be a regular file or not
    exist yet, in a folder that exists or can be created. A symbolic link is refused unless ``allow_link``
    (``write_atomically`` then replaces the link itself, never writing through it)."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return _creatable(os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        return f"cannot be written ({exc.strerror or exc})"
    if stat.S_ISREG(mode) or (allow_link and stat.S_ISLNK(mode)):
        return None
    return f"is {_kind(mode)}; {what} is written only to a regular file (give a new or plain file path)"


def new_file_problem(path: str) -> Optional[str]:
    """Why a file cannot be written at ``path`` by ``write_atomically`` (a temporary file created beside it,
    then renamed over it), or None: its folder, or the nearest one above it that exists, must be
    writable. The path's own type is ``file_target_problem``'s."""
    parent = os.path.dirname(os.path.abspath(path))
    base = _nearest_existing(parent)
    where = "its folder" if base == parent else "its folder would be created under"
    return _creatable(parent) or _dir_access_problem(base, where)  # a read-only file there is replaced


def output_file_problem(path: str, what: str = "the report") -> Optional[str]:
    """Why the run cannot write ``what`` to ``path`` (its type, then its folder's permissions), or None."""
    return file_target_problem(path, what=what) or new_file_problem(path)


def _new_file_beside(path: str) -> tuple[int, str]:
    """A new file in ``path``'s folder with a random name, open for writing: ``O_CREAT|O_EXCL`` (never
    through a link), as ``tempfile.mkstemp`` does, but created with mode 0666 so that the kernel applies
    the umask (or the folder's default ACL) as for a plain ``open``. mkstemp makes it 0600, and the umask
    cannot be read without setting it for the whole process, under every other thread."""
    directory = os.path.dirname(path) or "."
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f"{os.path.basename(path)}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", path)


def write_atomically(path: str, write: Callable[[BinaryIO], Any], durable: bool = False) -> None:
    """Write ``path`` through ``write(f)`` on a new temporary file of its folder (created when missing;
    ``_new_file_beside``: a random name, never through a link), then rename it over ``path`` (a link
    there is replaced, its target left alone): a reader sees the old file or the whole new one. The file
    gets the mode a plain ``open`` would (0666 & ~umask). ``durable``: flushed and fsynced before the
    rename. The temporary file is removed when ``write`` raises."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd, tmp = _new_file_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# ------------------------------------------------------------------------------------------ folders
def directory_problem(path: str, create: bool) -> Optional[str]:
    """Why ``path`` cannot be the folder of a cache (``create``: made when missing, so it must be writable)
    or of kernel sources (read only; it must exist), or None."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        if not create:
            return "does not exist"
        return _creatable(path) or _dir_access_problem(_nearest_existing(path), "it would be created in")
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISDIR(mode):
        return f"is {_kind(mode)}, not a directory"
    if create:
        return _dir_access_problem(path, "the folder")
    if not os.access(path, os.R_OK | os.X_OK):
        return "cannot be read (its permissions exclude you)"
    return None
