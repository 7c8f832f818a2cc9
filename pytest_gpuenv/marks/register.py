"""A pytest plugin of its own that registers the GPU markers and does nothing else: ``-p
pytest_gpuenv.marks.register``. A suite written with the markers keeps collecting (``--strict-markers``,
``filterwarnings = error``) where the plugin is installed but turned off (``-p no:gpuenv``); a test marked
with one that needs a GPU (``markers.GPU_MARKERS``, by name or alias) is skipped, saying the plugin is not
active (nothing here can tell whether the machine can run it), as the conftest snippet of
docs/how-to/adopt.md does. Where the plugin is active this does nothing: the plugin registers them, and
reads them.

The plugin never imports this module, so pytest can load it at any point (``-p``, a conftest's
``pytest_plugins``) without warning that it was imported before it could be rewritten.
"""

import sys

import pytest

from pytest_gpuenv.marks import markers


def _plugin_active(config: pytest.Config) -> bool:
    plugin = sys.modules.get("pytest_gpuenv.plugin")
    return plugin is not None and config.pluginmanager.is_registered(plugin)


@pytest.hookimpl(trylast=True)  # as the plugin's: after the ini file and the conftests loaded at start
def pytest_configure(config: pytest.Config) -> None:
    if _plugin_active(config):
        return
    markers.register_aliases(config)
    markers.register_unprefixed(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _plugin_active(config):
        return
    names = {*markers.GPU_MARKERS, *(markers.PREFIX + n for n in markers.GPU_MARKERS)}
    skip = pytest.mark.skip(reason="needs pytest-gpuenv, which is not active in this run")
    for item in items:
        if any(m.name in names for m in item.iter_markers()):
            item.add_marker(skip)
