"""Expected values per device: the keys of a ``gpu_expected`` mapping, and the one chosen for a device.

A key is ``None`` (the default), one condition, or a tuple of conditions that must all hold. A condition is:

- an arch (``"sm_90"``, ``"gfx942"``) or an arch pattern (``"gfx94*"``, ``"sm_80+"``; ``base.model.ArchPattern``);
- a vendor, ``"nvidia"`` or ``"amd"``, or ``"cpu"``: no GPU (the CPU executor's results, CPU torch's);
- a version range of ``cuda``, ``rocm``, ``driver`` or ``torch`` (``"cuda>=12.8"``, ``"rocm<7"``;
  ``base.conditions``).

Specificity, compared in this order (the most specific matching key wins):

1. the arch: an exact arch beats a pattern, which beats a key with no arch;
2. the number of version ranges in the key;
3. a vendor (or ``"cpu"``) named, or implied by the arch.

``None`` is below every key. Two matching keys of equal specificity with different values are an error naming
both (equal values are no ambiguity: the first in the mapping's order is reported). No matching key and no
``None``: an error naming the device.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Union, cast

from pytest_gpuenv.base.conditions import VENDORS, VERSIONS, Facts, parse_spec, version_in
from pytest_gpuenv.base.model import ArchPattern, safe_repr

if TYPE_CHECKING:  # pragma: no cover
    from packaging.specifiers import SpecifierSet

_RANGE = r"^\s*(" + "|".join(VERSIONS) + r")\s*([<>=!~].*)$"


class Condition(NamedTuple):
    """One parsed condition: ``kind`` is ``arch``, ``vendor`` or ``range``."""

    kind: str
    text: str
    value: Union[ArchPattern, str, tuple[str, SpecifierSet]]

    def holds(self, f: Facts) -> bool:
        if self.kind == "vendor":
            return f.vendor == self.value
        if self.kind == "arch":
            assert isinstance(self.value, ArchPattern)
            return self.value.matches(f.arch)
        name, spec = cast("tuple[str, SpecifierSet]", self.value)
        return version_in(spec, f.versions.get(name))

    @property
    def exact_arch(self) -> bool:
        return self.kind == "arch" and not any(c in self.text for c in "*?[+")


def parse_condition(text: Any) -> Condition:
    """One condition; ``ValueError`` naming it otherwise."""
    if not isinstance(text, str) or len(text) > 200:
        raise ValueError(f"a condition is a string such as 'sm_90', 'gfx94*', 'amd', 'cpu' or 'cuda>=12.8', "
                         f"got {safe_repr(text)}")
    t = text.strip().lower()
    if t in VENDORS:
        return Condition("vendor", t, t)
    m = re.match(_RANGE, t)
    if m:
        return Condition("range", t, (m.group(1), parse_spec(m.group(2), f"version range of {m.group(1)}")))
    try:
        return Condition("arch", t, ArchPattern.parse(t))
    except ValueError:
        raise ValueError(f"unknown condition {safe_repr(text)} (expected an arch or arch pattern such as 'sm_90' or "
                         f"'gfx94*', a vendor ({', '.join(VENDORS)}), or a version range of "
                         f"{', '.join(VERSIONS)} such as 'cuda>=12.8' or 'rocm<7')") from None


class Key(NamedTuple):
    """A mapping key, parsed: its conditions (empty for ``None``) and the key as given."""

    conditions: tuple[Condition, ...]
    given: Any

    @property
    def specificity(self) -> tuple[int, int, int]:
        """(arch: 2 exact, 1 pattern, 0 none; number of version ranges; 1 when a vendor is named or implied)."""
        if not self.conditions:
            return (-1, -1, -1)
        arch = max((2 if c.exact_arch else 1 for c in self.conditions if c.kind == "arch"), default=0)
        ranges = sum(c.kind == "range" for c in self.conditions)
        vendor = int(arch > 0 or any(c.kind == "vendor" for c in self.conditions))
        return (arch, ranges, vendor)

    def holds(self, f: Facts) -> bool:
        return all(c.holds(f) for c in self.conditions)

    def text(self) -> str:
        return safe_repr(self.given, 120)


def parse_key(key: Any) -> Key:
    """``None``, a condition or a tuple of them; ``ValueError`` naming the key."""
    if key is None:
        return Key((), None)
    parts = key if isinstance(key, tuple) else (key,)
    if not parts:
        raise ValueError("an empty tuple is not a key (None is the default)")
    try:
        return Key(tuple(parse_condition(p) for p in parts), key)
    except ValueError as exc:
        raise ValueError(f"key {safe_repr(key, 120)}: {exc}") from None


class Choice(NamedTuple):
    """The key chosen for a device, and its value."""

    key: Key
    value: Any
    facts: Facts

    def describe(self) -> str:
        """``key 'sm_90' -> 1.0 (device: nvidia sm_90, cuda 12.8)``."""
        return f"key {self.key.text()} -> {safe_repr(self.value, 200)} (device: {self.facts.describe()})"


def choose(mapping: Any, f: Facts) -> Choice:
    """The most specific key of ``mapping`` that holds for ``f``; ``ValueError`` for a bad key, an ambiguous
    tie or no match."""
    if not isinstance(mapping, Mapping) or not mapping:
        raise ValueError(f"gpu_expected takes a non-empty mapping of keys to values, got {safe_repr(mapping)}")
    keys = [(parse_key(k), v) for k, v in mapping.items()]
    matching = [(k, v) for k, v in keys if k.holds(f)]
    if not matching:
        raise ValueError(f"no key of gpu_expected matches this device ({f.describe()}); keys: "
                         f"{', '.join(k.text() for k, _ in keys)}; add None for a default")
    best = max(k.specificity for k, _ in matching)
    top = [(k, v) for k, v in matching if k.specificity == best]
    first_key, first_value = top[0]
    for k, v in top[1:]:
        if not _same(v, first_value):
            raise ValueError(f"keys {first_key.text()} and {k.text()} both match this device ({f.describe()}) "
                             "with equal specificity and different values; make one more specific (a tuple such "
                             "as ('gfx942', 'rocm>=6.4')) or drop one")
    return Choice(first_key, first_value, f)


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # an array's == is elementwise: its truth value raises
        return False
