#!/usr/bin/env bash
# Everything that needs the GPU machine, in one call: install, environment report, the GPU suite,
# the examples, the faulting-kernel check and the benchmarks. Prints a summary table last.
#   bash scripts/gpu-check.sh [sections...]   (default: all; sections: info tests examples published device_api fault perf bench hosts dist
#   claims default sanitize)
# Logs go to $OUT (default /tmp/gpuenv-check). Run from the repository root on a machine with a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/gpuenv-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=
SECTIONS=${*:-info tests examples published device_api fault perf bench hosts dist claims default sanitize}
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
# wheels carried to a machine without network (cupti-python for the CUPTI timer, pyelftools): .whl/*.whl
if compgen -G ".whl/*.whl" >/dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpuenv-site .whl/*.whl >>"$OUT/pip.log" 2>&1 \
        && export PYTHONPATH="/tmp/gpuenv-site${PYTHONPATH:+:$PYTHONPATH}"
fi
$PY -c "from pytest_gpuenv.perf._cupti import load_cupti; m, why = load_cupti(); print('CUPTI timer:', 'available' if m else why)"
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
    # the whole suite (slow end-to-end tests included: -m); GPU tests carry the plugin's markers and run here;
    # xdist spreads workers over the GPUs
    run "pytest tests -n 8 (GPU machine)" 300 $PY -m pytest tests -n 8 -q -rfEs -p no:randomly -m "slow or not slow" \
        --ignore=tests/perf/test_perf_gpu.py --ignore=tests/plugin/test_gpu_sanitize.py --gpuenv-json "$OUT/tests.json" -o console_output_style=classic
    # the second pass the plugin recommends for tests that need more GPUs than one worker has
    run "pytest -m requires_devices -n 0" 120 $PY -m pytest tests -m requires_devices -n 0 -q -rfEs -s
    # the NVIDIA/xdist checks again, showing what they saw (UUIDs per worker, perf intervals per GPU)
    run "tests/plugin/test_gpu_nvidia.py -s" 180 $PY -m pytest tests/plugin/test_gpu_nvidia.py -n 0 -q -rfEs -s
    # the capability table against torch's device properties, and gpu_assert_close's profiles on the GPU
    run "tests/plugin/test_gpu_capabilities.py + tolerance" 120 $PY -m pytest tests/plugin/test_gpu_capabilities.py \
        tests/plugin/test_gpu_tolerance.py tests/plugin/test_gpu_leak_check.py -n 0 -q -rfEs -s
    # @gpu_dtypes, gpu_expected and quarantine conditions against the GPU's own arch and versions
    run "dtypes, expected values, quarantine" 180 $PY -m pytest tests/plugin/test_gpu_dtypes.py \
        tests/plugin/test_expected.py tests/plugin/test_quarantine.py -n 0 -q -rfEs -v
    # name expressions, modules and globals, by-value vectors/structs launched with NVRTC and nvcc
    run "tests/kernels/test_gpu_names.py" 300 $PY -m pytest tests/kernels/test_gpu_names.py -n 0 -q -rfEs
    # a kernel file with host headers (NVRTC cannot take them: nvcc builds it), get_global by a typedef
    run "front door on the GPU" 240 $PY -m pytest tests/kernels/test_rtc_fixture_front_door.py -k on_the_gpu \
        -m "slow or not slow" -n 0 -q -rfEs
fi
if want examples; then
    run "examples (1 GPU)" 180 env CUDA_VISIBLE_DEVICES=0 $PY -m pytest examples -v -rs --gpuenv-json "$OUT/examples.json"
fi
if want device_api; then
    # ROCm's device API, one kernel per family, on the GPU against the CPU executor (tests/kernels/test_gpu_device_api.py)
    run "device API: GPU vs CPU executor" 300 env CUDA_VISIBLE_DEVICES=0 $PY -m pytest tests/kernels/test_gpu_device_api.py \
        -n 0 -q -rfEs -s
fi
if want published; then
    # the published kernels of tests/data/published (HIP) and tests/data/cuda_samples (CUDA, built as CUDA
    # on NVIDIA) on the GPU against the CPU executor, one line per kernel
    run "published kernels: GPU vs CPU executor" 600 env CUDA_VISIBLE_DEVICES=0 $PY scripts/published_check.py
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
    # CUPTI timer (default where cupti-python is installed) beside the event timer and do_bench, against
    # torch.profiler and ncu, and the 1.10x gate
    run "benchmarks/timer_quality.py" 300 env CUDA_VISIBLE_DEVICES=0 $PY benchmarks/timer_quality.py --out "$OUT"
    # where one CUPTI estimate's wall time goes at 4,096 elements: steps, host per call, device per sample
    run "benchmarks/estimate_costs.py" 120 env CUDA_VISIBLE_DEVICES=0 $PY benchmarks/estimate_costs.py
    run "perf GPU tests (+ --gpuenv-perf-plot)" 150 env CUDA_VISIBLE_DEVICES=0 $PY -m pytest tests/perf/test_perf_gpu.py \
        tests/perf/test_perf_cupti.py -q -rfEs --gpuenv-json "$OUT/perf.json" --gpuenv-perf-plot "$OUT/perf.png"
    run "perf GPU tests again, gpuenv perf compare" 150 bash -c "CUDA_VISIBLE_DEVICES=0 $PY -m pytest \
        tests/perf/test_perf_gpu.py tests/perf/test_perf_cupti.py -q -p no:cacheprovider --gpuenv-json $OUT/perf2.json >/dev/null 2>&1; \
        $PY -m pytest_gpuenv perf compare $OUT/perf.json $OUT/perf2.json --fail-on-regression 10%; echo compare exit \$?"
fi
if want bench; then
    # valgrind carried to a machine without it: .whl/valgrind/{valgrind,valgrind.bin,callgrind_annotate,lib/}
    if [ -d .whl/valgrind ] && ! command -v valgrind >/dev/null; then
        export VALGRIND_LIB="$PWD/.whl/valgrind/lib" PATH="$PWD/.whl/valgrind:$PATH"
    fi
    run "benchmarks/compile_cache.py" 120 $PY benchmarks/compile_cache.py
    # instructions under callgrind (needs valgrind); detection there includes NVML (goal <= 50 ms)
    # (50- and 1300-test suites, three sides, run side by side on half the cores)
    run "benchmarks/overhead.py" 900 $PY benchmarks/overhead.py --jobs $(( $(nproc) > 3 ? $(nproc) / 2 : 1 ))
    run "benchmarks/leak_check.py" 60 $PY benchmarks/leak_check.py
fi
NGPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if want hosts && [ "$NGPUS" -lt 2 ]; then
    echo; echo "=== hosts: needs 2 GPUs (the CUDA_VISIBLE_DEVICES=1 group is the second host); this machine has $NGPUS: not run"
    SUMMARY+=("$(printf '%-34s %s' "hosts" "not run: needs 2 GPUs, found $NGPUS")")
elif want hosts; then
    # several "hosts" in one xdist run: plain popen workers take the controller's assignment,
    # the CUDA_VISIBLE_DEVICES=1 group is another host (other masks): it detects and assigns on its own
    HOSTS_DIR=$(mktemp -d); mkdir -p "$HOSTS_DIR/rec"; printf '[pytest]\n' > "$HOSTS_DIR/pytest.ini"
    cat > "$HOSTS_DIR/test_hosts_gpu.py" <<'PYEOF'
import json, os, pathlib
import pytest
from pytest_gpuenv import requires_cuda, requires_rocm

@requires_cuda
@pytest.mark.parametrize("i", range(8))
def test_cuda(i, torch_device, request):
    import torch
    from pytest_gpuenv.session.state import get_session
    x = torch.ones(1 << 20, device=torch_device)
    assert x.sum().item() == 1 << 20
    rec = {"worker": os.environ["PYTEST_XDIST_WORKER"], "host": get_session(request.config).host,
           "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "count": torch.cuda.device_count(),
           "uuid": str(torch.cuda.get_device_properties(torch_device).uuid)}
    pathlib.Path("rec", f"{rec['worker']}-{i}.json").write_text(json.dumps(rec))

@requires_rocm
def test_rocm():
    pass
PYEOF
    run "hosts: --tx 2*popen --tx 2*popen//env:CUDA_VISIBLE_DEVICES=1" 180 bash -c "cd $HOSTS_DIR && $PY -m pytest -p xdist \
        --dist each --tx '2*popen' --tx '2*popen//env:CUDA_VISIBLE_DEVICES=1' -rs -q test_hosts_gpu.py \
        --gpuenv-json hosts.json > run.log 2>&1; cat run.log | cut -c1-250; $PY - <<'CHECK'
import collections, glob, json, re
recs = collections.defaultdict(list)
for f in glob.glob('rec/*.json'):
    r = json.load(open(f)); recs[r['worker']].append(r)
seen = {w: {(r['cvd'], r['uuid'], r['count'], r['host']) for r in rs} for w, rs in sorted(recs.items())}
for w, s in seen.items():
    print(w, len(recs[w]), 'tests:', s)
assert sorted(seen) == ['gw0', 'gw1', 'gw2', 'gw3'], 'every worker ran the CUDA tests (--dist each)'
one = {w: next(iter(s)) for w, s in seen.items() if len(s) == 1}
assert len(one) == 4, 'each worker stays on one GPU'
assert (one['gw0'][0], one['gw1'][0]) == ('0', '1') and one['gw0'][1] != one['gw1'][1], 'plain popen: distinct GPUs 0, 1'
assert one['gw2'][0] == one['gw3'][0] == '1', 'the masked host hands out its only GPU (physical 1)'
assert one['gw2'][1] == one['gw3'][1] == one['gw1'][1], 'physical GPU 1 by UUID'
assert all(v[2] == 1 for v in one.values()), 'each worker sees one device'
assert one['gw2'][3] == one['gw3'][3] != one['gw0'][3], 'the masked group is its own host'
log = open('run.log').read()
assert 'gpuenv: hosts' in log and 'CUDA_VISIBLE_DEVICES=1)' in log, 'the summary lists both hosts'
assert re.search(r'requires ROCm: found CUDA .*\[on host .*CUDA_VISIBLE_DEVICES=1\)\]', log), 'skips name the host'
skips = json.load(open('hosts.json'))['skips']
assert len(skips) == 4 and len({s['host'] for s in skips}) == 2, skips
print('hosts check OK')
CHECK"
fi

if want dist; then
    # --dist gpu over two unlike hosts: a controller without GPU (an empty root: --gpuenv-backend=cpu on the
    # command line would reach every worker, and in the controller's environment it would hide the GPUs from
    # the popen workers it starts), one popen gateway group on this machine's real GPU(s) (root /) and one on
    # an AMD machine tree (4x MI300X, files only). CUDA tests run on the real GPU only, ROCm tests (no kernel
    # launch) on the tree's workers only, and a test no host can run is skipped once, naming both hosts
    DIST_DIR=$(mktemp -d); mkdir -p "$DIST_DIR/rec" "$DIST_DIR/no-gpu"; printf '[pytest]\n' > "$DIST_DIR/pytest.ini"
    PYTHONPATH="$PWD/tests${PYTHONPATH:+:$PYTHONPATH}" $PY -c "import pathlib; from _machines import amd_machine; amd_machine(pathlib.Path('$DIST_DIR/amd-tree'), 4)"
    cat > "$DIST_DIR/test_dist_gpu.py" <<'PYEOF'
import json, os, pathlib
import pytest
from pytest_gpuenv import requires_cuda, requires_devices, requires_rocm

def _rec(request, **extra):
    from pytest_gpuenv.session.state import get_session
    rec = {"worker": os.environ["PYTEST_XDIST_WORKER"], "host": get_session(request.config).host, **extra}
    pathlib.Path("rec", request.node.name + ".json").write_text(json.dumps(rec))

@requires_cuda
@pytest.mark.parametrize("i", range(6))
def test_cuda(i, request, gpu_device):
    import torch
    x = torch.ones(1 << 20, device="cuda")
    assert x.sum().item() == 1 << 20
    _rec(request, vendor=gpu_device.vendor, name=torch.cuda.get_device_name(0))

@requires_rocm
@pytest.mark.parametrize("i", range(6))
def test_rocm(i, request, gpu_device):
    assert gpu_device.arch == "gfx942"
    _rec(request, vendor=gpu_device.vendor)

@requires_devices(64)
def test_sixty_four_gpus():
    pass

@pytest.mark.parametrize("i", range(4))
def test_cpu(i, request):
    _rec(request)
PYEOF
    run "dist: --dist gpu, real GPU + AMD tree, no-GPU controller" 240 bash -c "cd $DIST_DIR && GPUENV_ROOT=$DIST_DIR/no-gpu \
        $PY -m pytest -p xdist --dist gpu --tx '2*popen//env:GPUENV_ROOT=/' \
        --tx '2*popen//env:GPUENV_ROOT=$DIST_DIR/amd-tree' -rs -q test_dist_gpu.py \
        --gpuenv-json dist.json > run.log 2>&1; cat run.log | cut -c1-250; $PY - <<'CHECK'
import glob, json
recs = {f.split('/')[-1][:-5]: json.load(open(f)) for f in glob.glob('rec/*.json')}
cuda = {k: r for k, r in recs.items() if k.startswith('test_cuda')}
rocm = {k: r for k, r in recs.items() if k.startswith('test_rocm')}
print('ran:', {k: (r['worker'], r['host']) for k, r in sorted(recs.items())})
assert len(cuda) == 6 and all(r['vendor'] == 'nvidia' and '/amd-tree)' not in r['host'] for r in cuda.values()), cuda
assert len(rocm) == 6 and all(r['vendor'] == 'amd' and '/amd-tree)' in r['host'] for r in rocm.values()), rocm
assert len(recs) == 16, sorted(recs)
log = open('run.log').read()
assert '16 passed, 1 skipped' in log, 'every test ran where it could; one skipped once'
assert 'requires_devices(64): ' in log and '/amd-tree)' in log.split('requires_devices(64): ')[1], 'the skip names both hosts'
hosts = json.load(open('dist.json'))['hosts']
assert len(hosts) == 2 and sum(h['tests']['passed'] for h in hosts) == 16, hosts
print('dist check OK')
CHECK"
fi

if want claims; then
    # --dist gpu by memory claims on GPU 0: tests that allocate what they claim (sized from the GPU's memory),
    # -n 1 against -n 8 --dist gpu against -n 8 --dist load (which runs out of memory), NVML sampling used
    # memory beside each run; an exclusive test and one that uses more than it claims (about 3 minutes)
    run "claims: -n 8 --dist gpu vs -n 1 vs --dist load" 480 $PY scripts/claims_check.py --workers 8
fi
if want default; then
    # NVIDIA facts on a default install: with the NVML binding (a base dependency) and with it hidden (the runtime
    # probe fills the arch and memory), gpuenv knows the GPU's arch and memory and the markers that need them run
    NO_NVML=$(mktemp -d); printf 'raise ImportError("hidden by gpu-check.sh: a default install without nvidia-ml-py")\n' > "$NO_NVML/pynvml.py"
    DEF_DIR=$(mktemp -d); printf '[pytest]\n' > "$DEF_DIR/pytest.ini"
    cat > "$DEF_DIR/test_facts.py" <<'PYEOF'
from pytest_gpuenv import requires_arch, requires_capability, requires_memory

@requires_arch("sm_70+")
def test_arch(): pass

@requires_memory("4GiB")
def test_memory(): pass

@requires_capability("fp16")
def test_capability(): pass
PYEOF
    for how in "with NVML" "NVML hidden"; do
        extra=$([ "$how" = "NVML hidden" ] && echo "$NO_NVML" || echo "")
        run "default install, $how: info, doctor, markers" 120 bash -c "cd $DEF_DIR && \
            PYTHONPATH=$extra\${PYTHONPATH:+:\$PYTHONPATH} $PY -c 'import json, subprocess, sys; \
d = json.loads(subprocess.run([sys.executable, \"-m\", \"pytest_gpuenv\", \"info\", \"--json\"], capture_output=True, text=True).stdout); \
print({k: [(x[\"name\"], x[\"arch\"], x[\"memory_bytes\"]) for x in d[\"devices\"]] for k in [\"devices\"]}, d.get(\"probe\")); \
assert d[\"devices\"] and all(x[\"arch\"] and x[\"memory_bytes\"] for x in d[\"devices\"]), \"arch or memory unknown\"; print(\"facts OK\")' && \
            PYTHONPATH=$extra\${PYTHONPATH:+:\$PYTHONPATH} $PY -m pytest_gpuenv doctor; echo doctor exit \$?; \
            PYTHONPATH=$extra\${PYTHONPATH:+:\$PYTHONPATH} $PY -m pytest -p gpuenv -q -rs -p no:cacheprovider test_facts.py"
    done
fi

if want sanitize; then
    # --gpuenv-sanitize under the real compute-sanitizer (tests/plugin/test_gpu_sanitize.py): a planted bug per
    # tool fails its test with that tool and line; the fixed kernels and a torch test pass under each tool; -n 4.
    # "figures:" lines: the time under each tool against plain, for the same five tests (their own durations)
    CS=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" 2>/dev/null)
    echo "compute-sanitizer: ${CS:-not found} $([ -n "$CS" ] && "$CS" --version | tail -1)"
    run "sanitize: planted bugs, clean kernels, -n 4" 480 bash -c "CUDA_VISIBLE_DEVICES=0 $PY -m pytest \
        tests/plugin/test_gpu_sanitize.py -n 0 -s -q -rfEs -p no:randomly -p no:cacheprovider > $OUT/sanitize.log 2>&1; \
        rc=\$?; grep -oE 'figures: .*|[0-9]+ (passed|failed).*|^(FAILED|ERROR|SKIPPED) .*' $OUT/sanitize.log; \
        [ \$rc = 0 ] || tail -80 $OUT/sanitize.log; exit \$rc"
fi

echo; echo "=== summary ($(( $(date +%s) - t_all ))s)"
printf '%s\n' "${SUMMARY[@]}"
