"""gpu_bench on a real NVIDIA GPU (skipped elsewhere). scripts/gpu-check.sh (section perf) runs these."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest

from pytest_gpuenv import requires_cuda

pytestmark = requires_cuda


def test_torch_add_time_and_bandwidth(gpu_bench):
    import torch

    n = 16 << 20
    a, b, c = (torch.ones(n, device="cuda") for _ in range(3))
    m = gpu_bench(lambda: torch.add(a, b, out=c), bytes=3 * 4 * n, name="add16M")
    assert m.mode == "cold" and m.n >= 10
    lo, hi = m.ci
    assert lo <= m.median <= hi
    assert 5e-6 < m.median < 5e-3
    assert m.bandwidth and 0.5e12 < m.bandwidth < 6e12
    assert m.device.name.startswith("NVIDIA")
    assert m.assert_faster_than("10ms") == "PASS"
    with pytest.raises(AssertionError, match=r"add16M: median [\d.]+ us \[[\d.]+, [\d.]+\] > budget 1 us on NVIDIA"):
        m.assert_faster_than("1us")
    assert m.assert_bandwidth(at_least=0.5, of="peak") == "PASS"


def test_ratio_interleaved(gpu_bench):
    import torch

    n = 8 << 20
    a, b, c = (torch.ones(n, device="cuda") for _ in range(3))
    a2, b2, c2 = (torch.ones(2 * n, device="cuda") for _ in range(3))
    r = gpu_bench.assert_ratio(lambda: torch.add(a, b, out=c), lambda: torch.add(a2, b2, out=c2), at_most=0.8)
    assert 0.35 < r.ratio < 0.7, r


def test_empty_and_syncing_callables_are_named(gpu_bench):
    import torch

    x = torch.ones(1, device="cuda")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        e = gpu_bench(lambda: None, name="nothing")
        assert e.assert_faster_than("1ms") == "INCONCLUSIVE"
        s = gpu_bench(lambda: x.add_(1).sum().item(), name="item")
    text = " ".join(str(m.message) for m in w)
    assert "enqueue no GPU work" in text
    assert "appears to synchronise" in text and s.notes


def test_clocks_recorded(gpu_bench):
    import torch

    x = torch.ones(32 << 20, device="cuda")
    m = gpu_bench(lambda: x.mul_(1.0), bytes=2 * 4 * x.numel())
    clocks = m.clocks
    assert clocks["max_sm_mhz"] and clocks["sm_mhz_min"], clocks
    assert m.problems == [], m.problems


def test_driver_timer_without_torch():
    """The cuda-python timer in a process that never imports torch."""
    code = (
        "import os, sys; os.environ['GPUENV_PERF_TIMER'] = 'cuda'\n"
        "from pytest_gpuenv.perf.bench import GpuBench, PerfContext, select_backend, default_monitor\n"
        "b = GpuBench(PerfContext(backend_factory=lambda: select_backend(None), monitor_factory=default_monitor))\n"
        "rt, s = b.backend.runtime, b.backend.stream; n = 128 << 20; p = rt.malloc(n)\n"
        "m = b(lambda: rt.memset(p, n, s), bytes=n, name='memset')\n"
        "import json; print(json.dumps({'median': m.median, 'n': m.n, 'torch': 'torch' in sys.modules,"
        " 'can_delay': b.backend.can_delay, 'note': b.backend.note, 'name': m.device.name}))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["torch"] is False and out["can_delay"] is True, out
    assert 10e-6 < out["median"] < 2e-3 and out["n"] >= 10, out


def test_record_then_check_regression(pytester):
    pytester.makepyfile(
        """
        import torch
        def test_speed(gpu_bench):
            x = torch.ones(16 << 20, device="cuda")
            m = gpu_bench(lambda: x.mul_(1.0), name="mul")
            m.assert_no_regression(at_most="10%")
        """
    )
    r = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-perf=record")
    r.assert_outcomes(passed=1)
    base = pytester.path / ".gpuenv" / "baselines.json"
    data = json.loads(base.read_text())
    (key,) = data["devices"]
    assert key.startswith("NVIDIA") and "driver" in key
    r = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-perf=strict", "-rA")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["*gpuenv: performance*", "*test*device*median*interval*n*budget*verdict*", "*PASS*"])
