import os
import pathlib

import pytest

pytest_plugins = ["pytester"]

REPO = pathlib.Path(__file__).resolve().parent.parent
#: the hand-written machine trees (../shared/gpu-roots beside the checkout)
GPU_ROOTS = pathlib.Path(os.environ.get("GPUENV_TEST_ROOTS", REPO.parent / "shared" / "gpu-roots"))


@pytest.fixture
def gpu_roots() -> pathlib.Path:
    if not GPU_ROOTS.is_dir():
        pytest.skip(f"file trees not found at {GPU_ROOTS} (set GPUENV_TEST_ROOTS)")
    return GPU_ROOTS
