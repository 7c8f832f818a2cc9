"""Helpers that turn the hand-written scenario trees (tests/data/gpu-roots) into real file trees.

The trees are plain files: their symlinks were flattened into small text files holding the
link target; ``_meta/`` holds what plain files cannot carry (modes and owners of device nodes, the
user and groups of the process, the environment). ``materialize`` recreates those facts for real so
the detector sees what it would see on that machine, and ``run_as`` runs it as that machine's user.
"""

from __future__ import annotations

import atexit
import functools
import grp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

import pytest

from pytest_gpuenv.base.model import GpuEnv
from pytest_gpuenv.detect import detect

#: the two MI300X GPUs of the mi300x_linux scenario, in HIP order
MI300 = ("GPU-3cbe002bd3b6313d", "GPU-648def29d3407eef")
_SKIP_TOP = {"_meta", "tool_outputs", "README.txt"}


def _load(scenario: Path, name: str, default: Any) -> Any:
    path = Path(scenario) / "_meta" / name
    if not path.is_file():
        return default
    return json.loads(path.read_text())


def scenario_env(scenario_dir: Any) -> dict[str, str]:
    """The scenario's environment variables (_meta/env.json)."""
    return {str(k): str(v) for k, v in _load(Path(scenario_dir), "env.json", {}).items()}


def scenario_process(scenario_dir: Any) -> dict[str, Any]:
    return _load(Path(scenario_dir), "process.json", {"uid": 0, "gid": 0, "user": "root", "groups": [[0, "root"]]})


def scenario_expected(scenario_dir: Any) -> dict[str, Any]:
    return _load(Path(scenario_dir), "expected.json", {})


def _link_target(path: Path, dest: Path) -> Optional[str]:
    """The link target a flattened symlink file names, or None when the file is ordinary content."""
    try:
        if path.stat().st_size > 256:
            return None
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text or text.startswith("/") or any(c.isspace() for c in text) or text in (".", ".."):
        return None
    target = (path.parent / text).resolve()
    try:
        target.relative_to(dest.resolve())
    except ValueError:
        return None
    if target == path.resolve() or not (target.is_file() or target.is_dir()):
        return None
    return text


def _ensure_group(gid: int, name: str) -> None:
    try:
        grp.getgrgid(gid)
        return
    except KeyError:
        pass
    if os.geteuid() != 0:
        pytest.skip(f"group {name} (gid {gid}) does not exist here and creating it needs root")
    taken = True
    try:
        grp.getgrnam(name)
    except KeyError:
        taken = False
    group_name = f"gpuenv-{name}-{gid}" if taken else name
    subprocess.run(["groupadd", "-g", str(gid), group_name], check=True, capture_output=True, timeout=30)


def materialize(scenario_dir: Any, dest: Any) -> Path:
    """Copy ``scenario_dir`` to ``dest`` (a new folder), restore symlinks and device-node modes."""
    src, dest = Path(scenario_dir), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for entry in src.iterdir():
        if entry.name in _SKIP_TOP:
            continue
        if entry.is_dir():
            shutil.copytree(entry, dest / entry.name, copy_function=shutil.copyfile, symlinks=True)
        else:
            shutil.copyfile(entry, dest / entry.name)
    for dirpath, dirnames, _files in os.walk(dest):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    os.chmod(dest, 0o755)
    # flattened symlinks -> real symlinks (collect first: converting changes what resolves)
    links = []
    for dirpath, _dirs, files in os.walk(dest):
        for f in files:
            p = Path(dirpath) / f
            target = _link_target(p, dest)
            if target is not None:
                links.append((p, target))
    for p, target in links:
        p.unlink()
        p.symlink_to(target)
    # device nodes: modes and owners for real
    for node in _load(src, "device_nodes.json", []):
        path = dest / node["path"].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(f"PLACEHOLDER: char {node.get('major')}:{node.get('minor')}\n")
        gid = int(node.get("gid", 0))
        _ensure_group(gid, node.get("group") or f"g{gid}")
        uid = 0 if node.get("owner", "root") == "root" else int(node.get("uid", 0))
        if os.geteuid() == 0:
            os.chown(path, uid, gid)
        elif gid not in os.getgroups():
            pytest.skip(f"cannot give {node['path']} to gid {gid} without root")
        os.chmod(path, int(str(node.get("mode", "0666")), 8))
    return dest


