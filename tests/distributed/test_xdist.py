"""pytest-xdist: one GPU per worker, detection shared, results gathered (file trees of 4/8-GPU machines)."""

import json
import pathlib

import pytest
from _machines import amd_machine, nvidia_machine

pytest.importorskip("xdist")


pytestmark = pytest.mark.usefixtures("no_outer_masks")

RECORDER = """
import json, os, pathlib

def pytest_configure(config):
    wi = getattr(config, "workerinput", None)
    if wi is None:
        return
    from pytest_gpuenv.session.state import get_env
    from pytest_gpuenv.dist.xdist import WORKERINPUT_KEY
    env = get_env(config)
    rec = {
        "worker": wi["workerid"],
        "vars": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")},
        "uuids": [d.uuid for d in env.devices],
        "indices": [d.index for d in env.devices],
        "gpuenv_env_in_workerinput": "env" in wi.get(WORKERINPUT_KEY, {}),
    }
    out = pathlib.Path(os.environ["RECORD_DIR"])
    out.mkdir(exist_ok=True)
    (out / (wi["workerid"] + ".json")).write_text(json.dumps(rec))
"""


def _records(path: pathlib.Path) -> dict:
    return {p.stem: json.loads(p.read_text()) for p in sorted(path.glob("gw*.json"))}


def _runtime_view(uuids_all, var_value):
    """What the CUDA/HIP runtime would see for a worker's variable: the plugin's own parser, as torch's."""
    from pytest_gpuenv.detect.visible import parse_visible

    pos = parse_visible(var_value, uuids_all)
    return [uuids_all[p] for p in pos]


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("RECORD_DIR", str(pytester.path / "rec"))
    pytester.makeconftest(RECORDER)
    pytester.makepyfile("\n".join(f"def test_{i}(): pass" for i in range(16)))
    return pytester


@pytest.mark.parametrize("n_gpus,n_workers,user_mask,expect",
                         [(8, 8, None, [[f"{i}"] for i in range(8)]),
                          (4, 2, None, [["0", "1"], ["2", "3"]]),
                          (4, 4, "2,3", [["2"], ["3"], ["2"], ["3"]]),
                          (8, 4, "7,5,3", [["7"], ["5"], ["3"], ["7"]])])
@pytest.mark.slow
def test_nvidia_assignment_indexes_into_the_users_list(suite, tmp_path, monkeypatch, n_gpus, n_workers, user_mask,
                                                       expect):
    root = tmp_path / "machine"
    uuids = nvidia_machine(root, n_gpus)
    if user_mask is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", user_mask)
    result = suite.runpytest_subprocess("-n", str(n_workers), f"--gpuenv-root={root}", "-p", "xdist")
    result.assert_outcomes(passed=16)
    recs = _records(suite.path / "rec")
    assert len(recs) == n_workers
    for w in range(n_workers):
        rec = recs[f"gw{w}"]
        assert rec["gpuenv_env_in_workerinput"]
        assert rec["vars"]["CUDA_VISIBLE_DEVICES"].split(",") == expect[w]
        # the worker's model lists exactly what the runtime will see with that variable, numbered from 0
        assert rec["uuids"] == _runtime_view(uuids, rec["vars"]["CUDA_VISIBLE_DEVICES"])
        assert rec["indices"] == list(range(len(expect[w])))
        if user_mask:
            allowed = {uuids[int(t)] for t in user_mask.split(",")}
            assert set(rec["uuids"]) <= allowed


