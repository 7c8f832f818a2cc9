"""A pytest plugin of its own that registers the GPU markers and does nothing else: ``-p
pytest_gpuenv.marks.register``. A suite written with the markers keeps collecting (``--strict-markers``,
``filterwarnings = error``) where the plugin is installed but turned off (``-p no:gpuenv``); the marks then
skip nothing. Where the plugin is active this does nothing: the plugin registers them, and reads them.

The plugin never imports this module, so pytest can load it at any point (``-p``, a conftest's
``pytest_plugins``) without warning that it was imported before it could be rewritten.
"""

import sys

import pytest

from pytest_gpuenv.marks import markers


@pytest.hookimpl(trylast=True)  # as the plugin's: after the ini file and the conftests loaded at start
def pytest_configure(config: pytest.Config) -> None:
    plugin = sys.modules.get("pytest_gpuenv.plugin")
    if plugin is not None and config.pluginmanager.is_registered(plugin):
        return
    markers.register_aliases(config)
    markers.register_unprefixed(config)
