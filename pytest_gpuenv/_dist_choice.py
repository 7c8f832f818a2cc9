"""``--dist gpu``: the choice added to pytest-xdist's ``--dist`` (``DistChoice``, registered by every run), and
``--gpuenv-dist`` checked where it cannot take effect (``check_dist_request``). Where a test can run is
``_routing``'s, loaded only by runs that route.
"""

from __future__ import annotations

from typing import Any

import pytest

#: the ``--dist`` value
DIST = "gpu"


class DistChoice:
    """Adds ``gpu`` to xdist's ``--dist`` choices once xdist has registered its options."""

    def __init__(self, parser: pytest.Parser) -> None:
        self.parser = parser

    def pytest_plugin_registered(self, plugin: Any, plugin_name: str, manager: Any) -> None:
        if plugin_name != "xdist":
            return
        for option in self.parser.getgroup("xdist").options:
            attrs = option.attrs()
            if "--dist" in option.names() and isinstance(attrs.get("choices"), list) and DIST not in attrs["choices"]:
                attrs["choices"] = [*attrs["choices"], DIST]


def check_dist_request(config: pytest.Config) -> None:
    """``--gpuenv-dist`` where it cannot take effect is a usage error, not a run quietly scheduled otherwise:
    without pytest-xdist (not installed, or ``-p no:xdist``), or beside another explicit ``--dist`` mode."""
    if not config.pluginmanager.hasplugin("xdist"):
        raise pytest.UsageError("gpuenv: --gpuenv-dist from command line needs pytest-xdist, which is not "
                                "loaded here (not installed, or disabled with -p no:xdist)")
    mode = config.getoption("dist", None)
    if mode not in (None, "no", "load", DIST):  # load: what -n alone sets
        raise pytest.UsageError(f"gpuenv: --gpuenv-dist from command line conflicts with --dist {mode}: "
                                f"give one of them (--gpuenv-dist is --dist {DIST})")
