"""Running a compiler: a subprocess with a timeout, and its log turned into a KernelCompileError.

Every subprocess of the compile path and of compiler discovery (``hipcc --version``, ``nvcc
--version``, ``nvcc --list-gpu-code``, the compilers, the hiprtc worker) goes through ``run_tool``: it
runs in its own session and, past its timeout, the whole group is killed and the error names the
command, so a wedged compiler on PATH cannot hang ``gpuenv compile`` or a test run.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
from typing import Optional

from pytest_gpuenv.rtc.errors import KernelCompileError
from pytest_gpuenv.rtc.source import Source, first_error


def file_id(path: str) -> str:
    st = os.stat(path)
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


def _log_with_real_name(log: str, src: Source) -> str:
    # hiprtc (comgr) reports the program as /tmp/comgr-XXXX/input/CompileSource (ROCm 5) or as
    # /tmp/comgr-XXXX/input/<the name it was given> (ROCm 6)
    return re.sub(r"/\S*?comgr-[^/\s]+/input/(?:CompileSource|" + re.escape(src.display.lstrip("/")) + ")",
                  lambda m: src.display, log)


def compile_error(log: str, src: Source, name: str, arch: str, compiler: str, fallback: str) -> KernelCompileError:
    log = _log_with_real_name(log, src)
    loc = first_error(log)
    if loc:
        file, line, msg = loc
        m = re.search(r"'([^']+)' file not found|cannot open source file \"([^\"]+)\"", msg)
        what = f"header {m.group(1) or m.group(2)!r} not found" if m else msg
        head = f"{file}:{line}: {what} (compiling kernel {name!r} for {arch} with {compiler})"
        return KernelCompileError(head, log=log, file=file, line=line, arch=arch, compiler=compiler)
    return KernelCompileError(
        f"{fallback} (compiling kernel {name!r} from {src.display} for {arch} with {compiler})",
        log=log, file=src.path, arch=arch, compiler=compiler,
    )


def run_tool(cmd: list[str], timeout: float, *, input: Optional[str] = None, env: Optional[dict] = None,
             compiler: Optional[str] = None) -> subprocess.CompletedProcess:
    """Run a compiler or one of its queries in its own session, with a timeout.

    On the timeout the whole process group is killed (a wrapper script's children too, so no pipe is
    left open) and KernelCompileError names the command; a tool that cannot be started is one too.
    """
    shown = " ".join(shlex.quote(c) for c in cmd)
    shown = shown if len(shown) <= 300 else shown[:297] + "..."
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8", errors="replace",
                                env=env,
                                start_new_session=os.name == "posix")
    except OSError as exc:
        raise KernelCompileError(f"cannot run {shown}: {exc}", compiler=compiler) from None
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            if os.name == "posix":
                os.killpg(proc.pid, signal.SIGKILL)
            else:  # pragma: no cover
                proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=5)
        raise KernelCompileError(f"{shown} timed out after {timeout:g} s (a wedged compiler?); it was killed",
                                 compiler=compiler) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
