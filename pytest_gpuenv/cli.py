"""``gpuenv info|doctor|compile`` (also ``python -m pytest_gpuenv``): detect, then print the model
(``info_text`` or JSON) or each problem with its fix (``doctor_lines``); ``compile`` is rtc's."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Optional, Sequence

from pytest_gpuenv import report

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.model import GpuEnv


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpuenv", description="GPU environment report for pytest-gpuenv")
    sub = p.add_subparsers(dest="command", metavar="{info,doctor,compile}")
    for name, helptext in (
        ("info", "print the environment model"),
        ("doctor", "list each problem with its fix; exit 1 when a problem (not a mere note) was found"),
    ):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument("--root", metavar="PATH", default=os.environ.get("GPUENV_ROOT"),
                        help="read another system's files under PATH (no library loaded, no probe)")
        sp.add_argument("--probe", choices=("auto", "always", "never"), default="auto",
                        help="runtime probe in a subprocess (default: auto)")
        sp.add_argument("--probe-timeout", type=float, default=20.0, metavar="SECONDS")
        if name == "info":
            sp.add_argument("--json", action="store_true", help="print the model as JSON")
    sub.add_parser("compile", help="compile a HIP source for each arch", add_help=False)
    return p


def _env(args: argparse.Namespace) -> GpuEnv:
    from pytest_gpuenv.detect import detect

    if args.root and not os.path.isdir(args.root):
        raise SystemExit(f"gpuenv: --root {args.root!r} is not a directory")
    return detect(
        root=args.root,
        probe="never" if args.root else args.probe,
        probe_timeout=args.probe_timeout,
    )


def info_text(env: GpuEnv) -> str:
    """The readable form of ``gpuenv info``."""
    out = report.header_lines(env, verbose=1)
    out = [line[len("gpuenv: "):] if line.startswith("gpuenv: ") else line for line in out]
    return "\n".join(out)


def doctor_lines(env: GpuEnv) -> list[str]:
    if not env.problems:
        return [f"OK: {report.summary(env)}", "no problems found"]
    lines = [f"environment: {report.summary(env)}", ""]
    for p in env.problems:
        lines.append(f"[{p.severity}] {p.code}: {p.message}")
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


def _entry() -> int:
    try:
        return main()
    except BrokenPipeError:  # `gpuenv info | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_entry())