@pytest.mark.slow
def test_two_gpus_eight_workers_share_four_each(suite, tmp_path, monkeypatch):
    root = tmp_path / "machine"
    nvidia_machine(root, 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    result = suite.runpytest_subprocess("-n", "8", f"--gpuenv-root={root}", "-p", "xdist")
    result.assert_outcomes(passed=16)
    values = [r["vars"]["CUDA_VISIBLE_DEVICES"] for r in _records(suite.path / "rec").values()]
    assert sorted(values) == ["0"] * 4 + ["1"] * 4


@pytest.mark.parametrize("rocr,hip,expect_hip",
                         [(None, None, ["0,1", "2,3", "4,5", "6,7"]),
                          ("4,5,6,7", None, ["0", "1", "2", "3"]),
                          ("GPU-3cbe002bd3b6313f,GPU-3cbe002bd3b63140", "1,0", ["1", "0", "1", "0"])])
@pytest.mark.slow
def test_amd_hip_indexes_into_what_rocr_left(suite, tmp_path, monkeypatch, rocr, hip, expect_hip):
    root = tmp_path / "machine"
    uuids = amd_machine(root, 8)
    for var, val in (("ROCR_VISIBLE_DEVICES", rocr), ("HIP_VISIBLE_DEVICES", hip)):
        if val is None:
            monkeypatch.delenv(var, raising=False)
        else:
            monkeypatch.setenv(var, val)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    result = suite.runpytest_subprocess("-n", "4", f"--gpuenv-root={root}", "-p", "xdist")
    result.assert_outcomes(passed=16)
    recs = _records(suite.path / "rec")
    rocr_set = _runtime_view(uuids, rocr) if rocr else list(uuids)
    for w in range(4):
        rec = recs[f"gw{w}"]
        assert rec["vars"]["HIP_VISIBLE_DEVICES"] == expect_hip[w]
        assert rec["vars"]["ROCR_VISIBLE_DEVICES"] == rocr  # left as the user set it
        # HIP applies its mask to what ROCr left
        assert rec["uuids"] == _runtime_view(rocr_set, rec["vars"]["HIP_VISIBLE_DEVICES"])


@pytest.mark.parametrize("var", ["HIP_VISIBLE_DEVICES", pytest.param("CUDA_VISIBLE_DEVICES", marks=pytest.mark.slow)])
def test_amd_empty_mask_gives_workers_no_gpu(suite, tmp_path, monkeypatch, var):
    # clr rocclr/utils/flags.cpp Flag::init (ROCm/clr f9f995c lines 114, 136) stores an empty value as " ", which
    # rocdevice.cpp Device::init (lines 496-547) takes as its list and finds no index in: HIP sees no GPU. The run
    # goes on (an empty value hides the GPUs on purpose); no worker is pinned, each keeps the user's empty value
    root = tmp_path / "machine"
    amd_machine(root, 4)
    monkeypatch.setenv(var, "")
    result = suite.runpytest_subprocess("-n", "2", f"--gpuenv-root={root}", "-p", "xdist")
    result.assert_outcomes(passed=16)
    recs = _records(suite.path / "rec")
    for w in ("gw0", "gw1"):
        assert recs[w]["uuids"] == [] and recs[w]["vars"][var] == ""
        other = "CUDA_VISIBLE_DEVICES" if var == "HIP_VISIBLE_DEVICES" else "HIP_VISIBLE_DEVICES"
        assert recs[w]["vars"][other] is None


def test_amd_mask_that_hides_all_by_mistake_still_stops_the_run(suite, tmp_path, monkeypatch):
    root = tmp_path / "machine"
    amd_machine(root, 4)
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "7")
    result = suite.runpytest_subprocess("-n", "2", f"--gpuenv-root={root}", "-p", "xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*cannot assign GPUs to 2 xdist workers: 0 GPUs visible: HIP_VISIBLE_DEVICES='7'*"])


def test_amd_quoted_mask_pins_the_quoted_gpus(suite, tmp_path, monkeypatch):
    # clr removeQuotes (flags.cpp lines 39-76) strips the quotes of a .env file's HIP_VISIBLE_DEVICES="1,3"
    root = tmp_path / "machine"
    uuids = amd_machine(root, 4)
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", '"1,3"')
    result = suite.runpytest_subprocess("-n", "2", f"--gpuenv-root={root}", "-p", "xdist")
    result.assert_outcomes(passed=16)
    recs = _records(suite.path / "rec")
    assert [recs[w]["vars"]["HIP_VISIBLE_DEVICES"] for w in ("gw0", "gw1")] == ["1", "3"]
    assert [recs[w]["uuids"] for w in ("gw0", "gw1")] == [[uuids[1]], [uuids[3]]]


@pytest.mark.parametrize("rocr, expect_hip, expect_phys", [(None, ["0", "1", "2"], [0, 2, 3]),
                                                        ("3,1,2", ["0", "1"], [3, 2])])
def test_amd_workers_follow_hips_ordinals_past_a_gpu_rocr_drops(suite, tmp_path, monkeypatch, rocr, expect_hip,
                                                                expect_phys):
    # ROCr drops a GPU whose ISA its registry lacks after the ROCR_VISIBLE_DEVICES ranks are taken
    # (rocm-systems release/rocm-rel-7.0 amd_topology.cpp BuildTopology lines 320-376, DiscoverGpu lines 119-173;
    # isa.cpp lines 338-441 have no gfx941): HIP numbers what is left, and so must the workers' masks
    root = tmp_path / "machine"
    uuids = amd_machine(root, 4, rocm="7.0.2")
    props = root / "sys/devices/virtual/kfd/kfd/topology/nodes/2/properties"
    props.chmod(0o644)
    props.write_text(props.read_text().replace("gfx_target_version 90402", "gfx_target_version 90401"))
    if rocr:
        monkeypatch.setenv("ROCR_VISIBLE_DEVICES", rocr)
    n = len(expect_hip)
    result = suite.runpytest_subprocess("-n", str(n), f"--gpuenv-root={root}", "-p", "xdist")
    result.assert_outcomes(passed=16)
    recs = _records(suite.path / "rec")
    assert [recs[f"gw{w}"]["vars"]["HIP_VISIBLE_DEVICES"] for w in range(n)] == expect_hip
    assert [recs[f"gw{w}"]["uuids"] for w in range(n)] == [[uuids[p]] for p in expect_phys]


