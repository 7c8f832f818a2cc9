#!/usr/bin/env bash
# On a GPU machine: the timer-quality figures (benchmarks/timer_quality.py), then the GPU perf tests
# (tests/test_perf*.py and examples/test_perf_example.py). Each part has a time limit, so the whole
# stays under about 4 minutes. Logs and JSON go to $OUT (default /tmp/gpu-perf).
#   scripts/gpu-perf.sh [extra timer_quality.py arguments, e.g. --explore]
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/gpu-perf}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
$PY -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/pip.log" 2>&1 || echo "pip install -e . failed: see $OUT/pip.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1 | tee "$OUT/nvidia-smi.log"
timeout "${BENCH_TIMEOUT:-170}" $PY benchmarks/timer_quality.py --out "$OUT" "$@" 2>&1 | tee "$OUT/timer_quality.log"
echo "timer_quality exit: ${PIPESTATUS[0]}"
PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 timeout "${TEST_TIMEOUT:-60}" $PY -m pytest -p gpuenv -p pytester -q -rfEsw \
    tests/test_perf*.py examples/test_perf_example.py --gpuenv-json "$OUT/perf.json" 2>&1 | tee "$OUT/pytest.log"
echo "pytest exit: ${PIPESTATUS[0]}"
