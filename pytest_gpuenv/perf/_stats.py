"""Statistics and decisions, pure and deterministic.

- The median and its distribution-free confidence interval from order statistics: for n samples the
  interval is ``[x(j), x(n-j+1)]`` with the largest j such that ``P(Binomial(n, 1/2) < j) <= alpha/2``.
  It needs no normality assumption and works the same for times and for per-pair ratios.
- ``decide``: PASS when the whole interval is on the good side of the limit; FAIL when the whole
  interval is beyond the limit by more than a guard band; otherwise undecided (``None``).
"""

from __future__ import annotations

import bisect
import functools
import math
from typing import Optional, Sequence

PASS = "PASS"
FAIL = "FAIL"
INCONCLUSIVE = "INCONCLUSIVE"


def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("median of no samples")
    return _median_sorted(sorted(xs))


def _median_sorted(s: Sequence[float]) -> float:
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


@functools.lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """1-based ranks (j, n-j+1) of the order-statistic interval; (1, n) when n is too small.

    j is the largest rank with ``P(Binomial(n, 1/2) <= j-1) <= alpha/2``; the binomial CDF is summed
    once, in log space (exact for any n this project sees; O(n), cached).
    """
    if n <= 0:
        raise ValueError("no samples")
    alpha = 1.0 - confidence
    log_pmf = -n * math.log(2.0)  # P(B = 0)
    cdf = 0.0
    j = 0
    for i in range(n // 2 + 1):
        cdf += math.exp(log_pmf)  # P(B <= i)
        if cdf > alpha / 2.0:
            break
        j = i + 1
        log_pmf += math.log((n - i) / (i + 1.0))
    j = max(1, j)
    return j, n - j + 1


def median_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval of the median from order statistics."""
    s = sorted(xs)
    j, k = median_ci_ranks(len(s), confidence)
    return s[j - 1], s[k - 1]


def spread_ties(xs: Sequence[float], tick: float) -> list[float]:
    """Sorted ``xs`` from a timer that reads whole ``tick``s (CUPTI's timestamps: 32 ns on Hopper), with
    the f samples tied at a value v spread evenly over its cell [v - tick/2, v + tick/2] (the k-th at
    v - tick/2 + tick * (k - 1/2) / f). Readings within a quarter tick of each other are one tie (CUPTI's
    rounding puts some a nanosecond off the tick), at their middle reading. A median or interval of
    tied data then moves with the share of samples at each value instead of jumping a whole tick.
    ``tick <= 0``: sorted, unchanged."""
    s = sorted(xs)
    if tick <= 0:
        return s
    out: list[float] = []
    n, i, quarter = len(s), 0, tick / 4
    while i < n:  # a precision check runs this on every sample: a list per tie, not a (slower) generator
        j = bisect.bisect_right(s, s[i] + quarter, i)
        f, v = j - i, s[(i + j) // 2]
        if f == 1:
            out.append(v)
        else:
            step = tick / f
            first = v - tick / 2 + 0.5 * step
            out += [first + step * k for k in range(f)]
        i = j
    out.sort()  # cells of readings off the grid can overlap their neighbours'
    return out


def summarize(xs: Sequence[float], confidence: float = 0.95, tick: float = 0.0) -> tuple[float, float, float]:
    """(median, ci_low, ci_high); with ``tick`` > 0, of the data with ties spread (``spread_ties``)."""
    return summarize_sorted(spread_ties(xs, tick), confidence)


def summarize_sorted(s: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """``summarize`` of data already sorted (and ties spread): sorted once for all three."""
    if not s:
        raise ValueError("median of no samples")
    j, k = median_ci_ranks(len(s), confidence)
    return _median_sorted(s), s[j - 1], s[k - 1]


def samples_needed(s: Sequence[float], med: float, rel: float, confidence: float = 0.95) -> float:
    """About how many samples the median's interval needs to come within ``rel`` of ``med`` (``precise_enough``),
    if the share of the sorted samples ``s`` lying within ``rel`` of the median stays as it is.

    The interval spans about z*sqrt(N) ranks around the median; they fit in [med(1-rel), med(1+rel)] once
    the c of n samples there, c*N/n of N, reach z*sqrt(N): N = (z*n/c)^2. It reads the density at the median
    itself, so it holds for data on a timer's tick with several modes, where the interval's width does not
    shrink as 1/sqrt(n) until it fits in the median's cell. Infinite when no sample is that close."""
    from statistics import NormalDist  # imported by a measurement only

    t = rel * abs(med)
    c = bisect.bisect_right(s, med + t) - bisect.bisect_left(s, med - t)
    if c == 0:
        return math.inf
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    return (z * len(s) / c) ** 2


def decide(lo: float, hi: float, limit: float, *, upper: bool = True, guard: float = 0.02) -> Optional[str]:
    """Three-valued comparison of an interval [lo, hi] with a limit.

    ``upper=True``: the value must stay at or below ``limit`` (times, ratios). PASS when ``hi <= limit``;
    FAIL when ``lo > limit * (1 + guard)``. ``upper=False``: the value must reach ``limit`` (bandwidth):
    PASS when ``lo >= limit``; FAIL when ``hi < limit * (1 - guard)``. Otherwise ``None`` (undecided).
    """
    if upper:
        if hi <= limit:
            return PASS
        if lo > limit * (1.0 + guard):
            return FAIL
        return None
    if lo >= limit:
        return PASS
    if hi < limit * (1.0 - guard):
        return FAIL
    return None


def precise_enough(med: float, lo: float, hi: float, rel: float) -> bool:
    """The interval's half-width is within ``rel`` of the median."""
    if med <= 0:
        return False
    return (hi - lo) / 2.0 <= rel * med
