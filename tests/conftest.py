import importlib.util
import os
import pathlib
import shutil
import time

import pytest
from _roots import materialize, new_root_dir

# pytester's in-process runs drop modules their tests imported; importing torch a second time in one
# process then fails ("function '_has_torch_function' already has a docstring"). Import it once up
# front where it is installed, so it is never dropped. (The plugin itself never imports torch.)
if importlib.util.find_spec("torch") is not None:
    import torch  # noqa: F401

REPO = pathlib.Path(__file__).resolve().parent.parent
#: the hand-written machine trees, kept in the repository (tests/data/gpu-roots, plain files: see
#: _roots.materialize); GPUENV_TEST_ROOTS points the tests at another copy
GPU_ROOTS = pathlib.Path(os.environ.get("GPUENV_TEST_ROOTS") or REPO / "tests" / "data" / "gpu-roots")


@pytest.fixture
def no_poison():
    """A clean sticky-error record for the test, and again after it (nothing real was poisoned)."""
    from pytest_gpuenv.runtime import sticky as _sticky

    _sticky.reset()
    yield
    _sticky.reset()


@pytest.fixture
def gpu_roots() -> pathlib.Path:
    if not GPU_ROOTS.is_dir():
        pytest.skip(f"file trees not found at {GPU_ROOTS} (set GPUENV_TEST_ROOTS)")
    return GPU_ROOTS


@pytest.fixture(scope="session")
def roots(request):
    """scenario name -> a materialized copy (made once per session, removed at the end)."""
    if not GPU_ROOTS.is_dir():
        pytest.skip(f"file trees not found at {GPU_ROOTS} (set GPUENV_TEST_ROOTS)")
    made: dict[str, pathlib.Path] = {}

    def get(name: str) -> pathlib.Path:
        if name not in made:
            made[name] = materialize(GPU_ROOTS / name, new_root_dir())
        return made[name]

    yield get
    for path in made.values():
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def cpu_cache(tmp_path_factory):
    """A kernel cache for one CPU-executor test module."""
    return str(tmp_path_factory.mktemp("cpu-cache"))


@pytest.fixture(params=[64, 32], ids=["wave64", "wave32"])
def warp(request) -> int:
    """Each CPU-executor test at both wavefront widths."""
    return int(request.param)


@pytest.fixture
def fifo():
    """``fifo(path)``: a FIFO at ``path``. Code that wrongly opens it for reading would block for good; for
    up to a minute a thread opens its other end whenever a reader waits, and closes it at once, so such
    code reads an empty file and the test fails instead of hanging."""
    import errno
    import threading

    stop = threading.Event()

    def rescue(path: str) -> None:
        deadline = time.monotonic() + 60
        while not stop.wait(0.05) and time.monotonic() < deadline:
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError as exc:
                if exc.errno not in (errno.ENXIO, errno.ENOENT):
                    return

    def make(path) -> None:
        os.mkfifo(path)
        threading.Thread(target=rescue, args=(str(path),), daemon=True).start()

    yield make
    stop.set()


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """An AMD machine tree with four MI300X-like GPUs (``_machines.amd_machine(root, 4)``), one per module."""
    from _machines import AMD4, amd_machine

    root = tmp_path_factory.mktemp("amd4") / "machine"
    assert amd_machine(root, 4) == AMD4
    return root


@pytest.fixture
def no_outer_masks(monkeypatch):
    """The trees are the machines: drop masks set around this run (an outer xdist worker's, say)."""
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def hosts_isolated(no_outer_masks, monkeypatch, tmp_path):
    """No masks or root from around this run; seat and perf locks in this test's own directory."""
    for var in ("GPUENV_ROOT", "GPUENV_WORKER_GPUS", "GPUENV_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPUENV_LOCK_DIR", str(tmp_path / "locks"))


@pytest.fixture
def fresh_compile_cache(monkeypatch):
    """Each test starts with no cache object and nothing warned yet in this process."""
    from pytest_gpuenv.rtc import cache as _cache

    monkeypatch.setattr(_cache, "_WARNED", set())
    monkeypatch.setattr(_cache, "_SHARED", {})
