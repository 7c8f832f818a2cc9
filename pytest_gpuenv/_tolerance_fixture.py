"""The ``gpu_assert_close`` fixture: ``tolerance.compare`` with the run's ini ``gpuenv_tolerances`` lines and
the test's ``@gpuenv_tolerance`` markers (farthest first, so the closest marker wins). ``tolerance`` is imported
by the fixture, where a test enters it (a subsystem boundary: most runs never compare tensors)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pytest

from pytest_gpuenv._session import get_settings
from pytest_gpuenv.model import safe_repr

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.tolerance import Rule

MARKER = "gpuenv_tolerance"
_KEYS = ("dtype", "rtol", "atol", "arch")


def marker_rules(item: Any) -> list[Rule]:
    """The item's ``@gpuenv_tolerance`` marks as rules; ``ValueError`` naming the bad one."""
    from pytest_gpuenv.tolerance import rule

    rules = []
    for m in reversed(list(item.iter_markers(MARKER))):
        call = ", ".join([safe_repr(a) for a in m.args] + [f"{k}={safe_repr(v)}" for k, v in m.kwargs.items()])
        text = f"@{MARKER}({call})"
        try:
            if m.args:
                raise ValueError("takes keyword arguments only: dtype=, rtol=, atol=, arch=")
            extra = set(m.kwargs) - set(_KEYS)
            if extra:
                raise ValueError(f"unexpected keyword argument(s) {', '.join(sorted(map(str, extra)))}")
            rules.append(rule(**m.kwargs, source="marker", label=text))
        except ValueError as exc:
            raise ValueError(f"invalid marker {text}: {exc}") from None
    return rules


@pytest.fixture(name="gpu_assert_close")
def gpu_assert_close_fixture(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``gpu_assert_close(actual, expected, **overrides)`` with this run's and this test's tolerance profiles."""
    from pytest_gpuenv.tolerance import compare  # boundary: the tolerance profiles, entered by this fixture

    try:
        rules = list(get_settings(request.config).tolerances) + marker_rules(request.node)
    except ValueError as exc:
        pytest.fail(str(exc), pytrace=False)

    def gpu_assert_close(actual: Any, expected: Any, **overrides: Any) -> None:
        __tracebackhide__ = True
        compare(actual, expected, rules, **overrides)

    return gpu_assert_close
