"""``@gpu_dtypes("float16", "bfloat16", "float8_e4m3fn")``: a test run once per dtype, skipped on a GPU that
cannot compute in it.

``parametrize`` (``pytest_generate_tests``) gives the test's ``dtype`` argument one value per name, with the
name as the id: the ``torch.dtype`` where the test's module has imported torch (the plugin never imports it),
else the name, which numpy and ``getattr(torch, name)`` take. ``mark_items`` (collection) gives each item that
runs on a GPU (``base.conditions.device_for``: not one whose ``torch_device`` is ``cpu``, nor any on a runner
without a usable GPU, where the CPU executor and CPU torch compute every dtype) the
``gpuenv_requires_capability`` mark of its dtype (``CAPABILITY``), so the skip is made, explained and counted
as the marker's (``requires bf16: sm_75 has no bf16 arithmetic (Turing)``), per host in a run over several.

fp8 follows the capability table's encodings: the OCP types (``float8_e4m3fn``, ``float8_e5m2``) need
``fp8_ocp`` (sm_89+, gfx950, gfx12), the FNUZ types ``fp8_fnuz`` (gfx940-942). ``fp64_full=True`` skips
float64 where it runs at a fraction of the float32 rate (capability ``fp64_full``).
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple, Optional

import pytest

from pytest_gpuenv.base.conditions import device_for, torch_device_of
from pytest_gpuenv.base.model import GpuEnv, safe_repr

MARKER = "gpu_dtypes"
#: how ``pytest --markers`` shows the call, and what it says of it
SIGNATURE = f"{MARKER}(*dtypes, fp64_full=False)"
HELP = ("run the test once per dtype (its 'dtype' argument: a torch.dtype where the module imports torch, else the "
        "name; ids are the names) and skip, on each GPU, the dtypes its capabilities exclude (bf16, fp8; float64 "
        "at a fraction of the float32 rate with fp64_full=True).")
LINE = f"{SIGNATURE}: {HELP}"
#: dtype -> the capability (``base.capabilities.NAMES``) a GPU needs to compute in it (None: every GPU)
CAPABILITY: dict[str, Optional[str]] = {
    "float16": "fp16", "bfloat16": "bf16", "float32": None, "float64": None,
    "float8_e4m3fn": "fp8_ocp", "float8_e5m2": "fp8_ocp", "float8_e4m3fnuz": "fp8_fnuz", "float8_e5m2fnuz": "fp8_fnuz",
    "complex64": None, "complex128": None, "int8": None, "int16": None, "int32": None, "int64": None,
    "uint8": None, "bool": None,
}
_ERRORS = pytest.StashKey[dict[str, str]]()
#: the node ids of the test functions ``parametrize`` saw with the mark: ``mark_items`` looks at their items only
_MARKED = pytest.StashKey[set[str]]()


class Spec(NamedTuple):
    """A parsed ``gpu_dtypes`` mark: the canonical names, in the order given, and the float64 option."""

    names: tuple[str, ...]
    fp64_full: bool

    def capability(self, name: str) -> Optional[str]:
        return "fp64_full" if name == "float64" and self.fp64_full else CAPABILITY.get(name)


def _name(value: Any) -> str:
    from pytest_gpuenv.base.tolerance import canonical_dtype  # (the tolerance profiles: where a mark is read)

    text = value if isinstance(value, str) else str(value) if type(value).__name__ == "dtype" else None
    name = canonical_dtype(text) if text is not None and len(text) <= 60 else None
    if name not in CAPABILITY:
        raise ValueError(f"unknown dtype {safe_repr(value)} (expected one of {', '.join(CAPABILITY)}, "
                         "or a torch dtype)")
    return name


def parse(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Spec:
    """The mark's arguments; ``ValueError`` naming the bad one."""
    extra = set(kwargs) - {"fp64_full"}
    if extra:
        raise ValueError(f"unexpected keyword argument(s) {', '.join(sorted(map(str, extra)))}")
    fp64_full = kwargs.get("fp64_full", False)
    if not isinstance(fp64_full, bool):
        raise ValueError(f"fp64_full must be True or False, got {safe_repr(fp64_full)}")
    if not args:
        raise ValueError("needs at least one dtype")
    names = tuple(_name(a) for a in args)
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise ValueError(f"dtype {dup} is given twice")
    return Spec(names, fp64_full)


