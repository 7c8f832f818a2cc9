"""``--gpuenv-leak-check[=fail|warn]`` (ini ``gpuenv_leak_check``) and ``@gpuenv_leak_check``: GPU memory
before each test's call and after its teardown, on every GPU torch holds a context on.

Two figures per device, as PyTorch's own ``CudaMemoryLeakCheck`` reads them: the bytes torch's caching
allocator hands out (``torch.cuda.memory_allocated``, after a sync, with cuBLAS's cached workspaces
released first: torch keeps one per handle and would count it as a leak), and the bytes in use on the
device outside torch's reservation (``cudaMemGetInfo``/``hipMemGetInfo`` through ``torch.cuda.mem_get_info``,
less ``memory_reserved``): a raw ``cuMemAlloc``/``hipMalloc`` that is never freed. Any growth of the first
is a leak; the second must grow past ``--gpuenv-leak-threshold`` (default 512 MiB: library handles and
lazily loaded kernels take driver memory outside torch the first time a test uses them, well under that
for cuBLAS and cuDNN; figures and the check's cost per test: docs/how-to/adopt.md, "Find GPU memory left
behind"). A leak errors the test at teardown (or warns), naming the device and the bytes. Under xdist
each worker checks its own GPUs.

Nothing is imported and no GPU is touched here unless the test's process already initialised CUDA through
torch. The module is a subsystem behind a boundary: with the option off and no marker in the run, it is not
imported and no hook of it runs per test.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple, Optional

import pytest

from pytest_gpuenv.base.model import LEAK_MODES as MODES
from pytest_gpuenv.base.model import format_size, parse_size, safe_repr
from pytest_gpuenv.marks.markers import LEAK_CHECK as MARKER


class Leak(NamedTuple):
    device: int
    torch_bytes: int
    outside_bytes: int


def configure(config: pytest.Config, mode: str, threshold: int) -> None:
    """Register the checker: where ``--gpuenv-leak-check`` is on (``mode``, resolved with its threshold), or, with
    it off, at collection where some test carries ``@gpuenv_leak_check`` (``session.runtest.modify_items``)."""
    config.pluginmanager.register(LeakChecker(mode, threshold), "gpuenv-leak-check")


def _mark_settings(item: pytest.Item, mode: str, threshold: int) -> tuple[str, int]:
    """The test's mode and threshold after its ``@gpuenv_leak_check``; a bad argument fails the test."""
    m = item.get_closest_marker(MARKER)
    if m is None:
        return mode, threshold
    try:
        extra = set(m.kwargs) - {"mode", "threshold"}
        if extra or len(m.args) > 1:
            raise ValueError("takes mode= (fail, warn, off) and threshold= only")
        want = str(m.args[0] if m.args else m.kwargs.get("mode", "fail")).lower()
        if want not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {safe_repr(want)}")
        size = m.kwargs.get("threshold")
        return want, parse_size(size) if size is not None else threshold
    except ValueError as exc:
        why = str(exc)
    call = ", ".join([safe_repr(a) for a in m.args] + [f"{k}={safe_repr(v)}" for k, v in m.kwargs.items()])
    pytest.fail(f"invalid marker {MARKER}({call}): {why}", pytrace=False)


def snapshot() -> Optional[dict[int, tuple[int, int]]]:
    """device -> (bytes torch's allocator hands out, bytes in use outside torch's reservation); None where
    this process has not initialised CUDA/HIP through torch (then no test of it can have leaked there)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()
    out = {}
    current = torch.cuda.current_device()
    for i in range(torch.cuda.device_count()):
        if i != current and torch.cuda.memory_reserved(i) == 0:
            continue  # (mem_get_info would create a context on a device this process never used)
        torch.cuda.synchronize(i)
        free, total = torch.cuda.mem_get_info(i)
        out[i] = (torch.cuda.memory_allocated(i), total - free - torch.cuda.memory_reserved(i))
    return out


def leaks(before: Optional[dict[int, tuple[int, int]]], after: Optional[dict[int, tuple[int, int]]],
          threshold: int) -> list[Leak]:
    """What grew between two snapshots: any torch growth; outside-torch growth past ``threshold``."""
    out = []
    for dev, (alloc, outside) in (after or {}).items():
        alloc0, outside0 = (before or {}).get(dev, (0, None))
        grew = alloc - alloc0
        # (no 'before' outside torch: CUDA started during this test, its context is no leak)
        raw = outside - outside0 if outside0 is not None else 0
        if grew > 0 or raw > threshold:
            out.append(Leak(dev, max(grew, 0), raw if raw > threshold else 0))
    return out


def message(nodeid: str, found: list[Leak], threshold: int) -> str:
    parts = []
    for leak in found:
        bits = []
        if leak.torch_bytes:
            bits.append(f"{format_size(leak.torch_bytes)} ({leak.torch_bytes} bytes) still allocated through torch")
        if leak.outside_bytes:
            bits.append(f"{format_size(leak.outside_bytes)} more in use outside torch (driver memory info; "
                        f"threshold {format_size(threshold)})")
        parts.append(f"cuda:{leak.device}: " + "; ".join(bits))
    return f"gpuenv leak check: {nodeid} leaked GPU memory: " + " | ".join(parts)


_BEFORE: pytest.StashKey[Any] = pytest.StashKey()


class LeakChecker:
    def __init__(self, mode: str, threshold: int) -> None:
        self.mode, self.threshold = mode, threshold

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """A bad ``@gpuenv_leak_check`` argument errors the test before it runs."""
        if MARKER in item.keywords:
            _mark_settings(item, self.mode, self.threshold)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        mode, _threshold = _mark_settings(item, self.mode, self.threshold)
        if mode != "off":
            item.stash[_BEFORE] = snapshot()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> Any:
        result = yield
        if _BEFORE not in item.stash:
            return result
        before = item.stash[_BEFORE]
        del item.stash[_BEFORE]
        mode, threshold = _mark_settings(item, self.mode, self.threshold)
        found = leaks(before, snapshot(), threshold)
        if found:
            text = message(item.nodeid, found, threshold)
            if mode == "fail":
                pytest.fail(text, pytrace=False)
            item.warn(pytest.PytestWarning(text))
        return result
