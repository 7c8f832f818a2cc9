"""The checkout under test: where its folders are, and whether a child pytest finds the plugin by itself.

Every area of the suite (tests/<area>/) imports this: pytest puts tests/ on ``sys.path`` when it loads
tests/conftest.py, so the helper modules here (tests/_*.py) import by their plain names.
"""

from __future__ import annotations

import os
import pathlib

#: the repository root
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: tests/: the conftest.py and the helper modules every area imports
TESTS = os.path.join(REPO, "tests")
#: the kernels of the repository's examples (kernels/*.hip)
KERNELS = os.path.join(REPO, "kernels")
#: the test data: machine trees, the CPU executor's kernels, published kernels, CUDA samples
DATA = os.path.join(TESTS, "data")
#: the CPU executor's test kernels (tests/data/cpu_kernels/*.hip)
CPU_KERNELS = os.path.join(DATA, "cpu_kernels")
#: the hand-written machine trees, kept in the repository (tests/data/gpu-roots, plain files: see
#: _roots.materialize); GPUENV_TEST_ROOTS points the tests at another copy
GPU_ROOTS = pathlib.Path(os.environ.get("GPUENV_TEST_ROOTS") or os.path.join(DATA, "gpu-roots"))


def plugin_installed() -> bool:
    """Whether pytest loads the plugin through its ``pytest11`` entry point (``pip install -e .``); a
    checkout that is only on ``sys.path`` must be put on a child pytest's PYTHONPATH and named in its
    conftest (``pytest_plugins``)."""
    from importlib.metadata import entry_points

    eps = entry_points()  # a dict of lists before Python 3.10
    group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])  # type: ignore[attr-defined]
    return any(e.name == "gpuenv" for e in group)
