"""``--dist gpu`` by memory claims (``dist.ledger``, ``dist.scheduler``): the scheduler driven directly, as
xdist's DSession drives it, with workers that run what they are sent as xdist's worker does (a test starts
once the worker knows the next one, or is told to shut down), in a random order of completions."""

import os
import random
import subprocess
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("xdist")

from _checkout import REPO
from _xdist_standin import Worker, scheduler, start

from pytest_gpuenv.dist.ledger import Ledger
from pytest_gpuenv.dist.scheduler import NodeRoutes
from pytest_gpuenv.marks.claims import Claim

GiB = 1 << 30
DEFAULT = Claim(1, GiB)


def _run(workers: dict, claims: dict, n_tests: int, seed: int = 0, kill=None, default=DEFAULT):
    """Run ``n_tests`` over ``workers`` (name -> its GPUs as ``gpu_facts`` gives them); return (what ran at once
    on each GPU at its fullest, per-GPU bytes; the tests run; the tests skipped; the scheduler)."""
    tests = [f"t.py::test_{i}" for i in range(n_tests)]
    routes = {name: NodeRoutes("host", {}, {}, gpus, claims, default) for name, gpus in workers.items()}
    sched = scheduler([f"{len(workers)}*popen"], lambda node: routes[node.gateway.id], maxworkerrestart="0")
    nodes = [Worker(name) for name in workers]
    start(sched, nodes, tests)
    rng = random.Random(seed)
    ran, peak, together = [], {}, []
    for _ in range(10 * n_tests + 100):
        live = [n for n in nodes if n in sched.node2pending]
        busy = [n for n in live if n.running() is not None]
        if not busy:
            break
        # what runs at once now: no GPU over its memory, no exclusive test beside another
        use: dict = {}
        for n in busy:
            c = sched.claim(n.running())
            for g in [g["id"] for g in workers[n.gateway.id]][: c.devices]:
                use.setdefault(g, []).append((n.running(), c))
        for g, held in use.items():
            total = next(x["total"] for gs in workers.values() for x in gs if x["id"] == g)
            others = next(x.get("others", 0) for gs in workers.values() for x in gs if x["id"] == g)
            assert sum(c.memory for _i, c in held) <= total - others, (g, held)
            assert len(held) == 1 or not any(c.exclusive for _i, c in held), (g, held)
            peak[g] = max(peak.get(g, 0), sum(c.memory for _i, c in held))
            together.append(len(held))
        n = rng.choice(busy)
        index = n.running()
        if kill is not None and index == kill:
            kill = None
            sched.remove_node(n)  # worker_errordown: it died in this test
            continue
        n.queue.pop(0)
        ran.append(index)
        sched.mark_test_complete(n, index)
        if n.shutting_down and not n.queue:
            sched.remove_node(n)
    skipped = sched.config.hook.reports("skipped")
    return peak, ran, skipped, sched, max(together or [0])


def _gpus(n: int, total: int, prefix: str = "GPU-", others: int = 0):
    return [{"id": f"{prefix}{i}", "name": "GPU", "total": total, "others": others} for i in range(n)]


def _rotated(gpus, w):
    return gpus[w % len(gpus):] + gpus[: w % len(gpus)]


@pytest.mark.parametrize("seed", range(3))
def test_eight_workers_on_one_80_gib_gpu_never_hold_more_than_it_has(seed):
    """30 GiB tests on one 80 GiB GPU (NVML said 1 GiB is held by another process): two at a time, never three;
    the undeclared tests (1 GiB) fill the rest; an exclusive test runs alone."""
    gpu = _gpus(1, 80 * GiB, others=1 * GiB)
    claims = {i: Claim(1, 30 * GiB, declared=True) for i in range(0, 24, 2)}
    claims[5] = Claim(1, GiB, exclusive=True)
    peak, ran, skipped, sched, together = _run({f"gw{w}": gpu for w in range(8)}, claims, 24, seed)
    assert sorted(ran) == list(range(24)) and not skipped
    assert 60 * GiB <= peak["GPU-0"] <= 79 * GiB and together > 2
    assert sched.ledger.gpus["GPU-0"].tests == 24 and sched.ledger.gpus["GPU-0"].peak_claimed <= 79 * GiB


