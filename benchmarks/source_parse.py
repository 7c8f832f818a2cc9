"""Parse times of pathological kernel sources (issue 12 item 11): quadratic before, linear now.

    python benchmarks/source_parse.py [--before REV] [--cap SECONDS]

Times ``find_kernels`` (comments stripped, extern "C" blocks, kernels and their parameters) on each
source at half and at full size: linear code doubles, quadratic code quadruples. With ``--before REV``
the ``pytest_gpuenv/rtc/source.py`` of that git revision is timed too (in a child process, stopped
after ``--cap`` seconds), e.g. ``--before af0dbd1`` for the code the attack run measured.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

CASES = {
    'unclosed extern "C" {': lambda n: 'extern "C" {\n' * (n // 13),
    "kernels": lambda n: "".join(f'extern "C" __global__ void k{i}(float* a, int n) {{}}\n' for i in range(n // 52)),
    "unclosed /*": lambda n: "/*" * (n // 2),
    "unclosed '\\' literals": lambda n: "'\\'" * (n // 3),
    "unclosed __launch_bounds__(": lambda n: "__global__ __launch_bounds__(" * (n // 29) + ")",
    "unclosed parameter lists": lambda n: "__global__ void f(" * (n // 18),
}
#: full sizes in bytes: the issue's 104 KB, and 50,000 kernels (2.6 MB)
SIZES = {'unclosed extern "C" {': 104_000, "kernels": 52 * 50_000}
DEFAULT_SIZE = 104_000

_CHILD = """
import importlib.util, sys, time
sys.path.insert(0, {repo!r})
spec = importlib.util.spec_from_file_location("old_source", {path!r})
mod = sys.modules["old_source"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
text = sys.stdin.read()
t = time.perf_counter()
mod.find_kernels(text)
print(time.perf_counter() - t)
"""


def _now(text: str) -> float:
    from pytest_gpuenv.rtc.source import find_kernels

    t = time.perf_counter()
    find_kernels(text)
    return time.perf_counter() - t


def _before(path: str, text: str, cap: float) -> str:
    try:
        p = subprocess.run([sys.executable, "-c", _CHILD.format(repo=REPO, path=path)], input=text,
                           capture_output=True, text=True, timeout=cap)
    except subprocess.TimeoutExpired:
        return f"> {cap:g} s"
    return f"{float(p.stdout):.3f} s" if p.returncode == 0 else "error: " + p.stderr.strip()[-200:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", metavar="REV", help="also time _source.py of this git revision")
    ap.add_argument("--cap", type=float, default=120.0, help="seconds before giving up on the old code")
    args = ap.parse_args()
    old = None
    if args.before:
        old = os.path.join("/tmp", f"gpuenv_source_{args.before}.py")
        with open(old, "w") as f:
            f.write(subprocess.run(["git", "-C", REPO, "show", f"{args.before}:pytest_gpuenv/rtc/source.py"],
                                   capture_output=True, text=True, check=True).stdout)
    print(f"{'source':<30} {'bytes':>9} {'now':>9}" + (f"  {'before (' + args.before + ')':>18}" if old else ""))
    for name, make in CASES.items():
        full = SIZES.get(name, DEFAULT_SIZE)
        for size in (full // 2, full):
            text = make(size)
            line = f"{name:<30} {len(text):>9} {_now(text):>7.3f} s"
            if old:
                line += f"  {_before(old, text, args.cap):>18}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
