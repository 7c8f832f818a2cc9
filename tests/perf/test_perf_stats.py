"""gpu_bench's statistics on the CPU: the median's confidence interval, the three-valued decision, and the
sample count an interval predicts.
"""

from __future__ import annotations

import math
import random

import pytest

from pytest_gpuenv.perf import FAIL, PASS, _stats, median_ci


@pytest.mark.parametrize("n, ranks", [(6, (1, 6)), (10, (2, 9)), (20, (6, 15)), (100, (40, 61))])
def test_median_ci_ranks_match_binomial_tables(n, ranks):
    assert _stats.median_ci_ranks(n) == ranks


def test_median_ci_covers_the_true_median_about_95_percent():
    rng = random.Random(7)
    hits = 0
    for _ in range(2000):
        xs = [rng.expovariate(1.0) for _ in range(40)]  # skewed; true median ln 2
        lo, hi = median_ci(xs)
        hits += lo <= 0.6931 <= hi
    assert 0.93 <= hits / 2000 <= 0.985


def test_decide_three_valued():
    assert _stats.decide(90, 99, 100) == PASS
    assert _stats.decide(101, 110, 100) is None  # beyond, but inside the 2 % guard band
    assert _stats.decide(103, 110, 100) == FAIL
    assert _stats.decide(95, 105, 100) is None  # straddles
    assert _stats.decide(81, 90, 80, upper=False) == PASS
    assert _stats.decide(70, 78, 80, upper=False) == FAIL


def test_samples_needed_reads_the_density_at_the_median():
    """Uniform on [0.9, 1.1] (density 5): SE of the median 1/(2*5*sqrt(N)), so +-1 % at 95 % needs
    N = (1.96 * 0.1 / 0.01)^2 = 384; 100 of 1,000 samples lie within 1 % of the median. Data on a tick,
    with the median in a sparse cell between two modes, needs far more than its interval's width says."""
    s = [0.9 + 0.2 * (i + 0.5) / 1000 for i in range(1000)]
    assert _stats.samples_needed(s, 1.0, 0.01) == pytest.approx(384.1, rel=0.02)
    assert _stats.samples_needed([1.0, 2.0, 3.0], 2.0, 0.01) == pytest.approx((1.96 * 3) ** 2, rel=0.01)
    assert _stats.samples_needed([1.0, 3.0], 2.0, 0.01) == math.inf
    two_modes = [1.12e-6] * 140 + [1.216e-6] * 20 + [1.344e-6] * 140  # median in the sparse middle cell
    s = _stats.spread_ties(two_modes, 32e-9)
    med = _stats.summarize_sorted(s)[0]
    # 20 samples spread over the 32 ns middle cell, 16 of them within 12.2 ns of the median: (1.96*300/16)^2
    assert _stats.samples_needed(s, med, 0.01) == pytest.approx((1.96 * 300 / 16) ** 2, rel=0.01)
