"""A wedged or broken compiler is a compile error naming the command, never a hung run: a wedged script on
PATH, a compile whose children hold its pipe, a compiler that cannot start.
"""

from __future__ import annotations

import os
import time

import pytest
from _cache_hostile import wedged_tool

from pytest_gpuenv.rtc import KernelCompileError, _run, compilers

pytestmark = pytest.mark.usefixtures("fresh_compile_cache")


@pytest.mark.parametrize("tool, call, shown", [
    ("hipcc", lambda: compilers.Hipcc().identity(), "hipcc --version"),
    ("nvcc", lambda: compilers.Nvcc().identity(), "nvcc --version"),
    ("nvcc", lambda: compilers.Nvcc().supports("sm_90"), "nvcc --list-gpu-code"),
])
def test_wedged_compiler_query_times_out_naming_the_command(tmp_path, monkeypatch, tool, call, shown):
    wedged_tool(tmp_path, monkeypatch, tool)
    monkeypatch.setattr(compilers, "TOOL_TIMEOUT", 0.5)
    with pytest.raises(KernelCompileError, match=rf"{tmp_path}/bin/{shown} timed out after 0.5 s"):
        call()


def test_gpuenv_compile_with_a_wedged_nvcc_on_path(tmp_path, monkeypatch, capsys):
    from pytest_gpuenv.rtc._cli import compile_command

    wedged_tool(tmp_path, monkeypatch, "nvcc")
    monkeypatch.setattr(compilers, "TOOL_TIMEOUT", 0.5)
    monkeypatch.setitem(compilers._ALL, "nvcc", compilers.Nvcc())
    (tmp_path / "k.hip").write_text('extern "C" __global__ void k(float* o) { o[0] = 1.0f; }\n')
    assert compile_command([str(tmp_path / "k.hip"), "--arch", "sm_90", "--compiler", "nvcc", "--no-cache"]) == 1
    assert f"FAIL k sm_90: {tmp_path}/bin/nvcc --version timed out after 0.5 s" in capsys.readouterr().out


def test_wedged_compile_is_killed_with_its_children(tmp_path):
    pidfile = tmp_path / "pid"
    t = time.monotonic()
    with pytest.raises(KernelCompileError, match=r"sh -c .* timed out after 0.5 s \(a wedged compiler\?\)"):
        _run.run_tool(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], 0.5)
    assert time.monotonic() - t < 30  # the grandchild held the pipe: it was killed with its group
    pid = int(pidfile.read_text())
    time.sleep(0.1)
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().split()[2]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z")


def test_compiler_that_cannot_start_is_a_compile_error(tmp_path):
    (tmp_path / "hipcc").write_text("not a program")  # not executable
    with pytest.raises(KernelCompileError, match=r"cannot run .*hipcc --version: \[Errno 13\]"):
        _run.run_tool([str(tmp_path / "hipcc"), "--version"], 5)


def _alive_with(marker: str) -> list[str]:
    """Command lines of live (not zombie) processes that name ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(f"{pid}: {cmdline}")
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_a_compiler_and_its_children_die_with_the_process_that_started_it(tmp_path):
    """A SIGTERM to the process compiling (pytest, say) left the compiler and its cc1plus blocked for ever: a
    tool's whole process group now ends with the process that started it, grandchildren included."""
    import signal
    import subprocess
    import sys

    marker = f"{os.getpid()}.{time.monotonic_ns() % 100000}"  # a sleep length no other process uses
    script = ("import sys; from pytest_gpuenv.rtc._run import run_tool; "
              f"run_tool(['sh', '-c', 'sleep 1{marker} & sleep 2{marker}; wait'], 600)")
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 30
        while len(_alive_with(marker)) < 3 and time.monotonic() < deadline:  # the wrapper and its two sleeps
            time.sleep(0.05)
        assert len(_alive_with(marker)) >= 2, _alive_with(marker)
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while _alive_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive_with(marker) == []
    finally:
        proc.kill()
        for line in _alive_with(marker):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
