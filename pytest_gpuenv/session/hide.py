"""GPU-only Python packages hidden from imports under ``--gpuenv-backend=cpu``.

Hiding the GPUs (visible-devices variables) is not enough for suites that gate on importability:
``pytest.importorskip("cupy")`` succeeds on a GPU machine whose GPUs are hidden, and the tests then fail
with ``cudaErrorNoDevice``, where a real CPU runner, which has no CuPy, skips them. ``install`` makes each
package of ``DEFAULT_HIDDEN`` plus the ini option ``gpuenv_hide_modules`` look absent, as Python's import
system lets a program do: a ``None`` in ``sys.modules`` under its name (``HiddenModules``, kept by the
session). ``import cupy`` then raises ``ModuleNotFoundError`` and ``importlib.util.find_spec("cupy")``
returns None, as on a machine without it (a finder that raised instead broke suites gating on
``find_spec(...) is None`` at collection); a submodule of a hidden package is hidden with it, and a hidden
submodule (``numba.cuda``) leaves its parent importable. ``uninstall`` takes the entries out again
(``pytest_unconfigure``). Each process installs its own (xdist workers run ``pytest_configure`` too). A
package imported before the plugin configured stays importable, and ``header_line`` names it.

Not hidden by default, because each imports and answers correctly on a CPU-only runner (or is used by
this plugin): ``torch`` (CPU builds), ``numba`` and ``numba.cuda`` (imports without a GPU, has a CPU
simulator; ``cuda.is_available()`` is False once the GPUs are hidden), ``cuda`` / ``cuda.bindings`` /
``cuda.core`` (cuda-python: bindings that import anywhere; NVRTC compile checks use them), ``hip``
(hip-python, likewise), ``pynvml`` (NVML reports "driver not loaded" cleanly), ``triton`` (has a CPU
interpreter), ``jax`` (falls back to the CPU).
"""

from __future__ import annotations

import re
import sys
from typing import Any, Iterable

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


class HiddenModules:
    """The hidden packages: a ``None`` in ``sys.modules`` for each, from ``hide`` until ``uninstall``."""

    def __init__(self, names: Iterable[str], already: Iterable[str] = ()) -> None:
        self.names = tuple(names)
        #: wanted hidden, but imported before the plugin configured (so left alone)
        self.already = tuple(already)

    def hides(self, fullname: str) -> bool:
        return any(fullname == n or fullname.startswith(n + ".") for n in self.names)

    def hide(self) -> None:
        for name in self.names:
            sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # Python's "absent" marker

    def uninstall(self) -> None:
        """Make the hidden packages importable again (``pytest_unconfigure``)."""
        for name in self.names:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]

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
    hidden = HiddenModules([n for n in wanted if sys.modules.get(n) is None],
                           [n for n in wanted if sys.modules.get(n) is not None])
    hidden.hide()
    return hidden