def _call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    return ", ".join([safe_repr(a) for a in args] + [f"{k}={safe_repr(v)}" for k, v in kwargs.items()])


def spec_of(node: Any) -> Spec:
    """The closest ``gpu_dtypes`` mark of a test; ``ValueError`` naming the marker and the bad argument."""
    mark = node.get_closest_marker(MARKER)
    try:
        return parse(tuple(mark.args), dict(mark.kwargs))
    except ValueError as exc:
        raise ValueError(f"invalid marker {MARKER}({_call(tuple(mark.args), dict(mark.kwargs))}): {exc}") from None
    except Exception as exc:  # an argument's own __str__ or __eq__ raised
        raise ValueError(f"invalid marker {MARKER}({_call(tuple(mark.args), dict(mark.kwargs))}): an argument "
                         f"raised {type(exc).__name__}") from None


def parametrize(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``dtype`` by the test's ``gpu_dtypes`` mark. A bad mark, or a test without a ``dtype``
    argument, is kept (``errors``) to fail that test alone, at setup."""
    if metafunc.definition.get_closest_marker(MARKER) is None:
        return
    metafunc.config.stash.setdefault(_MARKED, set()).add(metafunc.definition.nodeid)
    try:
        spec = spec_of(metafunc.definition)
        if "dtype" not in metafunc.fixturenames:
            raise ValueError(f"@{MARKER} parametrizes the test's 'dtype' argument, which {metafunc.function.__name__} "
                             "does not take")
    except ValueError as exc:
        metafunc.config.stash.setdefault(_ERRORS, {})[metafunc.definition.nodeid] = str(exc)
        if "dtype" in metafunc.fixturenames:
            metafunc.parametrize("dtype", [None], ids=["invalid"])
        return
    torch = sys.modules.get("torch")
    params = []
    for name in spec.names:
        value = getattr(torch, name, None) if torch is not None else name
        if value is None:
            version = getattr(torch, "__version__", "?")
            params.append(pytest.param(name, id=name, marks=pytest.mark.skip(
                reason=f"torch {version} has no dtype {name}")))
        else:
            params.append(pytest.param(value, id=name))
    metafunc.parametrize("dtype", params)


def dtype_of(item: Any) -> Optional[str]:
    """The canonical name of a ``gpu_dtypes`` test's dtype; None for any other test."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "dtype" not in callspec.params or item.get_closest_marker(MARKER) is None:
        return None
    value = callspec.params["dtype"]
    try:
        return _name(value)
    except ValueError:
        return None


def mark_items(items: list[pytest.Item], env: GpuEnv) -> list[tuple[pytest.Item, str]]:
    """Give each ``gpu_dtypes`` item that runs on a GPU its dtype's capability mark; returns the items whose
    mark is bad, with the error (the caller fails them at setup)."""
    marked = items[0].config.stash.get(_MARKED, set()) if items else set()
    if not marked:  # most suites: no test has the mark
        return []
    errors = items[0].config.stash.get(_ERRORS, {})
    bad = []
    for item in items:
        # the node id of the test function parametrize saw (a folder's name may hold "[" too)
        function = (f"{item.parent.nodeid}::{item.originalname}"
                    if isinstance(item, pytest.Function) and item.parent is not None else "")
        if function not in marked or item.get_closest_marker(MARKER) is None:
            continue
        error = errors.get(function)
        if error is not None:
            bad.append((item, error))
            continue
        name = dtype_of(item)
        if name is None or device_for(env, torch_device_of(item)) is None:
            continue
        capability = spec_of(item).capability(name)
        if capability is not None:
            item.add_marker(pytest.mark.gpuenv_requires_capability(capability))
    return bad
