"""A fake timer backend and monitor producing synthetic samples, so gpu_bench's engine and verdict logic
run on a CPU (tests/perf/test_perf_*.py, tests/plugin/test_report_outputs.py); ``make`` builds a gpu_bench on them."""

from __future__ import annotations

import contextlib
import random
from typing import Any, Callable, Optional, Sequence

from pytest_gpuenv.perf import GpuBench, PerfContext, SamplingOptions
from pytest_gpuenv.perf._device import DeviceInfo


class FakeClock:
    """A clock that only moves when the fake device 'runs' (sampling time is simulated)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class FakeBackend:
    """Each call of ``fns[i]`` takes ``times[i]`` seconds times log-normal noise of ``cv``.

    ``times[i]`` may also be a callable ``k -> seconds`` (k counts every timed sample) for drifts,
    outliers or step changes. Simulated device time advances ``clock``; nothing sleeps.
    """

    name = "fake"

    def __init__(
        self,
        times: Sequence[Any],
        *,
        cv: float = 0.005,
        seed: int = 1,
        clock: Optional[FakeClock] = None,
        name: str = "Fake GPU 9000",
        can_delay: bool = True,
        overhead_s: float = 20e-6,
        floor_s: float = 0.0,
    ) -> None:
        self.times = list(times)
        self.cv = cv
        self.rng = random.Random(seed)
        self.clock = clock or FakeClock()
        self.can_delay = can_delay
        self.overhead_s = overhead_s
        self.info = DeviceInfo(name=name, vendor="fake", arch="fake_1", uuid="GPU-fake-0", l2_bytes=1 << 20,
                               flush_bytes=2 << 20, runtime="fake 1.0", driver="1.0", timer="fake")
        self.calls: list[tuple[str, Any]] = []
        self.k = 0
        self.syncs = 0
        #: what an empty event pair reads (the timer's zero)
        self.floor_s = floor_s

    def _time(self, i: int) -> float:
        t = self.times[i]
        base = t(self.k) if callable(t) else float(t)
        return base * self.rng.lognormvariate(0.0, self.cv) if self.cv else base

    def enqueue(self, fns: Sequence[Callable[[], Any]], schedule: Sequence[int], *, flush: bool, delay_s: float,
                head_delay_s: float, repeat: int) -> Any:
        self.calls.append(("enqueue", (list(schedule), flush, delay_s, head_delay_s, repeat)))
        out = []
        gpu = head_delay_s
        for i in schedule:
            total = sum(self._time(i) for _ in range(repeat))
            self.k += 1
            out.append(total)
            gpu += total + delay_s + (self.overhead_s if flush else 0.0)
        self.clock.t += gpu
        return out

    def collect(self, handle: Any) -> list[float]:
        self.syncs += 1
        self.calls.append(("collect", len(handle)))
        return list(handle)

    def delay(self, seconds: float) -> None:
        self.calls.append(("delay", seconds))

    def sync(self) -> None:
        self.syncs += 1

    def copy_fn(self, nbytes: int) -> Callable[[], Any]:
        return lambda: None


class FakeMonitor:
    """Clock readings from a list (cycled) and a fixed list of other processes."""

    def __init__(self, mhz: Sequence[float] = (1980.0,), max_mhz: float = 1980.0,
                 foreign: Sequence[dict[str, Any]] = ()) -> None:
        self.readings = list(mhz)
        self.max_mhz = max_mhz
        self.foreign = list(foreign)
        self.i = 0

    def sm_mhz(self) -> Optional[float]:
        v = self.readings[self.i % len(self.readings)]
        self.i += 1
        return v

    def foreign_processes(self) -> list[dict[str, Any]]:
        return list(self.foreign)


def make(times, *, cv=0.005, mode="check", monitor=None, seed=1, max_time=2.0, baselines=None, name="Fake GPU 9000",
         floor=0.0, options=None, ctx=None):
    """A bench on a fake backend; ``ctx``: share that context's session."""
    clock = FakeClock()
    fb = FakeBackend(times, cv=cv, clock=clock, seed=seed, name=name, floor_s=floor)
    ctx = PerfContext(
        backend_factory=lambda: fb, monitor_factory=lambda b: monitor, nodeid="tests/t.py::test_k", test_name="test_k",
        perf_mode=mode, max_time=max_time, baselines=baselines, clock=clock,
        lock=lambda info: contextlib.nullcontext(), options=options or SamplingOptions(),
        **({"session": ctx.session} if ctx is not None else {}),
    )
    return GpuBench(ctx), fb, ctx


def noop():
    return None
