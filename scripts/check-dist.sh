#!/usr/bin/env bash
# Build the sdist and the wheel and check what a user would install:
#   1. `python -m build` (the wheel is built from the unpacked sdist, so a file missing from the sdist
#      is missing from the wheel too), then `twine check` on both;
#   2. every file of the package in the source tree (the .py modules, py.typed, the HIP headers, the CPU
#      executor's C++ sources) is in the sdist and in the wheel, and the wheel declares the pytest11
#      entry point `gpuenv` and the `gpuenv` console script;
#   3. the wheel installs into a clean venv (no system site-packages), where `gpuenv --version` names the
#      built version and a tiny suite loads the plugin with `-p gpuenv` (plugin autoload off) and finds
#      the package's data files next to the installed modules.
# Usage: scripts/check-dist.sh [--no-isolation] [--no-venv] [OUTDIR]
#   --no-isolation  build with this interpreter's setuptools (offline) instead of a fresh build env
#   --no-venv       skip step 3 (it installs pytest and the other dependencies from the package index)
#   OUTDIR          where the checked sdist and wheel are left (default: dist)
# PYTHON names the interpreter that has `build` and `twine` (the test extra); default: python3.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
build_args=() venv=1 out=dist
for arg in "$@"; do
    case $arg in
        --no-isolation) build_args+=(--no-isolation) ;;
        --no-venv) venv=0 ;;
        -*) echo "check-dist: unknown option $arg" >&2; exit 2 ;;
        *) out=$arg ;;
    esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== build: sdist, then the wheel from it"
"$py" -m build "${build_args[@]}" --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
sdist=$(ls "$work"/dist/*.tar.gz) wheel=$(ls "$work"/dist/*.whl)
"$py" -m twine check --strict "$sdist" "$wheel"

echo "== contents: every package file of the source tree is in both"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files pytest_gpuenv >"$work/files"
else
    find pytest_gpuenv -type f ! -name '*.pyc' ! -path '*/__pycache__/*' >"$work/files"
fi
"$py" - "$sdist" "$wheel" "$work/files" <<'EOF'
import sys, tarfile, zipfile

sdist, wheel, listing = sys.argv[1:]
wanted = sorted(line.strip() for line in open(listing) if line.strip())
with zipfile.ZipFile(wheel) as z:
    in_wheel = set(z.namelist())
    meta = {n.split("/", 1)[1]: z.read(n).decode() for n in in_wheel if n.split("/")[0].endswith(".dist-info")}
with tarfile.open(sdist) as t:
    in_sdist = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
bad = [f"missing from the wheel: {f}" for f in wanted if f not in in_wheel]
bad += [f"missing from the sdist: {f}" for f in wanted + ["README.md", "pyproject.toml"] if f not in in_sdist]
bad += [f"not part of the package: {n}" for n in sorted(in_wheel) if not n.startswith("pytest_gpuenv")]
entry = meta.get("entry_points.txt", "")
for needed in ("[pytest11]\ngpuenv = pytest_gpuenv.plugin", "[console_scripts]\ngpuenv = pytest_gpuenv.cli:_entry"):
    if needed not in entry:
        bad.append(f"entry_points.txt lacks {needed!r}")
for line in bad:
    print("check-dist:", line, file=sys.stderr)
if bad:
    sys.exit(1)
print(f"{len(wanted)} package files in {wheel.rsplit('/', 1)[-1]} and the sdist")
EOF

if [ "$venv" = 1 ]; then
    echo "== install the wheel into a clean venv and load the plugin with -p gpuenv"
    "$py" -m venv "$work/venv"
    "$work/venv/bin/python" -m pip install -q "$wheel"
    version=$("$py" -c 'import sys, zipfile; print(sys.argv[1].rsplit("/", 1)[-1].split("-")[1])' "$wheel")
    test "$("$work/venv/bin/gpuenv" --version)" = "pytest-gpuenv $version"
    mkdir "$work/suite"
    cat >"$work/suite/test_installed.py" <<'EOF'
import os
import sys

import pytest_gpuenv
from pytest_gpuenv.rtc import source
from pytest_gpuenv.runtime import cpu
from pytest_gpuenv.runtime.cpu import sources


def test_loaded_from_the_venv(gpu_env):
    assert pytest_gpuenv.__file__.startswith(sys.prefix), pytest_gpuenv.__file__
    assert gpu_env.backend in ("cpu", "cuda", "rocm")


def test_nvml_binding_installed():
    # a base dependency: without it an NVIDIA GPU's arch and memory are unknown and markers skip
    import pynvml  # noqa: F401


def test_data_files_installed():
    pkg = os.path.dirname(pytest_gpuenv.__file__)
    assert os.path.isfile(os.path.join(pkg, "py.typed"))
    assert os.path.isfile(os.path.join(source.SHIPPED_INCLUDE, "hip", "hip_runtime.h"))
    assert os.path.isfile(os.path.join(source.HIPRTC_INCLUDE, "hip", "hip_runtime.h"))
    build = sources.executor_build()  # build.mk: what the executor is built from
    assert all(os.path.isfile(os.path.join(cpu.SRC_DIR, name)) for name in build.sources + build.headers)
    assert os.path.isfile(os.path.join(cpu.INCLUDE_DIR, "gpuenv_cpu.h"))
EOF
    (cd "$work/suite" && PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "$work/venv/bin/python" -m pytest -p gpuenv \
        -p no:cacheprovider test_installed.py | tee "$work/run.log")
    grep -q "^gpuenv: " "$work/run.log" || { echo "check-dist: no gpuenv header line" >&2; exit 1; }
fi

mkdir -p "$out"
cp "$sdist" "$wheel" "$out"/
echo "check-dist: OK: $(basename "$sdist") $(basename "$wheel") in $out"
