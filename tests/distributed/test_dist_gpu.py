"""``--dist gpu``: each test goes to a worker whose host can run it (popen gateway groups over machine trees:
``--tx N*popen//env:GPUENV_ROOT=<tree>`` is a host with that machine's GPUs; the controller is CPU-only)."""

import json
import os
import pathlib
import sys

import pytest
from _machines import amd_machine, nvidia_machine

pytest.importorskip("xdist")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path, roots):
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
                "GPUENV_WORKER_GPUS", "GPUENV_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPUENV_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("GPUENV_ROOT", str(roots("cpu_only_container")))


@pytest.fixture
def trees(tmp_path):
    amd_machine(tmp_path / "amd2", 2)
    nvidia_machine(tmp_path / "nv2", 2)
    return {"amd2": tmp_path / "amd2", "nv2": tmp_path / "nv2"}


def tx(n: int, tree: pathlib.Path) -> list:
    return ["--tx", f"{n}*popen//env:GPUENV_ROOT={tree}"]


SUITE = """
import json, os, pathlib
import pytest
from pytest_gpuenv import requires_cuda, requires_devices, requires_rocm

def _ran(request, **extra):
    from pytest_gpuenv.session.state import get_session
    out = pathlib.Path(os.environ["RECORD_DIR"])
    out.mkdir(exist_ok=True, parents=True)
    rec = {"host": get_session(request.config).host, "worker": os.environ["PYTEST_XDIST_WORKER"], **extra}
    (out / request.node.name.replace("/", "_")).write_text(json.dumps(rec))

@requires_rocm
@pytest.mark.parametrize("i", range(5))
def test_rocm(i, request, gpu_device):
    _ran(request, vendor=gpu_device.vendor)

@requires_cuda
@pytest.mark.parametrize("i", range(3))
def test_cuda(i, request, gpu_device):
    _ran(request, vendor=gpu_device.vendor)

@requires_rocm
@pytest.mark.xdist_group("rocm-pair")
@pytest.mark.parametrize("i", range(3))
def test_rocm_group(i, request):
    _ran(request)

@requires_devices(16)
def test_sixteen_gpus(): pass

@pytest.mark.parametrize("i", range(6))
def test_cpu(i, request):
    _ran(request)
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("RECORD_DIR", str(pytester.path / "rec"))
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def _ran(path: pathlib.Path) -> dict:
    return {p.name: json.loads(p.read_text()) for p in path.glob("test_*")}


@pytest.mark.slow
def test_every_gpu_test_runs_on_a_host_that_can_run_it(suite, trees):
    result = suite.runpytest_subprocess("-p", "xdist", "--dist", "gpu", *tx(2, trees["amd2"]), *tx(2, trees["nv2"]),
                                        "-rs", "--gpuenv-json=run.json")
    result.assert_outcomes(passed=17, skipped=1)  # nothing skipped that one host could run
    ran = _ran(suite.path / "rec")
    assert len(ran) == 17
    for name, rec in ran.items():
        if name.startswith("test_rocm"):
            assert "amd2)" in rec["host"], (name, rec)
        elif name.startswith("test_cuda"):
            assert "nv2)" in rec["host"] and rec["vendor"] == "nvidia", (name, rec)
    group = {rec["worker"] for name, rec in ran.items() if name.startswith("test_rocm_group")}
    assert len(group) == 1, group  # an xdist_group stays on one worker
    result.stdout.fnmatch_lines([
        "*gpuenv: hosts*",
        "* (root */amd2): rocm, 2x *",
        "  tests: * run: * passed, 0 failed, 0 skipped",
        "* (root */nv2): cuda, 2x NVIDIA H100 80GB HBM3*",
        "  tests: * run: * passed, 0 failed, 0 skipped",
        "*  1  devices  *[[]on every host[]]",
    ])
    skipped = [line for line in result.stdout.lines if line.startswith("SKIPPED")]
    assert len(skipped) == 1 and "test_suite.py:" in skipped[0], skipped
    assert "requires_devices(16): 2 usable GPU(s) visible" in skipped[0] and "on host " in skipped[0], skipped
    assert "amd2)" in skipped[0] and "nv2)" in skipped[0], skipped
    report = json.loads((suite.path / "run.json").read_text())
    assert [s["host"] for s in report["skips"]] == ["every host"]
    hosts = {pathlib.Path(h["name"].split("(root ")[1].rstrip(")")).name: h for h in report["hosts"]}
    assert sorted(hosts) == ["amd2", "nv2"]
    assert hosts["amd2"]["tests"]["passed"] >= 8 and hosts["nv2"]["tests"]["passed"] >= 3
    assert sum(h["tests"]["run"] for h in hosts.values()) == 17
    assert all(len(h["workers"]) == 2 for h in hosts.values())


@pytest.mark.slow
def test_gpuenv_dist_is_dist_gpu_and_one_host_names_itself(suite, trees):
    """--gpuenv-dist asks for the same scheduler; with one NVIDIA host the ROCm tests skip once each, the
    reason naming the host."""
    result = suite.runpytest_subprocess("-p", "xdist", "--gpuenv-dist", *tx(2, trees["nv2"]), "-rs")
    result.assert_outcomes(passed=9, skipped=9)
    result.stdout.fnmatch_lines(["*  8  vendor  *requires ROCm; found CUDA  [[]on every host[]]",
                                 "SKIPPED [[]5[]] test_suite.py:*: requires ROCm: found CUDA (2x NVIDIA H100 80GB HBM3) "
                                 "on host * (root */nv2)"])


CRASH = """
import os, pathlib, signal
import pytest
from pytest_gpuenv import requires_cuda

