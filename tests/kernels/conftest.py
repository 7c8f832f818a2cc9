"""Fixtures of the compile and kernel tests: the sticky-error record, the compile cache's process state."""

import pytest


@pytest.fixture
def no_poison():
    """A clean sticky-error record for the test, and again after it (nothing real was poisoned)."""
    from pytest_gpuenv.runtime import sticky as _sticky

    _sticky.reset()
    yield
    _sticky.reset()


@pytest.fixture
def fresh_compile_cache(monkeypatch):
    """Each test starts with no cache object and nothing warned yet in this process."""
    from pytest_gpuenv.rtc import cache as _cache

    monkeypatch.setattr(_cache, "_WARNED", set())
    monkeypatch.setattr(_cache, "_SHARED", {})
