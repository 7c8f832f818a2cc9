"""The core plugin and xdist on a real NVIDIA GPU (skipped elsewhere; scripts/gpu-check.sh runs them).

Each check runs pytest or ``gpuenv`` in a subprocess, so no GPU runtime starts in this process.
"""

import json
import os
import subprocess
import sys

from pytest_gpuenv import requires_cuda, requires_devices

pytestmark = requires_cuda


def _one_gpu_env():
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = "0"
    return env


def test_info_json_shows_the_gpu():
    out = subprocess.run([sys.executable, "-m", "pytest_gpuenv", "info", "--json"], env=_one_gpu_env(),
                         capture_output=True, text=True, timeout=120, check=True)
    info = json.loads(out.stdout)
    assert info["backend"] == "cuda" and info["kind"] == "cuda"
    assert len(info["devices"]) == 1
    dev = info["devices"][0]
    assert dev["vendor"] == "nvidia" and dev["usable"]
    assert dev["arch"].startswith("sm_") and dev["memory_bytes"] > 2**30 and dev["warp_size"] == 32
    assert info["cuda"]["driver_version"]
    assert info["torch"]["build"] == "cuda"
    print(json.dumps({k: info[k] for k in ("backend", "devices", "cuda", "torch", "compilers")}, indent=1))


def test_marker_suite_runs_cuda_skips_rocm_naming_the_gpu(pytester, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    pytester.makepyfile(
        """
        import pytest, torch
        from pytest_gpuenv import requires_cuda, requires_rocm, requires_arch

        @requires_cuda
        def test_cuda(gpu_device):
            assert torch.cuda.get_device_name(0) == gpu_device.name

        @requires_arch("sm_*")  # any NVIDIA GPU: its arch is known
        def test_arch(): pass

        @requires_rocm
        def test_rocm(): pass

        def test_dev(torch_device):
            assert str(torch_device) == "cuda:0"
            x = torch.randn(1000, 1000, device=torch_device)
            assert (x @ x.t()).shape == (1000, 1000)
        """
    )
    result = pytester.runpytest_subprocess("-v", "-rs")
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines([
        "gpuenv: cuda, 1x NVIDIA * (sm_*, * GiB), driver *, torch *+cu*",
        "*test_dev[[]cuda:0[]] PASSED*",
        "*requires ROCm: found CUDA (1x NVIDIA *",
    ])


def test_backend_cpu_reproduces_cpu_ci(pytester):
    pytester.makepyfile(
        """
        import torch
        from pytest_gpuenv import requires_cuda
        @requires_cuda
        def test_cuda(): pass
        def test_dev(torch_device):
            assert str(torch_device) == "cpu"
            assert not torch.cuda.is_available()
        """
    )
    result = pytester.runpytest_subprocess("-v", "-rs", "--gpuenv-backend=cpu")
    result.assert_outcomes(passed=1, skipped=1)


@requires_devices(2)
def test_xdist_one_gpu_per_worker(pytester, tmp_path):
    """pytest -n 2: each worker records torch's device 0 UUID; they must differ."""
    rec = tmp_path / "rec"
    rec.mkdir()
    pytester.makepyfile(
        f"""
        import os, torch, pathlib
        def test_uuid(worker_id):
            u = str(torch.cuda.get_device_properties(0).uuid)
            pathlib.Path({str(rec)!r}, worker_id).write_text(u + " " + os.environ["CUDA_VISIBLE_DEVICES"])
        def test_uuid_again(worker_id):
            test_uuid(worker_id)
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "xdist", "--dist", "each")
    result.assert_outcomes(passed=4)
    seen = {p.name: p.read_text() for p in rec.iterdir()}
    print(seen)
    assert len(seen) == 2 and len({v.split()[0] for v in seen.values()}) == 2


def test_xdist_perf_measurements_on_one_gpu_never_overlap(pytester, tmp_path):
    """pytest -n 4 on the same GPU: the intervals during which fn runs never overlap between workers."""
    rec = tmp_path / "rec"
    rec.mkdir()
    pytester.makepyfile(
        f"""
        import json, os, pathlib, time, pytest, torch

        @pytest.mark.parametrize("i", range(8))
        def test_speed(i, gpu_bench, worker_id):
            n = 16 << 20
            a, b, c = (torch.ones(n, device="cuda") for _ in range(3))
            calls = []
            def fn():
                calls.append(time.time())
                torch.add(a, b, out=c)
            m = gpu_bench(fn, bytes=12 * n, max_time=0.3)
            m.assert_faster_than("50ms")
            pathlib.Path({str(rec)!r}, f"{{worker_id}}-{{i}}").write_text(json.dumps(
                {{"start": calls[0], "end": calls[-1], "n": len(calls),
                  "uuid": str(torch.cuda.get_device_properties(0).uuid)}}))
        """
    )
    result = pytester.runpytest_subprocess("-n", "4", "-p", "xdist", "--gpuenv-worker-gpus=1", "-q")
    result.assert_outcomes(passed=8)
    spans = [json.loads(p.read_text()) for p in rec.iterdir()]
    by_gpu = {}
    for s in spans:
        by_gpu.setdefault(s["uuid"], []).append((s["start"], s["end"]))
    overlaps = 0
    for uuid, iv in by_gpu.items():
        iv.sort()
        overlaps += sum(1 for (s0, e0), (s1, e1) in zip(iv, iv[1:]) if s1 < e0)
        print(uuid, [(round(s - iv[0][0], 3), round(e - iv[0][0], 3)) for s, e in iv])
    assert overlaps == 0
