"""pytest-xdist integration (registered only when xdist is installed)."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from pytest_gpuenv._options import Settings
from pytest_gpuenv.model import GpuEnv


class XdistHooks:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_configure_node(self, node: Any) -> None:
        from pytest_gpuenv._state import get_env

        node.workerinput["gpuenv_env"] = get_env(self.config).to_dict()


def pin_worker(config: pytest.Config, env: GpuEnv, settings: Settings) -> Optional[dict[str, Any]]:
    return None