SUMMARY_SUITE = """
import pytest
from pytest_gpuenv import requires_arch, requires_cuda, requires_memory, requires_rocm

@requires_rocm
@pytest.mark.parametrize("i", range(6))
def test_rocm(i, gpu_device):
    assert gpu_device.arch == "gfx942" and gpu_device.index == 0

@requires_cuda
@pytest.mark.parametrize("i", range(3))
def test_cuda(i): pass

@requires_arch("gfx90a")
def test_mi200(): pass

@requires_memory("1TiB")
def test_huge(): pass

def test_cpu(): pass
"""


def _skip_summary(result):
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "gpuenv: hardware skips" in line)
    return [line for line in lines[start + 1:start + 8] if line.startswith(" ") or "skipped for hardware" in line]


@pytest.mark.slow
def test_summary_under_xdist_equals_summary_without(pytester, tmp_path):
    root = tmp_path / "machine"
    amd_machine(root, 4)
    pytester.makepyfile(SUMMARY_SUITE)
    plain = pytester.runpytest_subprocess(f"--gpuenv-root={root}", "-p", "no:xdist")
    dist = pytester.runpytest_subprocess(f"--gpuenv-root={root}", "-n", "4")
    plain.assert_outcomes(passed=7, skipped=5)
    dist.assert_outcomes(passed=7, skipped=5)
    assert _skip_summary(plain) == _skip_summary(dist)
    assert "5 test(s) skipped for hardware reasons:" in _skip_summary(dist)


@pytest.mark.slow
def test_multi_gpu_tests_on_one_gpu_workers_skip_with_how_to_run_them(pytester, tmp_path):
    root = tmp_path / "machine"
    amd_machine(root, 2)
    pytester.makepyfile(
        """
        from pytest_gpuenv import requires_devices
        @requires_devices(2)
        def test_pair(): pass
        def test_one(): pass
        """
    )
    dist = pytester.runpytest_subprocess(f"--gpuenv-root={root}", "-n", "2", "-rs")
    dist.assert_outcomes(passed=1, skipped=1)
    dist.stdout.fnmatch_lines([
        "*1  devices*requires 2 GPUs; xdist worker has 1",
        "*requires_devices(2): this xdist worker was given 1 of the 2 visible GPUs; run with --dist gpu (every worker "
        "sees every GPU; tests share them by memory claims), or run multi-GPU tests in a second pass: pytest -p gpuenv "
        "-n 0 -m requires_devices*",
    ])
    # --dist gpu runs it in the same run
    same = pytester.runpytest_subprocess(f"--gpuenv-root={root}", "-n", "2", "--dist", "gpu")
    same.assert_outcomes(passed=2)
    second = pytester.runpytest_subprocess(f"--gpuenv-root={root}", "-n", "0", "-m", "requires_devices")
    second.assert_outcomes(passed=1, deselected=1)
    # --gpuenv-worker-gpus=2 gives each worker both GPUs
    both = pytester.runpytest_subprocess(f"--gpuenv-root={root}", "-n", "2", "--gpuenv-worker-gpus=2")
    both.assert_outcomes(passed=2)


@pytest.mark.slow
def test_worker_header_says_which_gpu(pytester, tmp_path):
    root = tmp_path / "machine"
    nvidia_machine(root, 2)
    pytester.makeconftest(
        """
        def pytest_configure(config):
            if hasattr(config, "workerinput"):
                from pytest_gpuenv.session import report
                from pytest_gpuenv.session.state import get_session
                import pathlib
                session = get_session(config)
                lines = report.header_lines(session.env, worker=session.worker_gpu)
                pathlib.Path(config.workerinput["workerid"] + ".txt").write_text("\\n".join(lines))
        """
    )
    pytester.makepyfile("def test_a(): pass\ndef test_b(): pass")
    result = pytester.runpytest_subprocess(f"--gpuenv-root={root}", "-n", "2", "-p", "xdist")
    result.assert_outcomes(passed=2)
    text = (pytester.path / "gw1.txt").read_text()
    assert "gpuenv: worker gw1 uses GPU(s) 1x NVIDIA H100 80GB HBM3 via CUDA_VISIBLE_DEVICES=1" in text
    # and the controller's output names each worker's GPU
    result.stdout.fnmatch_lines(["gpuenv: [[]gw*[]] 1x NVIDIA H100 80GB HBM3 via CUDA_VISIBLE_DEVICES=*"])


