"""The path a kernel source takes from ``hip_kernel`` to a launch, traced in one run.

Usage: ``python benchmarks/source_path.py [--show]``

Runs one test through pytest in this process, as a CPU-only runner runs it: ``hip_kernel(SOURCE, "fill")``
at wave64 with a cold kernel cache (a fresh ``--gpuenv-cache-dir``), then one launch. A profile hook records,
from the factory's call to the launch's return, every call and return in the package's modules. Printed:
the modules entered, how many times control came back into a module it had already left (a caller's module
after a return counts: the source went there and back), how many times each source-parsing function ran
(``--show`` adds the sequence of modules). Fewer of all three is a shorter path.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

PACKAGE = "pytest_gpuenv"
#: functions that read or parse a kernel source's text, under any of the names they have had
PARSERS = ("load_source", "strip_comments", "read_source", "parse_source", "scan_kernels", "find_kernels",
           "_kernels_in")

TEST = textwrap.dedent(
    '''
    import numpy as np
    import benchmarks_source_path as trace

    SOURCE = """
    #include <hip/hip_runtime.h>
    // fills out with its index
    extern "C" __global__ void fill(float* out, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = i;   /* one store */
    }
    """

    def test_fill(hip_kernel):
        out = np.zeros(256, dtype=np.float32)
        trace.start()
        k = hip_kernel(SOURCE, "fill")
        k(4, 64, out, np.int32(256))
        trace.stop()
        assert out[255] == 255
    '''
)


class Tracer:
    def __init__(self) -> None:
        self.stack: list[str] = []
        self.sequence: list[str] = []  # the innermost package module after each change
        self.calls: Counter[str] = Counter()
        self.entries: Counter[str] = Counter()  # calls into a module from outside it

    def _module(self, frame: FrameType) -> str | None:
        name = frame.f_globals.get("__name__", "")
        return name if isinstance(name, str) and name.startswith(PACKAGE + ".") else None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        module = self._module(frame)
        if module is None:
            return
        if event == "call":
            caller = self.stack[-1] if self.stack else None
            if caller != module:
                self.entries[module] += 1
            self.calls[f"{module}.{frame.f_code.co_name}"] += 1
            self.stack.append(module)
        elif self.stack:
            self.stack.pop()
        current = self.stack[-1] if self.stack else None
        if current and (not self.sequence or self.sequence[-1] != current):
            self.sequence.append(current)


TRACER = Tracer()


def start() -> None:
    sys.setprofile(TRACER)


def stop() -> None:
    sys.setprofile(None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show", action="store_true", help="print the sequence of modules too")
    args = ap.parse_args()
    sys.modules["benchmarks_source_path"] = sys.modules[__name__]
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "test_fill.py").write_text(TEST)
        cache = Path(tmp, "cache")
        code = pytest.main(
            [str(Path(tmp, "test_fill.py")), "-q", "-p", "gpuenv", "-p", "no:cacheprovider", "-k", "wave64",
             f"--gpuenv-cache-dir={cache}", "--gpuenv-kernels=run", f"--rootdir={tmp}"]
        )
    if code != 0 or not TRACER.sequence:
        print(f"the traced test did not pass (pytest exit {code})")
        return 1
    seq = TRACER.sequence
    left: set[str] = set()
    returns = 0
    for before, after in zip(seq, seq[1:]):
        left.add(before)
        if after in left:
            returns += 1
    print(f"modules entered: {len(set(seq))}")
    print(f"returns to a module already left: {returns}")
    print(f"module changes: {len(seq) - 1}")
    for name in PARSERS:
        hits = {k: v for k, v in TRACER.calls.items() if k.rsplit(".", 1)[1] == name}
        for key, count in sorted(hits.items()):
            print(f"calls of {key.removeprefix(PACKAGE + '.')}: {count}")
    for module, count in sorted(TRACER.entries.items(), key=lambda kv: -kv[1])[:8]:
        print(f"entries into {module.removeprefix(PACKAGE + '.')}: {count}")
    if args.show:
        print(" -> ".join(m.removeprefix(PACKAGE + ".") for m in seq))
    return 0


if __name__ == "__main__":
    sys.exit(main())
