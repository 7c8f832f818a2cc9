"""nox sessions for a project that uses pytest-gpuenv (copy into your noxfile.py; replace OWNER and the tag).

``nox -s cpu`` anywhere; ``nox -s gpu`` on a GPU machine (it fails before any test when no GPU is usable);
``nox -s plan`` lists which GPU tests each runner profile would run or skip, without a GPU.
"""

import nox

PLUGIN = "pytest-gpuenv[xdist] @ git+https://github.com/OWNER/pytest-gpuenv@v0.1.0"


@nox.session
def cpu(session):
    """The suite as on a CPU-only runner: GPU tests skip (counted), kernels compile-checked and run on the CPU."""
    session.install("--index-url", "https://download.pytorch.org/whl/cpu", "torch")
    session.install("-e", ".", PLUGIN)
    session.run("pytest", "-p", "gpuenv", "-n", "auto", "-rs", "--gpuenv-backend=cpu",
                "--gpuenv-compile-archs=gfx90a,gfx942,sm_90", *session.posargs)


@nox.session
def gpu(session):
    """The GPU suite with perf budgets; stops at once when no GPU is usable (nox passes the environment,
    CUDA_VISIBLE_DEVICES and the like, through)."""
    session.install("-e", ".", PLUGIN)
    session.run("gpuenv", "info")
    session.run("pytest", "-p", "gpuenv", "-rs", "--gpuenv-require=gpu", "--gpuenv-perf=check", *session.posargs)


@nox.session
def plan(session):
    """Which GPU tests would run or skip on CPU-only, NVIDIA and AMD runners (no GPU needed)."""
    session.install("-e", ".", PLUGIN)
    session.run("pytest", "-p", "gpuenv", "--collect-only", "-q", "--gpuenv-plan",
                "--gpuenv-plan-profile=rocm:gfx90a:4x64GiB", *session.posargs)
