"""``--dist gpu`` by memory claims, end to end: ``-n`` workers over machine trees (an MI250X node of 8 GCDs of
64 GiB, an MI300X machine); each test records when it started and ended, its worker and its GPUs, and the
records are checked against the claims."""

import json
import pathlib

import pytest
from _machines import amd_machine

pytest.importorskip("xdist")

GiB = 1 << 30

SUITE = """
import json, os, pathlib, signal, time
import pytest
from pytest_gpuenv import exclusive_gpu, requires_devices, requires_memory
from pytest_gpuenv.session.state import get_session

def _record(request, claim, devices=1, exclusive=False, pause=0.4):
    env = get_session(request.config).env
    start = time.time()
    time.sleep(pause)
    rec = {"start": start, "end": time.time(), "claim": claim, "exclusive": exclusive,
           "gpus": [d.uuid for d in env.usable_devices][:devices], "worker": os.environ["PYTEST_XDIST_WORKER"]}
    out = pathlib.Path(os.environ["RECORD_DIR"])
    out.mkdir(exist_ok=True)
    (out / request.node.name).write_text(json.dumps(rec))

@requires_memory("40GiB")
@pytest.mark.parametrize("i", range(6))
def test_forty(i, request):
    _record(request, 40)

@requires_devices(2)
@requires_memory("20GiB")
def test_pair(request):
    _record(request, 20, devices=2)

@exclusive_gpu
def test_alone(request):
    _record(request, 1, exclusive=True)

@requires_memory("60GiB")
@requires_devices(2)
def test_sixty_on_two(request):
    _record(request, 60, devices=2)

@requires_memory("100GiB")
def test_too_big(request):
    _record(request, 100)

@pytest.mark.parametrize("i", range(3))
def test_plain(i, request):
    _record(request, 1, pause=0.1)
"""


def _overlaps(records: dict) -> None:
    """At every start, what runs on each GPU fits its 64 GiB and an exclusive test is alone."""
    for name, rec in records.items():
        t = rec["start"]
        for gpu in rec["gpus"]:
            now = [r for r in records.values() if gpu in r["gpus"] and r["start"] <= t < r["end"]]
            assert sum(r["claim"] for r in now) <= 64, (name, gpu, now)
            assert len(now) == 1 or not any(r["exclusive"] for r in now), (name, gpu, now)


@pytest.mark.slow
def test_four_workers_share_two_mi250x_gcds_by_their_claims(pytester, hosts_isolated, monkeypatch, tmp_path):
    """HIP_VISIBLE_DEVICES=0,1 leaves two of the eight GCDs: four workers share them, two on each; the 40 GiB
    tests never run two on a GCD, the two-GCD tests run in this run, the 100 GiB claim is one skip, and the
    summary counts every test on its GCDs."""
    amd_machine(tmp_path / "mi250x", 8, gfx_target_version=90010, vram=64 * GiB)
    monkeypatch.setenv("GPUENV_ROOT", str(tmp_path / "mi250x"))
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("RECORD_DIR", str(pytester.path / "rec"))
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "4", "--dist", "gpu", "-rs", "--gpuenv-json=run.json")
    result.assert_outcomes(passed=12, skipped=1)
    records = {p.name: json.loads(p.read_text()) for p in (pytester.path / "rec").iterdir()}
    assert len(records) == 12
    assert {len(set(r["gpus"])) for n, r in records.items() if n.startswith(("test_pair", "test_sixty"))} == {2}
    assert len({g for r in records.values() for g in r["gpus"]}) == 2  # the mask holds
    _overlaps(records)
    result.stdout.fnmatch_lines(["*gpuenv: GPU claims*", "SKIPPED [[]1[]] *requires_memory('100GiB'): largest device "
                                 "has 64.0 GiB on host*"])
    claims_lines = [ln for ln in result.stdout.lines if "peak claimed" in ln]
    assert len(claims_lines) == 2, result.stdout.lines
    # 10 one-GCD tests and 2 two-GCD tests: 14 GCD-tests in all
    assert sum(int(ln.split("]: ")[1].split(" test")[0]) for ln in claims_lines) == 14
    peaks = [float(ln.split("peak claimed ")[1].split(" GiB")[0]) for ln in claims_lines]
    assert all(40 <= p <= 64 for p in peaks), claims_lines
    gpus = json.loads((pytester.path / "run.json").read_text())["gpu_claims"]
    assert len(gpus) == 2 and sum(g["tests"] for g in gpus) == 14 and all(g["total"] == 64 * GiB for g in gpus)


KILL = """
import os, pathlib, signal, time
import pytest
from pytest_gpuenv import requires_memory

@requires_memory("150GiB")
def test_dies(request):
    flag = pathlib.Path(os.environ["CRASH_FLAG"])
    if not flag.exists():
        flag.write_text("")
        os.kill(os.getpid(), signal.SIGKILL)

@requires_memory("100GiB")
@pytest.mark.parametrize("i", range(4))
def test_after(i):
    time.sleep(0.1)
"""


@pytest.mark.slow
def test_a_worker_killed_mid_test_releases_its_claim(pytester, hosts_isolated, roots, monkeypatch, tmp_path):
    """One MI300X (192 GiB) for two workers: the 150 GiB test's worker is killed in it; had its claim stayed, no
    100 GiB test could start again. The crash is reported and the rest run on the other worker and the replacement."""
    monkeypatch.setenv("GPUENV_ROOT", str(roots("mi300x_linux")))
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("CRASH_FLAG", str(tmp_path / "crashed"))
    pytester.makepyfile(test_kill=KILL)
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--dist", "gpu", timeout=120)
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*test_dies*crashed*"])
    assert pathlib.Path(tmp_path / "crashed").exists()


def test_require_devices_stops_the_run_before_any_test_in_one_line(pytester, hosts_isolated, monkeypatch, tmp_path):
    """--gpuenv-require devices>=N: an MI250X node masked to two GCDs has too few for 4, and 2 are enough; a
    bad N names the value and its source."""
    amd_machine(tmp_path / "m", 8, gfx_target_version=90010, vram=64 * GiB)
    pytester.makepyfile("def test_x():\n    pass\n")
    args = [f"--gpuenv-root={tmp_path / 'm'}", "--gpuenv-probe=never", "-p", "no:xdist"]
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0,1")
    result = pytester.runpytest_subprocess(*args, "--gpuenv-require", "devices>=4")
    assert result.ret == 4 and "test_x" not in result.stdout.str()
    lines = [ln for ln in result.stderr.lines if "gpuenv" in ln]
    assert len(lines) == 1 and "--gpuenv-require=devices>=4: this run needs at least 4 GPU(s) and 2 are usable " \
        "here (" in lines[0], result.stderr.lines
    result = pytester.runpytest_subprocess(*args, "--gpuenv-require=devices>=2")
    result.assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess(*args, "--gpuenv-require=devices>=0")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*invalid --gpuenv-require value '0' from command line (--gpuenv-require); "
                                 "expected devices>=N with N from 1 to *"])
