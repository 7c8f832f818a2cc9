"""What a test holds on a GPU while it runs: its claim, read from the markers it already carries.

``requires_memory(size)`` is the memory the test holds on each of its GPUs as well as its floor, and
``requires_devices(n)`` the number of GPUs it holds; ``exclusive_gpu`` asks for its GPUs to itself (no
other test on them while it runs). A test that declares no memory claims the run's default
(``--gpuenv-default-claim``). A claim is per GPU: a ``requires_devices(2)`` test claiming 40 GiB holds
40 GiB on each of its two GPUs. ``--dist gpu``'s scheduler (``dist.ledger``) admits tests by their claims.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

from pytest_gpuenv.base.model import format_size
from pytest_gpuenv.marks.markers import validate

#: the marker that asks for a test's GPUs to itself
EXCLUSIVE = "exclusive_gpu"


class Claim(NamedTuple):
    """A test's claim: ``memory`` bytes on each of ``devices`` GPUs; ``exclusive``: nothing else runs there."""

    devices: int = 1
    memory: int = 0
    exclusive: bool = False
    #: whether the memory came from ``requires_memory`` (else the run's default)
    declared: bool = False

    def text(self) -> str:
        """``40.0 GiB on 2 GPUs, exclusive``."""
        where = f" on {self.devices} GPUs" if self.devices > 1 else ""
        return f"{format_size(self.memory)}{where}" + (", exclusive" if self.exclusive else "")

    def to_list(self) -> list[Any]:
        return [self.devices, self.memory, self.exclusive, self.declared]

    @classmethod
    def from_list(cls, data: Any) -> Claim:
        devices, memory, exclusive, declared = (list(data) + [1, 0, False, False][len(data):])[:4]
        return cls(max(1, int(devices)), max(0, int(memory)), bool(exclusive), bool(declared))


def claim_of(marks: Iterable[Any], default: int) -> Claim:
    """The claim of a test from its plugin marks (``marks.markers.plugin_marks``, arguments already valid:
    a test whose marks are bad errors instead), closest mark first; ``default``: the run's default bytes."""
    devices, memory, exclusive = None, None, False
    for m in marks:
        if m.name == "requires_devices" and devices is None:
            devices = int(validate(m.name, m.args, m.kwargs))
        elif m.name == "requires_memory" and memory is None:
            memory = int(validate(m.name, m.args, m.kwargs))
        elif m.name == EXCLUSIVE:
            exclusive = True
    return Claim(devices or 1, default if memory is None else memory, exclusive, memory is not None)
