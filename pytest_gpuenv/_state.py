"""Per-session state shared between hooks and fixtures, kept in ``config.stash``."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_gpuenv._options import Settings
from pytest_gpuenv.model import GpuEnv

ENV_KEY = pytest.StashKey[GpuEnv]()
SETTINGS_KEY = pytest.StashKey[Settings]()
#: one dict per performance measurement of this process (see pytest_gpuenv.perf)
PERF_RECORDS_KEY = pytest.StashKey[list]()
#: hardware skips of this process: list of (nodeid, category, reason)
SKIPS_KEY = pytest.StashKey[list]()
#: what the xdist worker was given: {"gpus": [...], "var": "CUDA_VISIBLE_DEVICES", "value": "0"}
WORKER_GPU_KEY = pytest.StashKey[dict]()


def get_env(config: pytest.Config) -> GpuEnv:
    """The session's environment model (detected once in pytest_configure)."""
    return config.stash[ENV_KEY]


def get_settings(config: pytest.Config) -> Settings:
    return config.stash[SETTINGS_KEY]


def perf_records(config: pytest.Config) -> list[dict[str, Any]]:
    return config.stash.setdefault(PERF_RECORDS_KEY, [])


def skip_records(config: pytest.Config) -> list[tuple[str, str, str]]:
    return config.stash.setdefault(SKIPS_KEY, [])