@pytest.mark.parametrize("seed", range(3))
def test_mi250x_multi_gpu_tests_run_in_the_same_run(seed):
    """An MI250X node: 8 GCDs of 64 GiB, 4 workers each seeing every GCD from its own: tests of 2 and 8 GCDs
    run (no second pass), a 100 GiB claim is skipped once naming the largest GCD."""
    gcds = _gpus(8, 64 * GiB, "GCD-")
    claims = {0: Claim(2, 40 * GiB, declared=True), 1: Claim(8, 10 * GiB, declared=True),
              2: Claim(1, 100 * GiB, declared=True), 3: Claim(2, 60 * GiB, exclusive=True, declared=True)}
    claims.update({i: Claim(1, 48 * GiB, declared=True) for i in range(4, 20)})
    peak, ran, skipped, sched, _ = _run({f"gw{w}": _rotated(gcds, 2 * w) for w in range(4)}, claims, 20, seed)
    assert sorted(ran) == [i for i in range(20) if i != 2]
    assert skipped == ["t.py::test_2"]
    assert all(p <= 64 * GiB for p in peak.values())
    assert sum(g.tests for g in sched.ledger.gpus.values()) == 2 + 8 + 2 + 16


def test_a_worker_that_dies_mid_test_releases_its_claims():
    """Two workers on one 64 GiB GPU with 40 GiB tests: gw0 dies in test 0; the others still run (one at a
    time), and nothing is left held."""
    gpu = _gpus(1, 64 * GiB)
    claims = {i: Claim(1, 40 * GiB, declared=True) for i in range(6)}
    peak, ran, skipped, sched, _ = _run({"gw0": gpu, "gw1": gpu}, claims, 6, kill=0)
    assert sorted(ran) == [1, 2, 3, 4, 5]  # (what gw0 had been sent besides goes to gw1)
    assert sched.ledger.gpus["GPU-0"].held == {}


def test_the_ledger_counts_claims_per_gpu_over_workers():
    ledger = Ledger()
    gpus = _gpus(2, 80 * GiB)
    ledger.add_worker("a", gpus)
    ledger.add_worker("b", _rotated(gpus, 1))
    ledger.admit("a", 0, Claim(2, 50 * GiB))
    assert not ledger.fits("b", [Claim(1, 40 * GiB)])  # b's first GPU is GPU-1, where a holds 50
    assert ledger.fits("b", [Claim(1, 30 * GiB)])
    assert not ledger.fits("b", [Claim(1, GiB, exclusive=True)])
    assert ledger.fits("a", [Claim(1, 80 * GiB)])  # a runs one test at a time: its own largest counts
    ledger.remove_worker("a")
    assert ledger.fits("b", [Claim(2, 80 * GiB, exclusive=True)])
    assert not ledger.ever_fits("b", Claim(1, 81 * GiB)) and not ledger.ever_fits("b", Claim(3, GiB))


def _fake_pynvml(per_process: dict):
    """nvidia-ml-py's functions as the use meter calls them (``nvmlDeviceGetComputeRunningProcesses``: each
    process's ``usedGpuMemory``, nvml.h ``nvmlProcessInfo_t``), for A100s: UUID -> {pid: bytes}."""
    uuids = list(per_process)
    return SimpleNamespace(
        nvmlInit=lambda: None, nvmlDeviceGetHandleByUUID=lambda u: uuids.index(u),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=pid, usedGpuMemory=b)
                                                        for pid, b in per_process[uuids[h]].items()],
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=sum(per_process[uuids[h]].values())))


def test_a_test_that_uses_more_than_it_claimed_is_reported(pytester, monkeypatch):
    """On an A100 (NVML stood in at the binding), a test claiming 40 GiB whose process holds 50 GiB: a warning
    naming the test, the GPU, both figures and the fix; the figures go to the controller in the report."""
    import os
    import sys

    from pytest_gpuenv.base.model import Device, GpuEnv
    from pytest_gpuenv.dist.use import USE_PROPERTY, ClaimWarning, UseMeter
    from pytest_gpuenv.runtime import nvml

    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml({"GPU-a100-0": {os.getpid(): 50 * GiB, 1: 9 * GiB}}))
    monkeypatch.setattr(nvml, "_state", {})
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    item = pytester.getitem("import pytest\n@pytest.mark.requires_memory('40GiB')\ndef test_big(): pass\n", "test_big")
    env = GpuEnv(backend="cuda", devices=[Device(0, "nvidia", "NVIDIA A100-SXM4-80GB", "sm_80", 80 * GiB,
                                                 uuid="GPU-a100-0")])
    session = SimpleNamespace(env=env, settings=SimpleNamespace(root=None, default_claim=GiB), host="h")
    with pytest.warns(ClaimWarning, match=r"test_big used 50.0 GiB of GPU memory on GPU-a100-0 but claimed "
                                          r"40.0 GiB \(requires_memory\); declare what it uses"):
        UseMeter(session)._measure(item)
    assert item.user_properties == [(USE_PROPERTY, {"GPU-a100-0": [50 * GiB, 40 * GiB]})]
    assert nvml.memory_used(["GPU-a100-0"]) == {"GPU-a100-0": 59 * GiB}  # what the worker reads at collection