@requires_cuda
@pytest.mark.parametrize("i", range(4))
def test_cuda(i):
    flag = pathlib.Path(os.environ["CRASH_FLAG"])
    if i == 0 and not flag.exists():
        flag.write_text("")
        os.kill(os.getpid(), signal.SIGKILL)

@pytest.mark.parametrize("i", range(4))
def test_cpu(i): pass
"""


@pytest.mark.slow
@pytest.mark.parametrize("restarts", [None, "0"])
def test_a_dead_worker_s_tests_are_rerouted_or_reported_on_its_host(pytester, trees, monkeypatch, restarts):
    """The NVIDIA host's only worker dies in its first CUDA test: xdist reports that test crashed (naming the
    host); the other CUDA tests run on its replacement, or, where xdist starts none (and so stops the run),
    fail naming the host. Every test has its report either way."""
    monkeypatch.setenv("CRASH_FLAG", str(pytester.path / "crashed"))
    pytester.makepyfile(test_crash=CRASH)
    extra = ["--max-worker-restart", restarts] if restarts else []
    result = pytester.runpytest_subprocess("-p", "xdist", "--dist", "gpu", *tx(1, trees["amd2"]), *tx(1, trees["nv2"]),
                                           *extra, "-rfE")
    out = result.stdout.str()
    assert "crashed while running 'test_crash.py::test_cuda[0]' on host " in out and "nv2)" in out, out
    if restarts is None:
        result.assert_outcomes(passed=7, failed=1)
        # the hosts' counts include the tests of the worker that died (its host reported by its replacement)
        runs = [int(line.split("tests: ")[1].split()[0]) for line in out.splitlines() if "  tests: " in line]
        failed = [int(line.split(" passed, ")[1].split()[0]) for line in out.splitlines() if "  tests: " in line]
        assert sum(runs) == 8 and sum(failed) == 1, out  # the crashed test counts as failed on its host
    else:
        outcomes = result.parseoutcomes()  # xdist stops the run: every test still has its report
        assert sum(outcomes.get(k, 0) for k in ("passed", "failed", "errors")) == 8, out
        assert "on host " in out and "xdist starts no replacement" in out, out


def test_plan_previews_the_routing_over_saved_hosts(pytester, trees, tmp_path):
    import subprocess
    import sys

    for name, tree in trees.items():
        info = subprocess.run([sys.executable, "-m", "pytest_gpuenv", "info", "--json", "--root", str(tree)],
                              capture_output=True, text=True, check=True).stdout
        (tmp_path / f"{name}.json").write_text(info)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("--collect-only", "-q", "--gpuenv-plan", f"--gpuenv-plan-profile=@{tmp_path / 'amd2.json'}",
                                f"--gpuenv-plan-profile=@{tmp_path / 'nv2.json'}")
    result.stdout.fnmatch_lines([
        "--dist gpu over amd2, nv2: 6 test(s) to any host, 8 only to hosts like amd2, 3 only to hosts like nv2, "
        "1 skipped once (no host can run them)",
        "  test_suite.py::test_sixteen_gpus: requires_devices(16): 2 usable GPU(s) visible (*) on host amd2, "
        "2 usable GPU(s) visible (*) on host nv2",
    ])


def test_no_host_reason_says_the_requirement_once():
    from pytest_gpuenv.dist.routing import no_host_reason

    assert no_host_reason({"gpu-b": "requires ROCm: found CUDA (2x H100)", "ci": "requires ROCm: found no GPU",
                           "gpu-c": "requires ROCm: found CUDA (2x H100)"}) == \
        "requires ROCm: found no GPU on host ci, found CUDA (2x H100) on hosts gpu-b, gpu-c"
    assert no_host_reason({"a": "requires CUDA: x", "b": "skip_on('rocm')"}) == \
        "requires CUDA: x on host a; skip_on('rocm') on host b"


def test_perf_table_has_a_host_column_when_several_hosts_measured():
    from pytest_gpuenv.perf._entries import PerfEntry
    from pytest_gpuenv.perf.report import summary_lines

    one = [PerfEntry(nodeid="t.py::a", name="k", device_key="d", host="gpu-a")]
    assert "host" not in summary_lines(one)[0].split()
    two = one + [PerfEntry(nodeid="t.py::b", name="k", device_key="d", host="gpu-b")]
    lines = summary_lines(two)
    assert lines[0].split()[:3] == ["test", "device", "host"]
    assert "gpu-a" in lines[2] and "gpu-b" in lines[3]


#: the ``--tx ssh=`` value of a local sshd for this user (``eval "$(bash scripts/sshd-local.sh start)"``; .ci/run)
SSH = os.environ.get("GPUENV_TEST_SSH")

WORKER_RECORDER = """
import json, os, pathlib

