#!/usr/bin/env bash
# Everything that needs the GPU machine, in one call: install, environment report, the GPU suite,
# the examples, the faulting-kernel check and the benchmarks. Prints a summary table last.
#   bash scripts/gpu-check.sh [sections...]   (default: all; sections: info tests examples fault perf bench)
# Logs go to $OUT (default /tmp/gpuenv-check). Run from the repository root on a machine with a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/gpuenv-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=
SECTIONS=${*:-info tests examples fault perf bench}
declare -a SUMMARY=()
t_all=$(date +%s)

run() {  # run NAME TIMEOUT CMD...: run with a time limit, record the outcome
    local name=$1 limit=$2; shift 2
    echo; echo "=== $name  ($(date +%T), limit ${limit}s)"
    local t0=$(date +%s)
    timeout "$limit" "$@"
    local rc=$?
    SUMMARY+=("$(printf '%-34s rc=%-3s %4ss' "$name" "$rc" "$(( $(date +%s) - t0 ))")")
    return 0
}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }

echo "=== install"
$PY -m pip install --no-deps --no-build-isolation -e . >"$OUT/pip.log" 2>&1 || { echo "pip install -e . failed:"; tail -20 "$OUT/pip.log"; }
if ! $PY -c "import importlib.metadata as m, sys; sys.exit(not any(e.name == 'gpuenv' for e in m.entry_points(group='pytest11')))"; then
    echo "entry point not registered; loading the plugin by name"
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTEST_ADDOPTS="-p pytest_gpuenv.plugin ${PYTEST_ADDOPTS:-}"
fi
$PY -c "import pytest_gpuenv, sys; print('pytest_gpuenv from', pytest_gpuenv.__file__); sys.exit(not pytest_gpuenv.__file__.startswith('$PWD/'))" || echo "WARNING: pytest_gpuenv is not imported from this tree"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tail -n +1
$PY -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'devices', torch.cuda.device_count())"

if want info; then
    run "gpuenv info --json" 120 bash -c "$PY -m pytest_gpuenv info --json > $OUT/info.json; \
        $PY -c 'import json; d=json.load(open(\"$OUT/info.json\")); print(json.dumps({k: d[k] for k in (\"backend\",\"kind\",\"devices\",\"cuda\",\"torch\",\"compilers\",\"problems\",\"detect_seconds\")}, indent=1))'"
    run "gpuenv info (CUDA_VISIBLE_DEVICES=0)" 60 env CUDA_VISIBLE_DEVICES=0 $PY -m pytest_gpuenv info
    run "gpuenv doctor" 60 bash -c "$PY -m pytest_gpuenv doctor; echo doctor exit \$?"
fi
if want tests; then
    # the whole suite; GPU tests carry the plugin's markers and run here; xdist spreads workers over the GPUs
    run "pytest tests -n 8 (GPU machine)" 300 $PY -m pytest tests -n 8 -q -rfEs -p no:randomly \
        --ignore=tests/test_perf_gpu.py --gpuenv-json "$OUT/tests.json" -o console_output_style=classic
    # the second pass the plugin recommends for tests that need more GPUs than one worker has
    run "pytest -m requires_devices -n 0" 120 $PY -m pytest tests -m requires_devices -n 0 -q -rfEs -s
    # the NVIDIA/xdist checks again, showing what they saw (UUIDs per worker, perf intervals per GPU)
    run "tests/test_gpu_nvidia.py -s" 180 $PY -m pytest tests/test_gpu_nvidia.py -n 0 -q -rfEs -s
fi
if want examples; then
    run "examples (1 GPU)" 180 env CUDA_VISIBLE_DEVICES=0 $PY -m pytest examples -v -rs --gpuenv-json "$OUT/examples.json"
fi
if want fault; then
    FAULT_DIR=$(mktemp -d); cp -r kernels "$FAULT_DIR/kernels"; printf '[pytest]\n' > "$FAULT_DIR/pytest.ini"
    cat > "$FAULT_DIR/test_fault.py" <<'PYEOF'
import torch

FAULT = 'extern "C" __global__ void fault(float* p, long long offset) { p[offset] = 1.0f; }'

def test_fault(hip_kernel):
    k = hip_kernel(FAULT, "fault")
    x = torch.zeros(4, device="cuda")
    k(1, 1, x, 1 << 40)

def test_after_fault(hip_kernel):
    hip_kernel("vector_add.hip", "vector_add")

def test_torch_after_fault():
    torch.ones(1, device="cuda").sum().item()
PYEOF
    run "faulting kernel (expect 1 failed, later users explained)" 90 bash -c "cd $FAULT_DIR && CUDA_VISIBLE_DEVICES=0 $PY -m pytest -rsfE -q test_fault.py 2>&1 | grep -E 'Error|SKIPPED|FAILED|passed|failed|skipped|poison' | cut -c1-300"
fi
if want perf; then
    run "benchmarks/timer_quality.py" 200 env CUDA_VISIBLE_DEVICES=0 $PY benchmarks/timer_quality.py --out "$OUT"
    run "perf GPU tests" 120 env CUDA_VISIBLE_DEVICES=0 $PY -m pytest tests/test_perf_gpu.py -q -rfEs --gpuenv-json "$OUT/perf.json"
fi
if want bench; then
    run "benchmarks/compile_cache.py" 120 $PY benchmarks/compile_cache.py
    run "benchmarks/overhead.py" 150 $PY benchmarks/overhead.py --rounds 9
fi

echo; echo "=== summary ($(( $(date +%s) - t_all ))s)"
printf '%s\n' "${SUMMARY[@]}"
