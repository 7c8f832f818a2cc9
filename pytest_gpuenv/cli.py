"""``gpuenv info|doctor|compile`` (also ``python -m pytest_gpuenv``): detect, then print the model
(``info_text`` or JSON) or each problem with its fix (``doctor_lines``); ``compile`` is rtc's, ``perf`` perf's,
``quarantine`` the quarantine list's (``session.quarantine_check``)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import sys
from typing import Any, Optional, Sequence, TextIO

from pytest_gpuenv.base import capabilities
from pytest_gpuenv.base.model import GpuEnv, safe_repr
from pytest_gpuenv.detect import PROBE_TIMEOUT_MAX, detect, probe_timeout_ok
from pytest_gpuenv.session import report


def _parser() -> argparse.ArgumentParser:
    from pytest_gpuenv import __version__

    p = argparse.ArgumentParser(prog="gpuenv", description="GPU environment report for pytest-gpuenv")
    p.add_argument("--version", action="version", version=f"pytest-gpuenv {__version__}")
    sub = p.add_subparsers(dest="command", metavar="{info,doctor,compile,perf,quarantine}")
    for name, helptext in (
        ("info", "print the environment model"),
        ("doctor", "list each problem with its fix; exit 1 when a problem (not a mere note) was found"),
    ):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument("--root", metavar="PATH", default=os.environ.get("GPUENV_ROOT") or None,
                        help="read another system's files under PATH (no library loaded, no probe); "
                        "default: GPUENV_ROOT (empty means unset)")
        sp.add_argument("--probe", choices=("auto", "always", "never"), default="auto",
                        help="runtime probe in a subprocess (default: auto)")
        sp.add_argument("--probe-timeout", type=_probe_timeout, default=20.0, metavar="SECONDS",
                        help=f"seconds the runtime probe may take, in (0, {PROBE_TIMEOUT_MAX}] (default 20)")
        if name == "info":
            sp.add_argument("--json", action="store_true", help="print the model as JSON")
    sub.add_parser("compile", help="compile a HIP source for each arch", add_help=False)
    sub.add_parser("perf", help="perf compare BASE.json NEW.json: two --gpuenv-json reports side by side",
                   add_help=False)
    sub.add_parser("quarantine", help="quarantine check [FILE] --json-report REPORT...: stale entries and entries "
                   "ready to lift", add_help=False)
    return p


def _probe_timeout(text: str) -> float:
    """argparse type of ``--probe-timeout``: the plugin option's bounds."""
    try:
        seconds = float(text) if len(text) <= 100 else math.nan
    except ValueError:
        seconds = math.nan
    if not probe_timeout_ok(seconds):  # nan and inf fail too
        raise argparse.ArgumentTypeError(f"expected seconds in (0, {PROBE_TIMEOUT_MAX}], got {safe_repr(text)}")
    return seconds


def _env(args: argparse.Namespace) -> GpuEnv:
    root = args.root or None  # `--root ''` is unset, as GPUENV_ROOT= is
    if root and not os.path.isdir(root):
        raise SystemExit(f"gpuenv: --root {safe_repr(root, 200)} is not a directory")
    return detect(
        root=root,
        probe="never" if root else args.probe,
        probe_timeout=args.probe_timeout,
    )


def info_text(env: GpuEnv) -> str:
    """The readable form of ``gpuenv info``: informational notes (severity "info", such as ROCm installed on
    a machine without an AMD GPU) on a ``notes:`` line of their own, not among the problems."""
    out = report.header_lines(env, verbose=1)
    out = [line[len("gpuenv: "):] if line.startswith("gpuenv: ") else line for line in out]
    if env.devices:
        out.append("capabilities:")
        out.extend(f"  [{d.index}] {capabilities.describe(d, env)}" for d in env.devices)
    return "\n".join(out)


def doctor_lines(env: GpuEnv) -> list[str]:
    if not env.problems:
        return [f"OK: {report.summary(env)}", "no problems found"]
    lines = [f"environment: {report.summary(env)}", ""]
    for p in env.problems:
        lines.append(f"[{'note' if p.severity == 'info' else p.severity}] {p.code}: {p.message}")
        if p.fix:
            for i, fl in enumerate(p.fix.splitlines()):
                lines.append(("    fix: " if i == 0 else "         ") + fl)
        lines.append("")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "compile":
        from pytest_gpuenv.rtc import compile_command

        return compile_command(argv[1:])
    if argv and argv[0] == "perf":
        from pytest_gpuenv.perf.compare_cli import perf_command

        return perf_command(argv[1:])
    if argv and argv[0] == "quarantine":
        from pytest_gpuenv.session.quarantine_check import quarantine_command

        return quarantine_command(argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    env = _env(args)
    if args.command == "info":
        if args.json:
            print(json.dumps(env.to_dict(), indent=2, default=str))
        else:
            print(info_text(env))
        return 0
    for line in doctor_lines(env):
        print(line)
    # informational notes (e.g. ROCm installed on a machine without an AMD GPU) are not problems to fix
    return 1 if any(p.severity != "info" for p in env.problems) else 0


class _OutputError(Exception):
    """Writing the command's output failed (a full disk, a closed pipe); ``__cause__`` says how."""


class _Stdout:
    """``sys.stdout`` while the console script runs: a failed write or flush raises ``_OutputError``, so
    only an output failure (not an ``OSError`` of the work itself) becomes the one-line message."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise _OutputError() from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise _OutputError() from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _entry() -> int:
    """The console script: output that cannot be encoded is printed with replacement characters (a
    device name from a root tree may hold any bytes), and output that cannot be written ends with one
    line on stderr instead of a traceback (exit 1; 0 for a closed pipe, as ``gpuenv info | head``)."""
    stdout = sys.stdout
    if isinstance(stdout, io.TextIOWrapper):
        stdout.reconfigure(errors="replace")
    sys.stdout = _Stdout(stdout)
    try:
        code = main()
        sys.stdout.flush()
    except _OutputError as exc:
        _drop(stdout)
        if isinstance(exc.__cause__, BrokenPipeError):
            return 0
        reason = exc.__cause__.strerror if isinstance(exc.__cause__, OSError) else None
        print(f"gpuenv: cannot write the output: {reason or exc.__cause__}", file=sys.stderr)
        return 1
    finally:
        sys.stdout = stdout
    return code


def _drop(stream: TextIO) -> None:
    """Point ``stream`` at the null device, so the interpreter's last flush of what is left cannot fail."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_entry())
