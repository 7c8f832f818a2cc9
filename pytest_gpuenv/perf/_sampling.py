"""What the measurement loop (``_engine.Sampler``) works with: the backend and monitor it drives, the
knobs of one measurement (``SamplingOptions``) and why a measurement cannot give a verdict (``Problems``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.perf._device import DeviceInfo


class Backend(Protocol):
    name: str
    info: DeviceInfo
    can_delay: bool

    def enqueue(
        self, fns: Sequence[Callable[[], Any]], schedule: Sequence[int], *, flush: bool, delay_s: float,
        head_delay_s: float, repeat: int,
    ) -> Any: ...

    def collect(self, handle: Any) -> list[float]: ...

    def delay(self, seconds: float) -> None: ...

    def sync(self) -> None: ...


class Monitor(Protocol):
    max_mhz: Optional[float]

    def sm_mhz(self) -> Optional[float]: ...

    def foreign_processes(self) -> list[dict[str, Any]]: ...


@dataclass
class SamplingOptions:
    """Knobs of one measurement. Defaults are what the fixture uses."""

    max_time: float = 2.0
    #: stop a plain measurement once the median's interval half-width is within this fraction: +-0.8 % at 95 % is a
    #: standard error of about 0.4 %, so repeated estimates spread by about that (at +-1 % they spread by
    #: more: the interval's own 0.5 % and early stops where ties sit at the median; docs/explanation/timer.md)
    rel_precision: float = 0.008
    #: samples before a plain measurement may stop on precision
    min_samples: int = 20
    #: samples before any verdict is taken
    min_verdict_samples: int = 10
    #: samples (or ABBA rounds) enqueued per batch, one host sync each (``Sampler._batch_size``)
    batch: int = 10
    max_batch: int = 400
    #: a precision stop aims its next batch at this fraction of the sample count it predicts
    #: (``_stats.samples_needed``)
    aim: float = 0.9
    confidence: float = 0.95
    #: FAIL only when the whole interval is beyond the limit by more than this fraction
    guard: float = 0.02
    warmup_batch: int = 5
    warmup_agree: float = 0.02
    warmup_max_time: float = 0.2
    #: fixed device delay between the flush and the start event (lets the flush drain), where no memory fence
    #: follows the flush (the fence after the read kernel on NVIDIA does that: ``_torch``'s docstring)
    post_flush_delay_s: float = 2e-6
    #: in "auto" mode, kernels faster than this (cold) are timed hot
    hot_below_s: float = 5e-6
    #: in hot mode, launches per timed interval are chosen to fill about this much device time
    hot_interval_s: float = 100e-6
    #: a batch whose SM clock reads below this fraction of the maximum is discarded
    clock_floor: float = 0.75
    #: more than this fraction of batches discarded -> INCONCLUSIVE
    max_throttled: float = 0.2
    #: time of an empty start/stop event pair on this device (calibrated by the bench)
    event_floor_s: float = 0.0
    #: a median below max(this, 1.3 x event_floor_s) is "fn enqueued nothing"
    empty_below_s: float = 0.5e-6
    #: longest device delay used to detect a callable that synchronises
    sync_probe_s: float = 3e-3


@dataclass
class Problems:
    """Why a measurement cannot give a verdict, plus advice that does not change the verdict."""

    inconclusive: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
