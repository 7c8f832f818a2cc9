"""What every area of the suite uses: machine trees, the CPU executor's cache and warp sizes, FIFOs, masks.

Each area's own fixtures are in its folder's conftest.py (tests/<area>/conftest.py); the helper modules every
area imports are tests/_*.py.
"""

import importlib.util
import os
import pathlib
import shutil
import time

import pytest
from _checkout import GPU_ROOTS
from _roots import materialize, new_root_dir

# pytester's in-process runs drop modules their tests imported; importing torch a second time in one
# process then fails ("function '_has_torch_function' already has a docstring"). Import it once up
# front where it is installed, so it is never dropped. (The plugin itself never imports torch.)
if importlib.util.find_spec("torch") is not None:
    import torch  # noqa: F401


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
