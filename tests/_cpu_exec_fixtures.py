"""What the CPU-executor test modules share besides the ``cpu_cache`` and ``warp`` fixtures (conftest)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from pytest_gpuenv.rtc import compile_kernel

#: a CPU-executor test checked and unchecked
CHECK = pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])


def builder(cache: str, warp: int, default_path: str) -> Callable[..., Any]:
    """``build(name, path=default_path, **kw)``: kernel ``name`` for the CPU at ``warp``, cached in ``cache``."""
    def build(name: str, path: str = default_path, **kw: Any) -> Any:
        return compile_kernel(path, name, arch="cpu", warp_size=warp, cache_dir=cache, **kw)
    return build
