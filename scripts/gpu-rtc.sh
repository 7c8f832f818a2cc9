#!/usr/bin/env bash
# GPU-machine part of issue 3 (compiled HIP kernels): run from the repository root, after
#   pip install --no-deps --no-build-isolation -e .
# Compiles the kernels/ library through NVRTC for the GPU's arch, runs the rtc tests (their GPU suites
# run in subprocesses), the kernels example against torch, a deliberately faulting kernel, and the
# compile-cache benchmark. Prints everything; exits non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
status=0
step() { echo; echo "== $*"; }

step "environment"
# the plugin loads through its pytest11 entry point once `pip install -e .` worked; else load it by name
if $PY -c "import importlib.metadata as m, sys; sys.exit(not any(e.name == 'gpuenv' for e in m.entry_points(group='pytest11')))" 2>/dev/null; then
    PLUGIN=()
    echo "pytest-gpuenv installed: $($PY -c 'import pytest_gpuenv, os; print(os.path.dirname(pytest_gpuenv.__file__))')"
else
    PLUGIN=(-p pytest_gpuenv.plugin)
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    echo "pytest-gpuenv entry point not installed: loading it with -p pytest_gpuenv.plugin from $PWD"
fi
$PY - <<'PYEOF'
import sys
print("python", sys.version.split()[0])
try:
    import torch
    print("torch", torch.__version__, "cuda available:", torch.cuda.is_available(),
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except Exception as exc:
    print("torch: not importable:", exc)
from pytest_gpuenv.rtc import _compilers
for name in ("hiprtc", "hipcc", "nvrtc", "nvcc"):
    c = _compilers.get(name)
    if not c.available():
        print(f"{name:7} missing")
        continue
    arch = "gfx90a" if c.vendor == "amd" else "sm_90"
    print(f"{name:7} {c.identity()}; builds {arch}: {c.supports(arch)}")
PYEOF

ARCH=$($PY -c "import torch; m, n = torch.cuda.get_device_capability(0); print(f'sm_{m}{n}')" 2>/dev/null || echo sm_90)
step "gpuenv compile kernels/*.hip --arch $ARCH"
for f in kernels/vector_add.hip kernels/matmul_tiled.hip kernels/reduce_sum.hip; do
    $PY -m pytest_gpuenv compile "$f" --arch "$ARCH" --no-cache || status=1
done

step "rtc tests (GPU suites run in pytester subprocesses)"
$PY -m pytest "${PLUGIN[@]}" -p no:cacheprovider -rsf -q tests/test_rtc_source.py tests/test_rtc_args.py tests/test_rtc_cache.py \
    tests/test_rtc_compile.py tests/test_rtc_fixture.py || status=1

step "examples/test_kernels_example.py on the GPU (vs torch)"
$PY -m pytest "${PLUGIN[@]}" -p no:cacheprovider -rsf -v examples/test_kernels_example.py || status=1

step "a kernel that writes out of bounds, then a test after it (expect: 1 failed, 1 skipped naming the culprit)"
FAULT_DIR=$(mktemp -d)
cp -r kernels "$FAULT_DIR/kernels"
printf '[pytest]\n' > "$FAULT_DIR/pytest.ini"
cat > "$FAULT_DIR/test_fault.py" <<'PYEOF'
import torch

FAULT = 'extern "C" __global__ void fault(float* p, long long offset) { p[offset] = 1.0f; }'


def test_fault(hip_kernel):
    k = hip_kernel(FAULT, "fault")
    x = torch.zeros(4, device="cuda")
    k(1, 1, x, 1 << 40)


def test_after_fault(hip_kernel):
    hip_kernel("vector_add.hip", "vector_add")
PYEOF
(cd "$FAULT_DIR" && $PY -m pytest "${PLUGIN[@]}" -p no:cacheprovider -rsf -q test_fault.py 2>&1 \
    | grep -E "Error|ERROR|SKIPPED|FAILED|passed|failed|skipped|error" | cut -c1-400)
rm -rf "$FAULT_DIR"

step "benchmarks/compile_cache.py"
$PY benchmarks/compile_cache.py || status=1

echo
echo "gpu-rtc.sh: $([ $status = 0 ] && echo OK || echo FAILED)"
exit $status
