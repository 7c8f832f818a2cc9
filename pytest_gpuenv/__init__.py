"""pytest-gpuenv: GPU-aware testing across ROCm, CUDA, WSL 2 and CPU-only runners.

The markers are importable as decorators::

    from pytest_gpuenv import requires_rocm, requires_memory

    @requires_rocm
    @requires_memory("16GiB")
    def test_big_model(torch_device): ...

Importing this package never imports torch or a GPU runtime, nor pytest (``gpuenv info`` answers without it):
a marker imports pytest when it is first asked for.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any


def _leave_asserts_alone() -> None:
    """Take this package off pytest's assertion-rewrite list (its asserts are internal invariants, not test
    assertions). pytest rewrites every module of a ``pytest11`` plugin's distribution as it is imported, and
    where it cannot keep the rewritten bytecode (``PYTHONDONTWRITEBYTECODE``, a read-only site-packages) it
    parses and compiles each module from source in every run, most of detection's CPU time in a pytest
    process (figures: docs/development.md, "Overhead"). The list is pytest's ``_must_rewrite`` set on its
    import hook; where a pytest has none, nothing changes (the modules are rewritten as before)."""
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set):
            marked.discard(__name__)


_leave_asserts_alone()

from pytest_gpuenv.base.model import ArchPattern, Device, GpuEnv, Problem, Usability, parse_size  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "ArchPattern",
    "Device",
    "GpuEnv",
    "KernelWarpSyncError",
    "Problem",
    "Usability",
    "__version__",
    "compile_kernel",
    "compile_module",
    "detect",
    "exclusive_gpu",
    "gpu_assert_close",
    "gpu_dtypes",
    "parse_size",
    "perf",
    "requires_arch",
    "requires_capability",
    "requires_cuda",
    "requires_devices",
    "requires_gpu",
    "requires_hip",
    "requires_memory",
    "requires_rocm",
    "requires_wsl",
    "skip_on",
    "xfail_on",
]

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.base.tolerance import gpu_assert_close
    from pytest_gpuenv.detect import detect
    from pytest_gpuenv.rtc import KernelWarpSyncError, compile_kernel, compile_module


def __getattr__(name: str) -> Any:
    # lazy: keep ``import pytest_gpuenv`` light
    if name == "detect":
        from pytest_gpuenv.detect import detect

        return detect
    if name == "gpu_assert_close":
        from pytest_gpuenv.base.tolerance import gpu_assert_close

        return gpu_assert_close
    if name in ("compile_kernel", "compile_module"):
        from pytest_gpuenv import rtc

        return getattr(rtc, name)
    if name == "KernelWarpSyncError":
        from pytest_gpuenv.rtc import KernelWarpSyncError

        return KernelWarpSyncError
    if name in __all__:  # the rest of __all__: the markers, as decorators (pytest imported when one is asked for)
        import pytest

        return getattr(pytest.mark, name)
    raise AttributeError(f"module 'pytest_gpuenv' has no attribute {name!r}")
