"""The package's layers as docs/development.md draws them: no import runs up a layer, no two folders import
each other, no folder imports another's private module (scripts/import_graph.py, also run by .ci/run)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest
from _checkout import REPO

ROOT = Path(REPO)


def _graph_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_package_keeps_its_layers(capsys: pytest.CaptureFixture[str]) -> None:
    assert _graph_tool().main(["--check", str(ROOT / "pytest_gpuenv")]) == 0, capsys.readouterr().out


def test_every_folder_of_the_package_is_in_a_layer() -> None:
    tool = _graph_tool()
    folders = {".".join(p.relative_to(ROOT / "pytest_gpuenv").parts) for p in (ROOT / "pytest_gpuenv").rglob("__init__.py")
               for p in [p.parent]}
    drawn = {unit for _, units in tool.LAYERS for unit in units}
    assert folders <= drawn, f"folders in no layer of scripts/import_graph.py: {sorted(folders - drawn)}"


def test_the_check_names_an_upward_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pkg = tmp_path / "pytest_gpuenv"
    for folder in ("base", "rtc"):
        os.makedirs(pkg / folder)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "base" / "model.py").write_text("from pytest_gpuenv.rtc import _cache\n")
    (pkg / "rtc" / "_cache.py").write_text("from pytest_gpuenv.base import model\n")
    assert _graph_tool().main(["--check", str(pkg)]) == 1
    out = capsys.readouterr().out
    assert "imports up a layer: 1\n  base.model:1 -> rtc._cache" in out
    assert "cycles between units: 1\n  base <-> rtc" in out
    assert "imports of another unit's private module: 1\n  base.model:1 -> rtc._cache" in out
