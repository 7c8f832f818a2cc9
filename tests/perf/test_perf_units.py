"""gpu_bench's units on the CPU: time budgets, fractions, formatting, and the device figures (flush size,
peak bandwidth, UUID) the timer works from.
"""

from __future__ import annotations

import pytest

from pytest_gpuenv.perf import parse_fraction, parse_time
from pytest_gpuenv.perf._device import flush_bytes, format_uuid, peak_bandwidth
from pytest_gpuenv.perf._units import format_time, format_time_interval


@pytest.mark.parametrize(
    "text, seconds",
    [("250us", 250e-6), ("250 us", 250e-6), ("1.5ms", 1.5e-3), ("2s", 2.0), ("800ns", 800e-9), ("3µs", 3e-6),
     ("1e2us", 100e-6), (0.001, 1e-3)],
)
def test_parse_time(text, seconds):
    assert parse_time(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["fast", "10 parsecs", "", "us", "-5us", "0ms", True, None, float("nan"), [1]])
def test_parse_time_rejects_and_names_the_value(bad):
    with pytest.raises(ValueError) as e:
        parse_time(bad)
    assert repr(bad) in str(e.value)


def test_parse_fraction():
    assert parse_fraction("10%") == pytest.approx(0.1)
    assert parse_fraction(0.25) == 0.25
    for bad in ("ten percent", "-5%", 0, "10"):
        with pytest.raises(ValueError, match="invalid"):
            parse_fraction(bad)


def test_formatting_matches_the_issue():
    assert format_time(262.1e-6) == "262.1 us"
    assert format_time_interval(259.8e-6, 264.0e-6, like=262.1e-6) == "[259.8, 264.0]"
    assert format_time(4.19e-6) == "4.190 us"
    assert format_time(1.5e-3) == "1.500 ms"


def test_flush_size_and_peaks():
    assert flush_bytes(60 << 20, "sm_90") == 75 << 20  # NVIDIA: 1.25x the L2
    assert flush_bytes(40 << 20, "sm_80") == 50 << 20
    assert flush_bytes(4 << 20, "gfx942") == 512 << 20  # Infinity Cache
    assert flush_bytes(None, None) == 256 << 20
    assert peak_bandwidth("NVIDIA H200") == 4.8e12
    assert peak_bandwidth("AMD Instinct MI300X") == 5.3e12
    assert peak_bandwidth("Some Card") is None
    assert format_uuid(bytes(range(16))) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"


def test_numbers_too_large_for_a_float_are_named_not_overflow_errors():
    from pytest_gpuenv.perf._units import check_ratio, check_unit_fraction, parse_fraction

    for call in (lambda: parse_time(10**400), lambda: parse_fraction(-(10**400)),
                 lambda: check_ratio(10**400, "at_most"), lambda: check_unit_fraction(10**400, "at_least")):
        with pytest.raises(ValueError, match=r"invalid .*1000000000\d+\.\.\."):
            call()