def test_an_out_of_memory_failure_names_what_ran_beside_it():
    """Two workers on one 80 GiB GPU: a test that fails out of memory gets a section naming the test the other
    worker ran beside it, with its claim; its use goes to the GPU's figures."""
    from pytest_gpuenv.dist.claim_reports import SECTION, on_report
    from pytest_gpuenv.dist.use import USE_PROPERTY

    gpu = _gpus(1, 80 * GiB)
    claims = {0: Claim(1, 30 * GiB, declared=True), 2: Claim(1, 40 * GiB, declared=True)}
    tests = [f"t.py::test_{i}" for i in range(4)]
    routes = NodeRoutes("host", {}, {}, gpu, claims, DEFAULT)
    sched = scheduler(["2*popen"], lambda node: routes)
    gw0, gw1 = Worker("gw0"), Worker("gw1")
    start(sched, (gw0, gw1), tests)
    assert gw0.running() == 0 and gw1.running() == 2
    report = pytest.TestReport("t.py::test_0", ("t.py", 0, "test_0"), {}, "failed",
                               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB", "call",
                               user_properties=[(USE_PROPERTY, {"GPU-0": [52 * GiB, 30 * GiB]})])
    on_report(sched, gw0, report)
    (title, text), = report.sections
    assert title == SECTION
    assert text.splitlines() == ["t.py::test_0 claimed 30.0 GiB on GPU-0 (requires_memory); beside it:",
                                 "  t.py::test_2 on gw1: claimed 40.0 GiB"]
    assert sched.ledger.gpus["GPU-0"].peak_used == 52 * GiB and sched.ledger.gpus["GPU-0"].over == 1


@pytest.mark.parametrize("seed", range(3))
def test_an_exclusive_test_is_not_starved_by_small_ones(seed):
    """Eight workers on one GPU, an exclusive test among 60 small ones: tests sent after it wait for it (no
    overtaking), so it runs once the GPU drains, not after every other test."""
    claims = {3: Claim(1, GiB, exclusive=True)}
    peak, ran, skipped, sched, _ = _run({f"gw{w}": _gpus(1, 80 * GiB) for w in range(8)}, claims, 60, seed)
    assert sorted(ran) == list(range(60)) and ran.index(3) < 30, ran


def test_the_benchmark_runs_from_a_plain_checkout():
    """benchmarks/dist_claims.py drives the scheduler with this suite's stand-ins (tests/_xdist_standin.py), found
    from its own place in the checkout, not from this run's ``sys.path``: it prints its two figures."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "dist_claims.py"), "--tests", "200",
                          "--workers", "4", "--rounds", "1"], capture_output=True, text=True, env=env, cwd=os.sep,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in out.stdout.splitlines()] == ["by", "no"], out.stdout


def test_gpus_without_a_unique_id_are_told_apart_in_the_ledger():
    """ROCm names every GPU whose KFD ``unique_id`` is 0 ``GPU-XX`` (ROCR's ``BuildDeviceUuidList``; rocminfo prints
    it): two such GPUs are two ledger entries, by host and PCI address, not one GPU holding both's claims."""
    from pytest_gpuenv.base.model import NO_UNIQUE_UUID, Device, GpuEnv
    from pytest_gpuenv.dist.routing import gpu_facts

    devs = [Device(index=i, vendor="amd", uuid=NO_UNIQUE_UUID, pci=f"0000:0{i + 3}:00.0", memory_bytes=16 * GiB)
            for i in range(2)]
    env = GpuEnv(kind="rocm", devices=devs)
    ids = [g["id"] for g in gpu_facts(env, "box")]
    assert ids == ["box/0000:03:00.0", "box/0000:04:00.0"]
    assert devs[0].unique_uuid is None and Device(index=0, vendor="amd", uuid="GPU-0123").unique_uuid == "GPU-0123"