def pytest_configure(config):
    wi = getattr(config, "workerinput", None)
    if wi is not None:
        from pytest_gpuenv.session.state import get_session
        s = get_session(config)
        out = pathlib.Path(os.environ["RECORD_DIR"], "workers")
        out.mkdir(exist_ok=True, parents=True)
        (out / (wi["workerid"] + ".json")).write_text(json.dumps({"host": s.host, "uuids": [d.uuid for d in s.env.devices]}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not SSH, reason="needs GPUENV_TEST_SSH: an ssh target for this user (scripts/sshd-local.sh)")
def test_ssh_gateways_route_each_test_to_its_host(pytester, trees, tmp_path):
    """Real ssh gateways (two groups of two workers, an AMD and an NVIDIA machine tree), the suite sent with
    --rsyncdir (and this package, so that the workers import the code under test): every GPU test runs on a
    host that can run it, workers of one host share its GPUs each led by a different one, the summary names
    both hosts."""
    import pytest_gpuenv

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "conftest.py").write_text(WORKER_RECORDER)
    (suite / "test_suite.py").write_text(SUITE)
    rec = tmp_path / "rec"
    package = pathlib.Path(pytest_gpuenv.__file__).parent

    def group(name: str) -> list:
        return ["--tx", f"2*ssh={SSH}//python={sys.executable}//chdir={tmp_path / ('remote-' + name)}"
                        f"//env:GPUENV_ROOT={trees[name]}//env:RECORD_DIR={rec}//env:GPUENV_LOCK_DIR={tmp_path / 'locks'}"]

    result = pytester.runpytest_subprocess("-p", "xdist", "--dist", "gpu", *group("amd2"), *group("nv2"),
                                           "--rsyncdir", str(suite), "--rsyncdir", str(package), str(suite), "-rs",
                                           "-W", "ignore::DeprecationWarning", timeout=300)
    result.assert_outcomes(passed=17, skipped=1)
    ran = _ran(rec)
    assert len(ran) == 17
    for name, rec_ in ran.items():
        if name.startswith("test_rocm"):
            assert "amd2)" in rec_["host"], (name, rec_)
        elif name.startswith("test_cuda"):
            assert "nv2)" in rec_["host"], (name, rec_)
    workers = [json.loads(p.read_text()) for p in (rec / "workers").glob("gw*.json")]
    assert len(workers) == 4
    for root in ("amd2", "nv2"):
        # --dist gpu shares a host's GPUs by memory claims: each worker sees both, each led by a different one
        seen = [w["uuids"] for w in workers if w["host"].endswith(f"/{root})")]
        assert len(seen) == 2 and all(len(u) == 2 and set(u) == set(seen[0]) for u in seen), (root, workers)
        assert len({u[0] for u in seen}) == 2, (root, workers)
    result.stdout.fnmatch_lines(["*gpuenv: hosts*", "* (root */amd2): rocm, 2x *", "* (root */nv2): cuda, 2x *"])


@pytest.mark.parametrize("args, says", [
    (("-p", "no:xdist"), "needs pytest-xdist, which is not loaded here"),
    (("-n", "1", "--dist", "each"), "conflicts with --dist each"),
])
def test_gpuenv_dist_where_it_cannot_take_effect_is_a_usage_error(pytester, args, says):
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest_subprocess("--gpuenv-dist", "--gpuenv-backend=cpu", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*gpuenv: --gpuenv-dist from command line {says}*"])
