"""One entry of the performance report per measurement or assertion: the typed ``PerfEntry`` and its
JSON form.

Entries are made by ``_results`` (``Measurement``, ``Comparison``), kept by a ``PerfSession``, sent
as JSON from an xdist worker to the controller, and end up in the terminal table (``session.report``) and in
the ``"measurements"`` of ``--gpuenv-json``. ``to_dict`` gives those JSON objects; ``from_dict`` reads
them back, ignoring unknown keys and defaulting missing ones (a worker of another version), and
raises ``ValueError`` naming the key when a known key holds the wrong type.

Two triples, each with one meaning:

- ``value``/``ci_low``/``ci_high`` (in ``unit``, described by ``statistic``): the number the verdict
  is decided on, with its confidence interval: a time (``"s"``), a bandwidth (``"B/s"``) or a ratio
  (``"x"``).
- ``median_s``/``ci_low_s``/``ci_high_s``: the median device time per call and its interval (for a
  ratio entry, of the first callable).

For time entries (kinds ``measure``, ``copy``, ``time``, ``regression``) both triples hold the same
numbers: both are present by design, so a reader always finds the time in ``*_s`` and the judged
number in ``value``. They differ for ``bandwidth`` and ``ratio`` entries.

JSON keys: every field, except the optional ones of ``OPTIONAL`` (left out while ``None``: each belongs
to some kinds only, and ``host`` is named when the run ends) and ``bytes``/``flops_count``, which a
``ratio`` entry (two callables) has not.

Words: an *entry* is one of these; *record* is left to ``--gpuenv-perf=record`` (store baselines) and to
CUPTI's activity records (``cupti_records``: how the profiler timer recorded kernels).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Optional

from pytest_gpuenv.perf._units import printable

#: what an entry is: a plain measurement, the copy reference of assert_bandwidth, or an assertion
KINDS = ("measure", "copy", "time", "bandwidth", "regression", "ratio")

#: fields written only when set (each belongs to some kinds only; ``host`` is set when the run ends)
OPTIONAL = frozenset({
    "host", "message", "reference_Bps", "reference", "fraction", "baseline_path", "baseline_median_s", "ratio",
    "ratio_ci", "reference_median_s", "reference_samples_s", "timer_note", "ops_per_call", "gap_s", "attempts",
    "monitor_note", "cupti_records",
})
#: fields of one measured callable, absent from ratio entries
PER_CALLABLE = frozenset({"bytes", "flops_count"})


@dataclass
class Clocks:
    """SM clocks read during the sampling batches, and how many batches were kept."""

    #: "nvml" or "amdsmi" when SM clocks were read, else None (no monitor: clocks unknown)
    source: Optional[str] = None
    #: lowest and highest SM clock read at a batch, MHz
    sm_mhz_min: Optional[float] = None
    sm_mhz_max: Optional[float] = None
    #: the device's maximum SM clock, MHz (a batch below a fraction of it is discarded)
    max_sm_mhz: Optional[float] = None
    #: sampling batches run, and those discarded for low clocks
    batches: int = 0
    discarded_batches: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Clocks:
        return cls(**_checked(cls, data))


@dataclass
class PerfEntry:
    """One measurement or assertion, plain data (see the module docstring for the two triples)."""

    #: pytest node id of the test, and the measurement's name (callable name, ``name=``, or test#k)
    nodeid: str = ""
    name: str = ""
    #: the host that measured it (``dist.hosts.Host.name``: host name, plus root and masks where set), named
    #: when the run ends (``dist.xdist.finish_worker``); baselines stay keyed by ``device_key``
    host: Optional[str] = None
    #: device name, architecture, baseline key (name | arch | driver | runtime), UUID, and the timer:
    #: "cupti" (kernel durations from CUPTI's activity records) or an event timer ("torch", "cuda", "hip")
    device: str = ""
    arch: Optional[str] = None
    device_key: str = ""
    uuid: Optional[str] = None
    timer: str = ""
    #: "cold" (cache flushed before each sample) or "hot" (``repeat`` back-to-back calls per interval)
    mode: str = "cold"
    repeat: int = 1
    #: bytes flushed before each sample (0 in hot mode)
    flush_bytes: int = 0
    #: samples kept (ABBA rounds for a ratio)
    n: int = 0
    clocks: Clocks = field(default_factory=Clocks)
    #: other processes seen on the GPU: {"pid": ..., "name": ...}
    foreign_processes: list[dict[str, Any]] = field(default_factory=list)
    #: why the verdict is INCONCLUSIVE; advice that does not change the verdict
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: "decided", "time cap" or "throttled"
    stop_reason: Optional[str] = None
    #: sampling wall time, seconds; host time to enqueue one call with the device idle
    spent_s: float = 0.0
    host_enqueue_s: Optional[float] = None
    #: one of KINDS
    kind: str = "measure"
    #: what value is: "median", "bandwidth at median" or "median of per-pair ratios"
    statistic: str = "median"
    #: "s", "B/s" or "x"
    unit: str = "s"
    #: median device time per call and its interval, seconds
    median_s: Optional[float] = None
    ci_low_s: Optional[float] = None
    ci_high_s: Optional[float] = None
    #: the judged statistic and its interval, in ``unit``
    value: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    #: seconds per call in the order taken (for a ratio, of the first callable)
    samples_s: list[float] = field(default_factory=list)
    #: bytes read plus written per call and FLOPs per call, as given to gpu_bench
    bytes: Optional[float] = None
    flops_count: Optional[float] = None
    #: bytes/s and FLOP/s at the median time
    bandwidth_Bps: Optional[float] = None
    flops: Optional[float] = None
    #: the limit as text ("250 us", ">= 0.8 x copy (...)", "<= baseline +10%", "<= 1.2x")
    budget: Optional[str] = None
    #: PASS, FAIL, INCONCLUSIVE; None for a measurement without assertion and a recorded baseline
    verdict: Optional[str] = None
    # ---------------------------------------------------------------- optional (OPTIONAL)
    #: the assertion's message (assertions only)
    message: Optional[str] = None
    #: bandwidth: the reference bandwidth (B/s), which one ("copy" or "peak"), bandwidth / reference.
    #: ratio: ``reference`` is the reference callable's name
    reference_Bps: Optional[float] = None
    reference: Optional[str] = None
    fraction: Optional[float] = None
    #: regression: the baselines file written (record mode); the baseline median, now / baseline, its interval
    baseline_path: Optional[str] = None
    baseline_median_s: Optional[float] = None
    ratio: Optional[float] = None
    ratio_ci: Optional[list[float]] = None
    #: ratio: the reference callable's median time and samples, seconds
    reference_median_s: Optional[float] = None
    reference_samples_s: Optional[list[float]] = None
    #: why an event timer measured where a profiler timer might have (AMD, no cupti-python, asked for)
    timer_note: Optional[str] = None
    #: the clock, throttle and process guards that were off, and why (NVML or amdsmi missing or failing)
    monitor_note: Optional[str] = None
    #: profiler timer: median kernels/memcpys/memsets per call, and median time per call between the
    #: first start and the last end that none of them covers (launch gaps), seconds
    ops_per_call: Optional[float] = None
    gap_s: Optional[float] = None
    #: CUPTI timer: how kernels were recorded ("concurrent", or "serialised, less <t> front-end time")
    cupti_records: Optional[str] = None
    #: an INCONCLUSIVE verdict re-measured once with a larger sample: each attempt's summary
    #: ({"attempt", "unit", "value", "ci_low", "ci_high", "n", "verdict", "problems", "stop_reason", "spent_s"})
    attempts: Optional[list[dict[str, Any]]] = None

    def __post_init__(self) -> None:
        # names come from user code (``name=``, a callable's ``__name__``) or a JSON file: never raw control
        # characters in the terminal or the JUnit XML
        self.name = printable(self.name)
        if self.reference is not None:
            self.reference = printable(self.reference)

    def to_dict(self) -> dict[str, Any]:
        """The ``--gpuenv-json`` "measurements" entry: plain JSON types."""
        out = asdict(self)
        for k in OPTIONAL:
            if out[k] is None:
                del out[k]
        if self.kind == "ratio":
            for k in PER_CALLABLE:
                del out[k]
        return out

    @classmethod
    def from_dict(cls, data: Any) -> PerfEntry:
        """An entry from ``to_dict``'s JSON; unknown keys are ignored, missing ones take defaults."""
        values = _checked(cls, data)
        if "clocks" in values:
            values["clocks"] = Clocks.from_dict(values["clocks"])
        return cls(**values)


# ------------------------------------------------------------------------------- validation
def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _list_of(ok: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(ok(x) for x in v)


def _optional(ok: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or ok(v)


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "Optional[str]": _optional(lambda v: isinstance(v, str)),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": _num,
    "Optional[float]": _optional(_num),
    "list[str]": _list_of(lambda v: isinstance(v, str)),
    "list[float]": _list_of(_num),
    "Optional[list[float]]": _optional(_list_of(_num)),
    "list[dict[str, Any]]": _list_of(lambda v: isinstance(v, dict)),
    "Optional[list[dict[str, Any]]]": _optional(_list_of(lambda v: isinstance(v, dict))),
    "Clocks": lambda v: isinstance(v, dict),
}


def _checked(cls: type, data: Any) -> dict[str, Any]:
    """The known keys of ``data`` whose values have the field's type; ValueError naming a bad one."""
    if not isinstance(data, dict):
        raise ValueError(f"a {cls.__name__} is a JSON object, got {type(data).__name__}")
    out: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        v = data[f.name]
        if not _TYPE_CHECKS[str(f.type)](v):
            raise ValueError(f"{cls.__name__}.{f.name}: {v!r} is not {f.type}")
        out[f.name] = list(v) if isinstance(v, list) else v
    return out
