"""Sphinx configuration: Markdown pages (MyST) with the furo theme; the reference pages are written at
build time from the package's own tables by ``_ext/gpuenv_reference.py``."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))  # the checkout's package, installed or not

from pytest_gpuenv import __version__  # noqa: E402

project = "pytest-gpuenv"
author = "pytest-gpuenv developers"
copyright = "pytest-gpuenv developers"
release = version = __version__

extensions = ["myst_parser", "gpuenv_reference", "gpuenv_links"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_ext", "README.md"]
myst_enable_extensions = ["deflist"]
myst_heading_anchors = 3
html_theme = "furo"
html_title = f"pytest-gpuenv {release}"
# every internal link must resolve: a missing page or anchor is a warning, and the build runs with -W
nitpicky = True
