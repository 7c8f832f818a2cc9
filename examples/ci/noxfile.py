"""nox sessions for a project that uses pytest-gpuenv (copy into your noxfile.py).

``nox -s cpu`` anywhere; ``nox -s gpu`` on a GPU machine (it fails before any test when no GPU is usable);
``nox -s plan`` lists which GPU tests each runner profile would run or skip, without a GPU.

Where pytest-gpuenv comes from: ``PYTEST_GPUENV``, a pip requirement. Today it is not on a package index:
point it at a checkout or a wheel you built (``PYTEST_GPUENV=/path/to/pytest-gpuenv nox -s cpu``). After its
first release the default, ``pytest-gpuenv`` from PyPI, works as is (not published yet). torch comes from
``TORCH_INDEX_URL`` besides PyPI, by default PyTorch's CPU index (no multi-GB CUDA build where no GPU needs
it); on a GPU runner set it to your build's index (``https://download.pytorch.org/whl/cu128``, ``.../rocm6.4``).
"""

import os

import nox

PLUGIN = os.environ.get("PYTEST_GPUENV", "pytest-gpuenv") + "[xdist]"
TORCH_INDEX = ("--extra-index-url", os.environ.get("TORCH_INDEX_URL", "https://download.pytorch.org/whl/cpu"))


@nox.session
def cpu(session):
    """The suite as on a CPU-only runner: GPU tests skip (counted), kernels compile-checked and run on the CPU
    (an arch the local compiler does not know is not compile-checked, and a warning says so)."""
    session.install(*TORCH_INDEX, "torch")
    session.install(*TORCH_INDEX, "-e", ".", PLUGIN)
    session.run("pytest", "-p", "gpuenv", "-n", "auto", "-rs", "--gpuenv-backend=cpu",
                "--gpuenv-compile-archs=gfx90a,gfx942,sm_90", *session.posargs)


@nox.session
def gpu(session):
    """The GPU suite with perf budgets; stops at once when no GPU is usable (nox passes the environment,
    CUDA_VISIBLE_DEVICES and the like, through)."""
    session.install(*TORCH_INDEX, "-e", ".", PLUGIN)
    session.run("gpuenv", "info")
    session.run("pytest", "-p", "gpuenv", "-rs", "--gpuenv-require=gpu", "--gpuenv-perf=check", *session.posargs)


@nox.session
def plan(session):
    """Which GPU tests would run or skip on CPU-only, NVIDIA and AMD runners (no GPU needed)."""
    session.install(*TORCH_INDEX, "-e", ".", PLUGIN)
    session.run("pytest", "-p", "gpuenv", "--collect-only", "-q", "--gpuenv-plan",
                "--gpuenv-plan-profile=rocm:gfx90a:4x64GiB", *session.posargs)
