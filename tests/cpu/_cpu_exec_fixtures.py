"""What the CPU-executor test modules share besides their fixtures (the ``cpu_kernel`` fixture: conftest.py)."""

import pytest

#: a CPU-executor test checked and unchecked
CHECK = pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
