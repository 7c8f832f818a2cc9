"""gpu_bench's arguments on a fake backend: bad values are named, a callable that raises propagates."""

from __future__ import annotations

import pytest
from _perf_fake import make, noop


def test_callable_that_raises_propagates_with_context():
    bench, _, _ = make([1e-4])

    def broken():
        raise RuntimeError("kernel argument 3 is wrong")

    with pytest.raises(RuntimeError, match="kernel argument 3") as e:
        bench(broken, name="broken")
    notes = getattr(e.value, "__notes__", [])
    assert not notes or "gpu_bench" in notes[0]


@pytest.mark.parametrize(
    "kwargs, match",
    [({"bytes": -1}, "bytes=-1"), ({"flops": "many"}, "flops='many'"), ({"mode": "warm"}, "mode='warm'"),
     ({"max_time": 0}, "max_time 0: must be a positive"), ({"max_time": "x"}, "max_time 'x': expected a number"),
     ({"max_time": float("inf")}, "max_time inf"), ({"max_time": 10**400}, r"max_time 1000000000\d+\.\.\."),
     ({"bytes": 10**400}, r"bytes=1000000000\d+\.\.\.: expected"),
     ({"flops": 10**5000}, "flops=<int too long to show>")],
)
def test_bad_arguments_are_named(kwargs, match):
    bench, _, _ = make([1e-4])
    with pytest.raises(ValueError, match=match):
        bench(noop, **kwargs)


def test_not_callable():
    bench, _, _ = make([1e-4])
    with pytest.raises(TypeError, match="callable"):
        bench(42)
