"""Fixtures of the distribution tests (xdist, hosts, --dist gpu)."""

import pytest


@pytest.fixture
def hosts_isolated(no_outer_masks, monkeypatch, tmp_path):
    """No masks or root from around this run; seat and perf locks in this test's own directory."""
    for var in ("GPUENV_ROOT", "GPUENV_WORKER_GPUS", "GPUENV_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPUENV_LOCK_DIR", str(tmp_path / "locks"))
