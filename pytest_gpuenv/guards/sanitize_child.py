"""The child process of a sanitizer run: its command line and environment as the parent makes them
(``command``, ``environment``), running it with a time limit (``run``), and what the child does
(``configure``, ``Recorder``): instrument its builds (``rtc.instrument``: ``-lineinfo`` on NVIDIA, AddressSanitizer
on AMD) and append each test report, serialized by pytest's ``pytest_report_to_serializable``, with the kernels built
since the last, to the results file as one JSON line (``results`` reads them back).

The child is ``python -m pytest NODEID... -q -p no:cacheprovider -m "" -k "" --rootdir ROOT --junitxml= [-c INI]
[-n 0]`` plus the parent's ``-p``, ``-o``, ``--import-mode``, ``-W`` and ``--confcutdir`` arguments; the parent's
``--gpuenv-*`` options given on the command line reach it as their environment variables, except the sanitizer's
own and those that write the run's outputs (``--gpuenv-json``, ``--gpuenv-perf-plot``) or plan and spread it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from typing import Any, Optional

import pytest

from pytest_gpuenv.base.model import safe_repr
from pytest_gpuenv.detect.asan import COMPILE_OPTIONS, RocmAsan
from pytest_gpuenv.rtc import instrument
from pytest_gpuenv.session.options import OPTIONS, SANITIZE_CHILD_VAR

#: options not handed to a child (its own outputs would overwrite the run's)
_NOT_CARRIED = ("gpuenv_sanitize", "gpuenv_sanitize_select", "gpuenv_sanitize_foreign", "gpuenv_sanitize_timeout",
                "gpuenv_json", "gpuenv_perf_plot", "gpuenv_plan", "gpuenv_dist", "gpuenv_plan_profile",
                "gpuenv_worker_gpus")
#: the parent's arguments a child gets (``carried_args``)
_CARRIED_FLAGS = ("-p", "-o", "--override-ini", "--import-mode", "-W", "--pythonwarnings", "--confcutdir")


def command(config: pytest.Config, nodeids: list[str]) -> list[str]:
    """``python -m pytest`` for ``nodeids``, with the run's rootdir, ini file and plugin arguments; the
    parent's selection, outputs and xdist left out (the nodeids are the selection)."""
    root = str(config.rootpath)
    cmd = [sys.executable, "-m", "pytest", *(os.path.join(root, n) for n in nodeids), "-q", "-p", "no:cacheprovider",
           "-m", "", "-k", "", "--rootdir", root, "--junitxml="]
    if config.inipath is not None:
        cmd += ["-c", str(config.inipath)]
    if config.pluginmanager.hasplugin("xdist"):
        cmd += ["-n", "0"]
    return cmd + carried_args(config.invocation_params.args)


def environment(config: pytest.Config, kind: str, asan: Optional[RocmAsan], tool: str, out: str,
                log: str) -> dict[str, str]:
    """The child's environment: this one, with the options given on the command line as their variables (the
    sanitizer's own and the run's outputs left out), ``GPUENV_SANITIZE_CHILD``, and what the route needs."""
    env = dict(os.environ)
    for opt in OPTIONS:
        if opt.env and opt.cli and opt.name not in _NOT_CARRIED:
            value = config.getoption(opt.name, default=None)
            if value is not None and not isinstance(value, (list, bool)):
                env[opt.env] = str(value)
    for opt in OPTIONS:
        if opt.name in _NOT_CARRIED and opt.env:
            env.pop(opt.env, None)
    env[SANITIZE_CHILD_VAR] = json.dumps({"out": out, "tool": tool, "route": kind})
    if kind == "cuda" and tool in ("memcheck", "initcheck"):
        env.setdefault("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")
    a = asan
    if kind == "rocm" and tool != "plain" and a is not None:  # (the plain run is built without ASan)
        env["HSA_XNACK"] = "1"
        if a.runtime:
            env["LD_PRELOAD"] = " ".join(x for x in (a.runtime, env.get("LD_PRELOAD", "")) if x)
        if a.lib_dir:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(x for x in (a.lib_dir, env.get("LD_LIBRARY_PATH", "")) if x)
        env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS", ""), "detect_leaks=0",
                                                   f"log_path={log}") if x)
    return env


def run(cmd: list[str], env: dict[str, str], cwd: str, limit: float) -> tuple[Optional[int], str]:
    """Run ``cmd`` in its own process group: (exit status, output); (None, output) when it ran past ``limit``
    seconds, and then the whole group (the tool, the Python under it, what that started) is ended."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=limit)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out


def carried_args(args: Any) -> list[str]:
    """The parent's plugin, ini-override, import-mode and warning arguments, for a child."""
    out: list[str] = []
    items = [str(a) for a in args]
    i = 0
    while i < len(items):
        a = items[i]
        flag = next((f for f in _CARRIED_FLAGS if a == f or a.startswith(f + "=") or (len(f) == 2 and a.startswith(f)
                                                                                    and len(a) > 2)), None)
        if flag is not None:
            if a == flag and i + 1 < len(items):
                out += [a, items[i + 1]]
                i += 2
                continue
            out.append(a)
        i += 1
    return out


def _instrumentation(kind: str, plain: bool) -> Optional[instrument.Instrumentation]:
    if kind == "cuda":  # (the plain run builds alike, so it finds the tool run's builds in the cache)
        return instrument.Instrumentation(nvidia=("-lineinfo",))
    if kind == "rocm" and not plain:
        return instrument.Instrumentation(amd=COMPILE_OPTIONS, amd_features=":xnack+", amd_compiler="hipcc")
    return None


def configure(config: pytest.Config) -> None:
    """In a child (``GPUENV_SANITIZE_CHILD`` set): instrument the builds as the route needs, and record."""
    try:
        spec = json.loads(os.environ[SANITIZE_CHILD_VAR])
        out, tool, kind = str(spec["out"]), str(spec["tool"]), str(spec["route"])
    except (ValueError, KeyError, TypeError):
        raise pytest.UsageError(f"gpuenv: {SANITIZE_CHILD_VAR}={safe_repr(os.environ[SANITIZE_CHILD_VAR])} is not "
                                "what a sanitizer run sets; unset it") from None
    instrument.use(_instrumentation(kind, tool == "plain"))
    config.pluginmanager.register(Recorder(config, out), "gpuenv-sanitize-child")


class Recorder:
    """In a child: each test report, serialized, and the kernels built since the last one, appended to the results
    file as one JSON line each, flushed at once (a child the tool ends keeps what it had reported)."""

    def __init__(self, config: pytest.Config, out: str) -> None:
        self.config, self.out = config, out
        self.kernels = 0  # how many of ``instrument.built`` are written

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
        line = {"report": data, "kernels": instrument.built[self.kernels:]}
        self.kernels = len(instrument.built)
        with open(self.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def results(path: str) -> list[dict[str, Any]]:
    """The lines of a results file that are whole JSON objects (the last may have been cut by the child's end)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out
