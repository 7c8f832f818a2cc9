"""A host's identity and its GPU seats: which processes count as the same host, and how workers claim
GPUs through lock files (a killed worker's seats come free).
"""

import os
import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.usefixtures("hosts_isolated")


def test_host_identity(tmp_path, monkeypatch):
    """The same GPUs seen the same way: same machine, root and masks; the inputs add the environment."""
    from pytest_gpuenv.dist.hosts import here

    base = here(None)
    assert here(None) == base
    assert here(str(tmp_path)).key != base.key and here(str(tmp_path)).name.endswith(f"(root {tmp_path})")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    masked = here(None)
    assert masked.key != base.key and masked.name.endswith("(CUDA_VISIBLE_DEVICES=1)")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("ROCM_PATH", "/opt/rocm-other")
    other = here(None)
    assert other.key == base.key and other.inputs != base.inputs
    monkeypatch.delenv("ROCM_PATH")
    monkeypatch.setenv("UNRELATED_VARIABLE", "x")
    assert here(None) == base
    assert here(None, backend="cpu").inputs != base.inputs


def test_claim_takes_preferred_seats_then_the_least_loaded():
    from pytest_gpuenv.dist.hosts import claim

    first = claim("k1", 4, [0], {0: 1, 1: 1})
    second = claim("k1", 4, [0], {0: 1, 1: 1})  # 0 is full for this plan: the least-loaded free one
    forced = claim("k1", 4, [0], {0: 1}, forced=True)  # assigned by the controller: recorded anyway
    third = claim("k1", 4, [1, 2], {1: 1, 2: 1})  # 1 is free; 2 is free
    try:
        assert first.positions == [0] and second.positions == [1] and forced.positions == [0]
        assert third.positions == [2, 3]  # 1 is second's; then the least-loaded free one
    finally:
        for seats in (first, second, forced, third):
            seats.release()
    again = claim("k1", 4, [0], {0: 1})
    assert again.positions == [0]
    again.release()


def test_a_killed_worker_frees_its_seats(tmp_path):
    code = (
        "import sys, time; from pytest_gpuenv.dist.hosts import claim\n"
        "s = claim('k2', 2, [0], {0: 1}); print(s.positions, flush=True); time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "[0]"
        from pytest_gpuenv.dist.hosts import claim

        held = claim("k2", 2, [0], {0: 1})
        assert held.positions == [1]  # the child holds 0
        held.release()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    freed = claim("k2", 2, [0], {0: 1})
    assert freed.positions == [0]
    freed.release()
