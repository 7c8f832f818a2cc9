"""Helpers of the compile cache and compile path attack tests (test_rtc_cache_*, test_rtc_wedged_compilers):
another user, a child process with limits, a tmpfs, a wedged tool."""

from __future__ import annotations

import contextlib
import os
import pwd
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest
from _checkout import REPO, TESTS

from pytest_gpuenv.rtc import cache as _cache
from pytest_gpuenv.rtc import compilers
from pytest_gpuenv.rtc.kernel import _cache_key

#: this folder: a child imports this module (``from _cache_hostile import ...``)
HERE = os.path.dirname(os.path.abspath(__file__))
KEY = "ab" * 32
#: an unprivileged uid with no passwd entry (containers run with --user like this)
FOREIGN = 4242


def build(binary: bytes) -> Callable[[], tuple[dict, bytes]]:
    return lambda: ({"n": 1}, binary)


class Stub(compilers.Compiler):
    """A compiler that is never run: its include path and identity make the cache key."""

    name = "stub"
    vendor = "amd"

    def __init__(self, own: str) -> None:
        self.own = own

    def identity(self) -> str:
        return "stub:1"

    def _extra_includes(self) -> list[str]:
        return [self.own]


def stub_key(src: Any, options: list, include_dirs: list, own: str) -> str:
    return _cache_key(src, "k", "gfx90a", Stub(own), options, {}, include_dirs)


def _limits() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def child(args: list, *, env: Optional[dict] = None, limit_memory: bool = False,
          timeout: float = 120) -> subprocess.CompletedProcess:
    """``python ARGS`` with this checkout, tests/ and this folder importable; 2 GiB of memory when
    ``limit_memory``."""
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join([REPO, TESTS, HERE, e.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=e, timeout=timeout,
                          preexec_fn=_limits if limit_memory else None, cwd="/")


_AS_USER = """
import os, sys, tempfile, warnings
from pytest_gpuenv.rtc.cache import Cache
from pytest_gpuenv.rtc.errors import CacheDirError
from filelock import FileLock
with tempfile.TemporaryDirectory() as d, FileLock(d + "/x.lock"):  # import all it loads while privileged:
    pass  # the interpreter may live where the user cannot read (/root/.pyenv)
KEY = {key!r}
os.setgroups([{uid}])
os.setgid({uid})
os.setuid({uid})
warnings.simplefilter("always")
warnings.showwarning = lambda m, *a, **k: print("warning:", m)
"""


def as_user(uid: int, code: str, env: Optional[dict] = None) -> str:
    """Run ``code`` as ``uid`` (no passwd entry), after the imports; its stdout (warnings printed there)."""
    if os.geteuid() != 0:
        pytest.skip("running as another user requires root")
    with contextlib.suppress(KeyError):
        pwd.getpwuid(uid)
        pytest.skip(f"uid {uid} has a passwd entry here")
    base = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CACHE_HOME", "USER")}
    script = _AS_USER.format(key=KEY, uid=uid) + textwrap.dedent(code)
    p = child(["-c", script], env={**base, **(env or {})})
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def public_dir(mode: int) -> Path:
    """A fresh folder under /tmp that another user can reach (pytest's tmp_path is root's, 0700)."""
    path = Path(tempfile.mkdtemp(prefix="gpuenv-cache-attack-"))
    os.chmod(path, mode)
    return path


@contextlib.contextmanager
def mount_tmpfs(path: Path, options: str) -> Iterator[Callable[[str], None]]:
    """A real tmpfs at ``path`` (skips where mounting is not allowed); yields ``remount(options)``."""
    path.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, timeout=30)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.decode(errors='replace').strip()}")

    def remount(opts: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{opts}", str(path)], check=True, capture_output=True, timeout=30)

    try:
        yield remount
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def wedged_tool(tmp_path: Path, monkeypatch: Any, name: str) -> None:
    """``name`` on PATH as a script that never answers (a wrapper whose child holds the pipe)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / name).write_text("#!/bin/sh\nsleep 60\necho never\n")
    os.chmod(bindir / name, 0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")


#: ways to plant a cache entry or a header: each is refused without blocking on it or reading it
PLANTS = {
    "fifo": lambda p: os.mkfifo(p),
    "dev-zero-link": lambda p: os.symlink("/dev/zero", p),
    "directory": lambda p: os.makedirs(os.path.join(p, "x")),
    "link-loop": lambda p: os.symlink(p, p),
    "socket": lambda p: _socket(p),
    "sparse-huge": lambda p: _sparse(p, _cache.MAX_ENTRY + 1),
}


def _socket(path: str) -> None:
    cwd = os.getcwd()
    os.chdir(os.path.dirname(path))  # an AF_UNIX path has at most 107 bytes
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(os.path.basename(path))
    finally:
        os.chdir(cwd)


def _sparse(path: str, size: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)
