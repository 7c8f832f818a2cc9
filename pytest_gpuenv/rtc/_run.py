"""Running a compiler: a subprocess with a timeout, and its log turned into a KernelCompileError.

Every subprocess of the compile path and of compiler discovery (``hipcc --version``, ``nvcc
--version``, ``nvcc --list-gpu-code``, the compilers, the hiprtc worker) goes through ``run_tool``: it
runs in its own process group and, past its timeout, the whole group is killed and the error names the
command, so a wedged compiler on PATH cannot hang ``gpuenv compile`` or a test run. On Linux the group is led
by a watcher that kills it when the process that started it ends (``KEEPER``): a compiler never outlives pytest.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shlex
import shutil
import signal
import subprocess
from typing import Any, Optional

from pytest_gpuenv.rtc.errors import KernelCompileError
from pytest_gpuenv.rtc.logs import first_error
from pytest_gpuenv.rtc.source import Source


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


#: how a tool is started on POSIX: a watcher in the tool's new process group reads a pipe whose write end only
#: the starting process holds; when that process ends (a SIGTERM, a kill, a crash) or the tool is done, the read
#: returns and the watcher kills the group, so no compiler, wrapper or cc1plus outlives pytest; then the shell
#: becomes the tool (``exec``), which keeps its pid, streams and exit status
KEEPER = 'fd=$1; shift; (read _ <&"$fd"; kill -9 0) </dev/null >/dev/null 2>&1 & exec "$@"'


def run_tool(cmd: list[str], timeout: float, *, input: Optional[str] = None, env: Optional[dict[str, Any]] = None,
             compiler: Optional[str] = None) -> subprocess.CompletedProcess[str]:
    """Run a compiler or one of its queries in its own session, with a timeout, never outliving this process.

    On the timeout the whole process group is killed (a wrapper script's children too, so no pipe is
    left open) and KernelCompileError names the command; a tool that cannot be started is one too.
    """
    shown = " ".join(shlex.quote(c) for c in cmd)
    shown = shown if len(shown) <= 300 else shown[:297] + "..."
    tool, keep = cmd, (-1, -1)
    if os.name == "posix":
        problem = _cannot_exec(cmd[0])
        if problem is not None:  # what Popen would say, before the keeper's shell starts
            raise KernelCompileError(f"cannot run {shown}: {problem}", compiler=compiler)
        keep = os.pipe()
        cmd = ["/bin/sh", "-c", KEEPER, "sh", str(keep[0]), *cmd]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8", errors="replace",
                                env=env, pass_fds=keep[:1] if os.name == "posix" else (),
                                start_new_session=os.name == "posix")
    except OSError as exc:
        raise KernelCompileError(f"cannot run {shown}: {exc}", compiler=compiler) from None
    finally:
        if keep[0] >= 0:
            os.close(keep[0])
    try:
        return _wait(proc, tool, shown, input, timeout, compiler)
    finally:
        if keep[1] >= 0:
            os.close(keep[1])  # the watcher kills what is left of the tool's group


def _cannot_exec(program: str) -> Optional[OSError]:
    """The error running ``program`` (a path, or a name looked up on PATH) would raise, or None."""
    path = program if os.sep in program else shutil.which(program)
    if path is None or not os.path.exists(path):
        return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    return None


def _wait(proc: subprocess.Popen[str], tool: list[str], shown: str, input: Optional[str], timeout: float,
          compiler: Optional[str]) -> subprocess.CompletedProcess[str]:
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
    return subprocess.CompletedProcess(tool, proc.returncode, out, err)
