"""The CPU executor's build, declared once in src/build.mk: what the Python build (rtc/_cpu.py) and the
standalone Makefile read; ``make test`` builds the library and a kernel as rtc/_cpu.py does and runs the
C++ test driver (src/test/driver.cpp) through the server's entry points."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest

from pytest_gpuenv.rtc import _cpu, target
from pytest_gpuenv.runtime.cpu import sources

needs_make = pytest.mark.skipif(shutil.which("make") is None or shutil.which("g++") is None,
                                reason="needs make and g++")


def _make(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-C", sources.SRC_DIR, f"PYTHON={sys.executable}", "CXX=g++", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_build_mk_names_every_source_and_header() -> None:
    build = sources.executor_build()
    src = sources.SRC_DIR
    assert sorted(build.sources) == sorted(os.path.basename(p) for p in glob.glob(os.path.join(src, "*.cpp")))
    assert set(build.headers) >= {os.path.basename(p) for p in glob.glob(os.path.join(src, "*.h"))}
    assert all(os.path.isfile(os.path.join(src, name)) for name in build.headers)
    assert "-shared" in build.flags and build.libs


def test_parse_build_mk() -> None:
    text = "# a comment\nA = x y \\\n    z  # trailing\nB = -O2\n\nrule: A\n\tcmd = no\n"
    assert sources.parse_build_mk(text) == {"A": ["x", "y", "z"], "B": ["-O2"]}


def test_the_cache_key_covers_the_generated_layout() -> None:
    names = [name for name, _ in sources.executor_files()]
    assert names[-1] == sources.LAYOUT_HEADER and "build.mk" in names


@needs_make
def test_makefile_kernel_flags_are_rtc_cpus() -> None:
    res = _make("-s", "kernel-flags", timeout=60)
    assert res.returncode == 0, res.stderr
    fast, checked = res.stdout.splitlines()
    gfx1100 = target.resolve("gfx1100", 32, "7.0")
    assert fast.split() == [*_cpu._kernel_flags(gfx1100, False), *_cpu.gcc_flags("g++", False), "-Iinclude"]
    assert checked.split() == [*_cpu._kernel_flags(gfx1100, True), *_cpu.gcc_flags("g++", True), "-Iinclude"]


@needs_make
def test_make_test_runs_the_driver(tmp_path) -> None:
    res = _make("test", f"BUILD={tmp_path / 'build'}")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "driver: OK" in res.stdout
    assert "FAILED" not in res.stdout
    assert not os.path.exists(os.path.join(sources.SRC_DIR, "build"))  # (BUILD kept the source tree clean)
