"""The compiled-kernel cache: per-user, mode 0700, atomic writes, one compile under many processes.

An entry is ``MAGIC | sha256(meta + binary) | len(meta) | meta (JSON) | binary``. The key hashes the
source, every header it includes, the kernel name, options, defines, arch and the compiler's identity
and version. A cached code object runs on the GPU, so the directory must be the user's own and not
writable by anyone else; otherwise it is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import tempfile
import warnings
from typing import Any, Callable, Optional

MAGIC = b"GPUENVK1"
_HEAD = struct.Struct("<8s32sI")
LOCK_TIMEOUT = 600.0


class CacheWarning(UserWarning):
    """A cache entry was corrupt or truncated and is being recompiled."""


def default_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pytest-gpuenv")


def check_dir(path: str) -> None:
    """Refuse a directory owned by someone else or writable by group/others (CacheDirError)."""
    from pytest_gpuenv.rtc._errors import CacheDirError

    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise CacheDirError(f"compile cache {path} is not a directory")
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    why = None
    if uid is not None and st.st_uid != uid:
        why = f"it is owned by uid {st.st_uid}, not by you (uid {uid})"
    elif st.st_mode & 0o022:
        why = f"it is writable by {'group and others' if st.st_mode & 0o020 and st.st_mode & 0o002 else 'group' if st.st_mode & 0o020 else 'others'} (mode {stat.S_IMODE(st.st_mode):o})"
    if why:
        raise CacheDirError(
            f"refusing the compile cache {path}: {why}. A code object planted there would run on the GPU. "
            f"Use a directory of your own (--gpuenv-cache-dir) or fix it: chown $USER {path} && chmod 700 {path}"
        )


def ensure_dir(path: Optional[str]) -> str:
    path = os.path.abspath(os.path.expanduser(path or default_dir()))
    if not os.path.isdir(path):
        os.makedirs(path, mode=0o700, exist_ok=True)
        try:
            os.chmod(path, 0o700)
        except OSError:
            pass
    check_dir(path)
    return path


def make_key(parts: dict[str, Any], source: bytes, headers: list[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(parts, sort_keys=True, default=str).encode())
    h.update(b"\0src\0" + source)
    for path, data in headers:
        h.update(b"\0hdr\0" + os.path.basename(path).encode() + b"\0" + hashlib.sha256(data).digest())
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
    return json.loads(body[:mlen]), body[mlen:]


class Cache:
    def __init__(self, path: Optional[str] = None) -> None:
        self.path = ensure_dir(path)

    def entry_path(self, key: str) -> str:
        return os.path.join(self.path, "v1", key[:2], key + ".bin")

    def load(self, key: str) -> Optional[tuple[dict[str, Any], bytes]]:
        p = self.entry_path(key)
        try:
            with open(p, "rb") as f:
                blob = f.read()
        except FileNotFoundError:
            return None
        try:
            return decode_entry(blob)
        except (ValueError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            warnings.warn(CacheWarning(f"compile cache entry {p} is corrupt ({exc}); recompiling"), stacklevel=4)
            try:
                os.unlink(p)
            except OSError:
                pass
            return None

    def store(self, key: str, meta: dict[str, Any], binary: bytes) -> None:
        p = self.entry_path(key)
        d = os.path.dirname(p)
        os.makedirs(d, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".bin")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(encode_entry(meta, binary))
            os.replace(tmp, p)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def get_or_compile(
        self, key: str, compile_fn: Callable[[], tuple[dict[str, Any], bytes]]
    ) -> tuple[dict[str, Any], bytes, bool]:
        """(meta, binary, hit). Under a file lock, so concurrent processes compile a key once."""
        got = self.load(key)
        if got is not None:
            return got[0], got[1], True
        from filelock import FileLock

        lock_path = self.entry_path(key)[: -len(".bin")] + ".lock"
        os.makedirs(os.path.dirname(lock_path), mode=0o700, exist_ok=True)
        with FileLock(lock_path, timeout=LOCK_TIMEOUT):
            got = self.load(key)
            if got is not None:
                return got[0], got[1], True
            meta, binary = compile_fn()
            self.store(key, meta, binary)
            return meta, binary, False
