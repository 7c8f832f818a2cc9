"""Which marker names mean the plugin's markers in this run.

Every marker has a prefixed alias, ``gpuenv_requires_gpu`` ... ``gpuenv_perf``, registered at configure
time and always read as the plugin's marker. An unprefixed name (``requires_gpu``, ``perf``) is the
plugin's only where the suite does not register that name itself (ini ``markers`` lines, or
``config.addinivalue_line("markers", ...)`` in a conftest or plugin): a suite whose ``perf`` means "slow"
keeps it, and the plugin neither registers nor evaluates it. ``register_aliases`` runs in the plugin's
(first) ``pytest_configure``; ``register_unprefixed`` runs last, once the ini file and the conftests loaded
at start have registered theirs, and registers the plugin's lines for the names nobody else did (so
``--strict-markers`` accepts both kinds). ``refresh`` looks again at collection, when conftests in
subdirectories have been loaded too. ``plugin_marks(item)`` gives an item's marks that are the plugin's,
named without the prefix, for ``markers.check_marks`` and ``_skipping``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import pytest

from pytest_gpuenv.markers import MARKER_NAMES, MARKERS, PREFIXED_ONLY

PREFIX = "gpuenv_"


class PluginMark(NamedTuple):
    """One of an item's marks that means a plugin marker; ``name`` without the prefix."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


class MarkerNames:
    """The run's marker names (plain class: cheaper to create than a dataclass at every plugin load)."""

    def __init__(self) -> None:
        #: the markers lines the plugin registered (so they are not taken for the suite's)
        self.ours: set[str] = set()
        #: unprefixed names the suite registers itself, in table order; ``announced``: those the header named
        self.left: list[str] = []
        self.announced: list[str] = []

    def owns(self, name: str) -> bool:
        return name in MARKER_NAMES and name not in self.left


_KEY: pytest.StashKey[MarkerNames] = pytest.StashKey()


def _names(config: pytest.Config) -> MarkerNames:
    if _KEY not in config.stash:
        config.stash[_KEY] = MarkerNames()
    return config.stash[_KEY]


def _suite_names(config: pytest.Config, state: MarkerNames) -> list[str]:
    """The plugin's unprefixed names that some other line in ``markers`` registers, in table order."""
    lines = [str(line) for line in config.getini("markers")]
    theirs = {line.split(":")[0].split("(")[0].strip() for line in lines if line not in state.ours}
    return [name for name in MARKER_NAMES if name in theirs]


def register_aliases(config: pytest.Config) -> None:
    """Register ``gpuenv_<name>`` for every marker, with its signature line."""
    state = _names(config)
    for _name, line in MARKERS:
        alias = PREFIX + line.replace("'not perf'", f"'not {PREFIX}perf'")
        state.ours.add(alias)
        config.addinivalue_line("markers", alias)
    for line in PREFIXED_ONLY:
        state.ours.add(line)
        config.addinivalue_line("markers", line)


def register_unprefixed(config: pytest.Config) -> None:
    """Register the plain names the suite has not registered itself; remember the ones it has."""
    state = _names(config)
    state.left = _suite_names(config, state)
    state.announced = list(state.left)
    for name, line in MARKERS:
        if name not in state.left:
            state.ours.add(line)
            config.addinivalue_line("markers", line)


def refresh(config: pytest.Config) -> None:
    """Look again once the collection has loaded every conftest: a name registered late is the suite's."""
    state = _names(config)
    state.left = _suite_names(config, state)


def owns(config: pytest.Config, name: str) -> bool:
    """Whether the unprefixed ``name`` means the plugin's marker in this run."""
    return _names(config).owns(name)


def plugin_marks(item: Any, parents: Optional[dict[Any, list[PluginMark]]] = None) -> list[PluginMark]:
    """The item's marks that mean plugin markers (closest first, the order of ``item.iter_markers()``), named
    without the prefix. The walk up the nodes is written out: pytest's three nested generators cost a few
    microseconds a test, and this runs for every test at collection and again at setup. ``parents``: the
    marks of each parent already walked (filled here), for one pass over items whose parents gain no mark
    meanwhile (collection): each module is walked once, not once per test."""
    out: list[PluginMark] = []
    node: Any = item
    while node is not None:
        if parents is not None and node is not item:
            chain = parents.get(node)
            if chain is None:
                chain = parents[node] = plugin_marks(node)
            return out + chain
        for m in node.own_markers:
            if m.name.startswith(PREFIX) and m.name[len(PREFIX):] in MARKER_NAMES:
                out.append(PluginMark(m.name[len(PREFIX):], tuple(m.args), dict(m.kwargs)))
            elif m.name in MARKER_NAMES and _names(item.config).owns(m.name):
                out.append(PluginMark(m.name, tuple(m.args), dict(m.kwargs)))
        node = node.parent
    return out


def _text(names: list[str]) -> str:
    return (f"markers {', '.join(names)} left to the suite (it registers them itself); pytest-gpuenv's: "
            f"{', '.join(PREFIX + n for n in names)}")


def header_line(config: pytest.Config) -> Optional[str]:
    """``gpuenv: markers perf, requires_gpu are the suite's own ...``; None when the suite registers none."""
    state = _names(config)
    return f"gpuenv: {_text(state.announced)}" if state.announced else None


def late_lines(config: pytest.Config) -> list[str]:
    """For the terminal summary: names found to be the suite's after the header was printed."""
    state = _names(config)
    late = [n for n in state.left if n not in state.announced]
    return [_text(late)] if late else []
