"""``record``: the environment model's classes as dataclasses whose methods are written once, here.

``dataclasses.dataclass`` writes ``__init__``, ``__repr__`` and ``__eq__`` (and a frozen class's ``__hash__``)
of each class as source text and compiles it when the module is imported: for ``GpuEnv``, ``Device``,
``Problem`` and ``ArchPattern`` about 2 ms of every run that loads the plugin. ``record`` keeps them
dataclasses (``dataclasses.fields``, ``asdict``, ``replace`` and ``is_dataclass`` work as before) and gives
them these methods, read off the fields, which behave as the generated ones do: the same positional and
keyword arguments, defaults and default factories (a new list per instance), a ``TypeError`` for a
missing, repeated or unknown argument; ``ClassName(field=value, ...)``; equal when of the same class with
equal fields, ``NotImplemented`` against anything else; a frozen class hashes its fields and refuses
assignment, the others are unhashable. The type checker sees ``dataclasses.dataclass`` itself.

``Value``: the base of the plugin's small internal records (``Host``, ``Skip``, ``HardwareSkip``, ``Poison``,
``PluginMark``), which nothing reads through ``dataclasses``: each names its fields in ``__slots__`` and
writes its ``__init__``; equality, hash and ``repr`` come from here, as a frozen dataclass's would. Nothing
is built when such a class is created.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover  (typed constructors for the checker)
    from dataclasses import dataclass as record
else:

    def record(cls: Any = None, /, *, frozen: bool = False) -> Any:
        """``@record`` or ``@record(frozen=True)``, as ``@dataclass`` with these options."""
        if cls is None:
            return lambda c: record(c, frozen=frozen)
        cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=frozen)
        fields = dataclasses.fields(cls)
        cls.__init__ = _init(cls.__name__, [(f.name, f.default, f.default_factory) for f in fields])
        cls.__repr__ = _repr(tuple(f.name for f in fields if f.repr))
        compared = tuple(f.name for f in fields if f.compare)
        cls.__eq__ = _eq(compared)
        cls.__hash__ = _hash(compared) if frozen else None
        return cls


def _init(name: str, spec: list[tuple[str, Any, Any]]) -> Callable[..., None]:
    missing = dataclasses.MISSING

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(spec):
            raise TypeError(f"{name}.__init__() takes {len(spec) + 1} positional arguments but {len(args) + 1} "
                            "were given")
        for (field, _default, _factory), value in zip(spec, args):
            if field in kwargs:
                raise TypeError(f"{name}.__init__() got multiple values for argument '{field}'")
            kwargs[field] = value
        for field, default, factory in spec:
            if field in kwargs:
                value = kwargs.pop(field)
            elif factory is not missing:
                value = factory()
            elif default is not missing:
                value = default
            else:
                raise TypeError(f"{name}.__init__() missing 1 required positional argument: '{field}'")
            object.__setattr__(self, field, value)  # as a frozen dataclass's __init__ does
        if kwargs:
            raise TypeError(f"{name}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")

    return __init__


def _repr(shown: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"

    return __repr__


def _eq(compared: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return tuple(getattr(self, n) for n in compared) == tuple(getattr(other, n) for n in compared)
        return NotImplemented

    return __eq__


def _hash(compared: tuple[str, ...]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in compared))

    return __hash__


class Value:
    """Equal when of the same class with equal ``__slots__`` values (``NotImplemented`` against anything
    else), hashed on them, shown as ``ClassName(slot=value, ...)``."""

    __slots__ = ()

    def _names(self) -> tuple[str, ...]:
        return self.__slots__  # the subclass's

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in self._names())

    def __eq__(self, other: object) -> Any:
        if other.__class__ is self.__class__:
            return self._fields() == other._fields()  # type: ignore[attr-defined]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self._names())})"