def _traversable(folder: str) -> bool:
    """Whether every user can reach ``folder`` (o+x on it and on each folder above it)."""
    path = Path(folder).resolve()
    return all(os.stat(p).st_mode & 0o001 for p in (path, *path.parents))


def new_root_dir(prefix: str = "gpuenv-root-") -> Path:
    """A world-traversable temporary folder (pytest's tmp_path is private to root, 0700): under the
    temporary directory, or /tmp or /var/tmp where TMPDIR is private; skips the test where none is."""
    base = next((d for d in (tempfile.gettempdir(), "/tmp", "/var/tmp") if os.path.isdir(d) and _traversable(d)),
                None)
    if base is None:
        pytest.skip(f"no world-traversable temporary folder for a machine tree ({tempfile.gettempdir()} is private)")
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    os.chmod(path, 0o755)
    return path


@functools.cache
def _readable_package() -> str:
    """A copy of this checkout's ``pytest_gpuenv`` that a machine tree's unprivileged user can import (made
    once per process, removed at exit): the checkout may sit in a private folder (a home directory, a
    ``mktemp -d`` folder, both 0700), and the detector imports some of its modules only when it needs them,
    after ``run_as`` dropped to that user."""
    folder = new_root_dir("gpuenv-pkg-")
    atexit.register(shutil.rmtree, folder, True)
    package = Path(__file__).resolve().parent.parent / "pytest_gpuenv"
    shutil.copytree(package, folder / "pytest_gpuenv", ignore=shutil.ignore_patterns("__pycache__"))
    for dirpath, dirnames, files in os.walk(folder):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
        for name in files:
            os.chmod(os.path.join(dirpath, name), 0o644)
    return str(folder)


_RUNNER = r"""
import json, os, sys
args = json.loads(sys.argv[1])
# import everything the detector may import lazily while still privileged: the interpreter's own
# files may live where the scenario user cannot read them (e.g. /root/.pyenv)
import glob, grp, pwd, zlib, hashlib, subprocess, signal, ctypes, importlib.util, copy, errno, stat
import pytest_gpuenv.detect as D
from pytest_gpuenv.detect import _core, _amd, _nvidia, _wsl, _windows, checks, compilers, _probe, _rocr, _access, visible, fs
os.setgroups(args["groups"])
os.setgid(args["gid"])
os.setuid(args["uid"])
mod, _, name = args["fn"].rpartition(".")
import importlib
fn = getattr(importlib.import_module(mod), name) if mod else getattr(D, name)
env = fn(**args["kwargs"])
sys.stdout.write(json.dumps(env.to_dict() if hasattr(env, "to_dict") else env))
"""


def run_as(process: dict[str, Any], fn: Any = "pytest_gpuenv.detect.detect", **kwargs: Any) -> dict[str, Any]:
    """Run ``fn(**kwargs)`` (JSON-able arguments) in a subprocess as the scenario's user; return its JSON.

    ``process`` is a scenario's _meta/process.json. The child imports what it needs, then drops to
    the uid, gid and supplementary groups given (os.setgroups/setgid/setuid), so ``os.access`` and
    every read give the answer that user would get.
    """
    uid, gid = int(process.get("uid", 0)), int(process.get("gid", 0))
    groups = [int(g[0] if isinstance(g, (list, tuple)) else g) for g in process.get("groups", [])] or [gid]
    if (uid, gid) != (0, 0) and os.geteuid() != 0:
        pytest.skip("running as another user needs root")
    name = fn if isinstance(fn, str) else f"{fn.__module__}.{fn.__qualname__}"
    args = {"uid": uid, "gid": gid, "groups": groups, "fn": name, "kwargs": kwargs}
    env = dict(os.environ)
    env["USER"] = process.get("user", env.get("USER", ""))
    env["PYTHONPATH"] = _readable_package() + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env=env,
    )
    if proc.returncode != 0:
        raise AssertionError(f"run_as failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)



def detect_as(scenario: Path, root: Path, **env_changes) -> GpuEnv:
    """detect() on a materialized scenario, with its environment (changed by ``env_changes``; None
    removes a variable), as its user (``run_as``) when that is not root."""
    environ = scenario_env(scenario)
    for k, v in env_changes.items():
        if v is None:
            environ.pop(k, None)
        else:
            environ[k] = v
    process = scenario_process(scenario)
    if int(process.get("uid", 0)) == 0 and int(process.get("gid", 0)) == 0:
        return detect(root=str(root), environ=environ)
    return GpuEnv.from_dict(run_as(process, root=str(root), environ=environ))
