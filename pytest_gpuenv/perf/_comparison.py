"""``Comparison``: what ``gpu_bench.assert_ratio`` returns (two callables interleaved, judged on the
median per-pair ratio); the assertion modes are ``_results``' table."""

from __future__ import annotations

from typing import Callable, Optional

from pytest_gpuenv.perf import _stats
from pytest_gpuenv.perf._engine import Sampler
from pytest_gpuenv.perf._results import ResultContext, _Result
from pytest_gpuenv.perf._units import format_time


class Comparison(_Result):
    """Result of ``gpu_bench.assert_ratio``: the median per-pair ratio and its interval."""

    __module__ = "pytest_gpuenv.perf"

    _unit = "x"

    def __init__(self, ctx: ResultContext, sampler: Sampler, name: str, ref_name: str, limit: float) -> None:
        self._init(ctx, sampler, name)
        self.ref_name = ref_name
        self.limit = limit
        self.verdict: Optional[str] = None

    def _xs(self) -> list[float]:
        return self.sampler.ratios()

    def _judged(self) -> tuple[float, float, float]:
        return _stats.summarize(self.sampler.ratios(), self.sampler.opts.confidence)

    def decider(self) -> Callable[[], Optional[str]]:
        """Decider of ``ratio <= limit`` on the median per-pair ratio's interval (of the current attempt)."""

        def decide() -> Optional[str]:
            s = self.sampler
            if s.n < s.opts.min_verdict_samples:
                return None
            _m, lo, hi = self._judged()
            return _stats.decide(lo, hi, self.limit, upper=True, guard=s.opts.guard)

        return decide

    @property
    def ratio(self) -> float:
        return _stats.median(self.sampler.ratios())

    @property
    def ci(self) -> tuple[float, float]:
        return _stats.median_ci(self.sampler.ratios(), self.sampler.opts.confidence)

    @property
    def medians(self) -> tuple[float, float]:
        return self.sampler.stats(0)[0], self.sampler.stats(1)[0]

    def __repr__(self) -> str:
        lo, hi = self.ci
        return f"<Comparison {self.name}/{self.ref_name}: {self.ratio:.3f}x [{lo:.3f}, {hi:.3f}]>"

    def _conclude(self, decider: Callable[[], Optional[str]]) -> None:
        __tracebackhide__ = True
        verdict, why = self._decide(decider)
        self.verdict = verdict
        r = self.ratio
        lo, hi = self.ci
        ta, tb = self.medians
        sign = ">" if verdict == _stats.FAIL or r > self.limit else "<="
        msg = (f"{self.name}: median ratio {r:.3f}x [{lo:.3f}, {hi:.3f}] of {self.ref_name} "
               f"({format_time(ta)} vs {format_time(tb)}) {sign} budget {self.limit:g}x on {self.device.name}")
        _a, a_lo, a_hi = self.sampler.stats(0)
        self.ctx.add(self._new_entry(
            "ratio", statistic="median of per-pair ratios", unit="x", value=r, ci_low=lo, ci_high=hi,
            median_s=ta, ci_low_s=a_lo, ci_high_s=a_hi, reference=self.ref_name, reference_median_s=tb,
            samples_s=list(self.sampler.samples[0]), reference_samples_s=list(self.sampler.samples[1]),
            bandwidth_Bps=None, flops=None, budget=f"<= {self.limit:g}x", verdict=verdict, message=msg,
        ))
        self._act(verdict, msg, why)