@pytest.mark.parametrize("args,env,message", [
    (["-n", "2", "--gpuenv-worker-gpus=3"], {}, "--gpuenv-worker-gpus=3 cannot be satisfied: only 2 GPU(s) visible"),
    (["-n", "2"], {"CUDA_VISIBLE_DEVICES": "5"}, "cannot assign GPUs to 2 xdist workers: 0 GPUs visible"),
    (["--collect-only", "--gpuenv-plan", "--gpuenv-plan-profile=rocm:gfx942:0x"], {}, "malformed --gpuenv-plan-profile"),
])
def test_bad_input_errors_before_any_test(pytester, tmp_path, monkeypatch, args, env, message):
    root = tmp_path / "machine"
    nvidia_machine(root, 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest_subprocess(f"--gpuenv-root={root}", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])
    assert "passed" not in result.stdout.str()


@pytest.mark.parametrize("var, value", [("GPUENV_BACKEND", "vulkan"),  # the other two: the same path, slow
                                        pytest.param("GPUENV_PROBE_TIMEOUT", "nan", marks=pytest.mark.slow),
                                        pytest.param("GPUENV_WORKER_GPUS", "0", marks=pytest.mark.slow)])
def test_a_bad_value_in_one_gateways_environment_ends_the_run_with_one_error(pytester, var, value):
    """The worker cannot start with it, and would not on any restart: xdist started it again and again (147
    tracebacks a minute); the run ends with exit code 4 and one line naming the worker, gateway and value."""
    pytester.makepyfile("def test_a(): pass\ndef test_b(): pass")
    result = pytester.runpytest_subprocess("-p", "xdist", "--dist", "load", f"--tx=popen//env:{var}={value}",
                                           "--tx=popen", "-p", "no:cacheprovider", timeout=120)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert f"gpuenv: worker gw0 (popen//env:{var}={value}) cannot start: invalid " in out
    assert f"{value!r} from environment variable {var}" in out
    assert "Traceback" not in out and "replacing crashed worker" not in out


def test_plan_table(pytester, tmp_path):
    pytester.makepyfile(SUMMARY_SUITE)
    root = tmp_path / "machine"
    amd_machine(root, 2, gfx_target_version=90010)
    result = pytester.runpytest("--collect-only", "-q", "--gpuenv-plan", f"--gpuenv-plan-profile={root}",
                                "--gpuenv-plan-profile=cuda:sm_80:2x40GiB")
    result.stdout.fnmatch_lines([
        "*gpuenv: plan*",
        "test*CPU-only*NVIDIA sm_90*AMD gfx942 x8*AMD gfx1100 WSL 2*machine*NVIDIA sm_80 x2*",
        "*test_mi200*skip: *run*",
        "runs per profile: CPU-only 0/11, NVIDIA sm_90 3/11, AMD gfx942 x8 6/11, AMD gfx1100 WSL 2 6/11, machine 7/11,*",
        "1 test(s) run on no profile*",
        "*test_huge",
    ])


def test_killed_worker_releases_its_gpu_lock(pytester, tmp_path, monkeypatch):
    """An xdist worker killed while it holds the per-GPU lock (mid-measurement) lets the next one in."""
    from pytest_gpuenv.perf import gpu_lock

    monkeypatch.setenv("GPUENV_LOCK_DIR", str(tmp_path / "locks"))
    flag = tmp_path / "holding"
    pytester.makepyfile(
        f"""
        import os, pathlib, signal
        from pytest_gpuenv.perf import gpu_lock

        def test_dies_holding_the_lock():
            with gpu_lock("GPU-test-uuid", timeout=5):
                pathlib.Path({str(flag)!r}).write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    result = pytester.runpytest_subprocess("-n", "1", "-p", "xdist", "--max-worker-restart=0")
    assert flag.exists(), result.stdout.str()
    assert "crashed" in result.stdout.str()
    with gpu_lock("GPU-test-uuid", timeout=5):  # would time out if the dead worker still held it
        pass
