"""Fixtures of the CPU executor's tests."""

from __future__ import annotations

from typing import Any, Callable

import pytest


@pytest.fixture
def cpu_kernel(cpu_cache: str, warp: int, request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``cpu_kernel(name, path=SOURCE, **kw)``: kernel ``name`` compiled for the CPU executor at this test's
    warp size (``compile_kernel(..., arch="cpu")``, cached in the module's ``cpu_cache``). ``SOURCE`` is the
    test module's own: a kernel file of tests/data/cpu_kernels, or the source text itself."""
    from pytest_gpuenv.rtc import compile_kernel

    default_path = request.module.SOURCE

    def build(name: str, path: str = default_path, **kw: Any) -> Any:
        return compile_kernel(path, name, arch="cpu", warp_size=warp, cache_dir=cpu_cache, **kw)
    return build
