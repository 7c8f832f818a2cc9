"""GPU-only Python packages hidden from imports under ``--gpuenv-backend=cpu``.

Hiding the GPUs (visible-devices variables) is not enough for suites that gate on importability:
``pytest.importorskip("cupy")`` succeeds on a GPU machine whose GPUs are hidden, and the tests then fail
with ``cudaErrorNoDevice``, where a real CPU runner, which has no CuPy, skips them. ``install`` puts a
meta-path finder (``HiddenModules``, kept by the session) first on ``sys.meta_path`` that raises
``ModuleNotFoundError`` naming the option for each package of ``DEFAULT_HIDDEN`` plus the ini option
``gpuenv_hide_modules`` (and their submodules); its ``uninstall`` removes it (``pytest_unconfigure``). Each
process installs its own (xdist workers run ``pytest_configure`` too). A package imported before the plugin
configured stays importable, and the finder's ``header_line`` names it.

Not hidden by default, because each imports and answers correctly on a CPU-only runner (or is used by
this plugin): ``torch`` (CPU builds), ``numba`` and ``numba.cuda`` (imports without a GPU, has a CPU
simulator; ``cuda.is_available()`` is False once the GPUs are hidden), ``cuda`` / ``cuda.bindings`` /
``cuda.core`` (cuda-python: bindings that import anywhere; NVRTC compile checks use them), ``hip``
(hip-python, likewise), ``pynvml`` (NVML reports "driver not loaded" cleanly), ``triton`` (has a CPU
interpreter), ``jax`` (falls back to the CPU).
"""

from __future__ import annotations

import importlib.abc
import re
import sys
from typing import Any, Iterable, Optional, Sequence

import pytest

from pytest_gpuenv.base.model import safe_repr

#: packages that work only with a GPU (CuPy, PyCUDA, RAPIDS): a CPU-only runner does not have them,
#: and where installed they import fine, then fail at the first GPU call once the GPUs are hidden
DEFAULT_HIDDEN = (
    "cupy",
    "cupyx",
    "cupy_backends",
    "pycuda",
    "cudf",
    "dask_cudf",
    "pylibcudf",
    "cuml",
    "cugraph",
    "rmm",
)
_NAME = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"  # compiled by re on first use


class HiddenModules(importlib.abc.MetaPathFinder):
    """Raises ``ModuleNotFoundError`` for the hidden packages and their submodules."""

    def __init__(self, names: Iterable[str], already: Iterable[str] = ()) -> None:
        self.names = tuple(names)
        #: wanted hidden, but imported before the finder was installed (so left alone)
        self.already = tuple(already)

    def hides(self, fullname: str) -> bool:
        return any(fullname == n or fullname.startswith(n + ".") for n in self.names)

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None, target: Any = None) -> None:
        if self.hides(fullname):
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (hidden by --gpuenv-backend=cpu: a GPU-only package, absent on a "
                "CPU-only runner)",
                name=fullname,
            )
        return None

    def uninstall(self) -> None:
        """Take the finder off ``sys.meta_path`` (``pytest_unconfigure``)."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def header_line(self) -> str:
        """``gpuenv: hidden from imports by --gpuenv-backend=cpu: cupy, ...``."""
        line = "gpuenv: hidden from imports by --gpuenv-backend=cpu: " + ", ".join(self.names)
        if self.already:
            line += f" (already imported, so not hidden: {', '.join(self.already)})"
        return line


def parse_names(value: Any, where: str) -> list[str]:
    """The ini option ``gpuenv_hide_modules``: module names, one per line or separated by commas or
    spaces (or a TOML array). A name that is not a dotted Python name is a ``pytest.UsageError``."""
    items = value if isinstance(value, (list, tuple)) else [value or ""]
    names = [p for item in items for p in str(item).replace(",", " ").split()]
    for name in names:
        if not re.fullmatch(_NAME, name):
            raise pytest.UsageError(
                f"gpuenv: invalid gpuenv_hide_modules entry {safe_repr(name, 200)} from {where}; "
                "expected a module name such as cupy or numba.cuda"
            )
    return names


def install(extra: Iterable[str]) -> HiddenModules:
    """Hide ``DEFAULT_HIDDEN`` and ``extra`` (except packages already imported) until ``uninstall``."""
    wanted = list(dict.fromkeys([*DEFAULT_HIDDEN, *extra]))
    finder = HiddenModules([n for n in wanted if sys.modules.get(n) is None],
                           [n for n in wanted if sys.modules.get(n) is not None])
    sys.meta_path.insert(0, finder)
    return finder
