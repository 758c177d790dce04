"""Frames: everything observed at one instant, produced by sources and consumed by the store."""

from __future__ import annotations

import enum
import functools
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import repeat
from operator import itemgetter
from typing import NamedTuple, Protocol, TypeVar, overload

T = TypeVar("T")
Labels = tuple[tuple[str, str], ...]
"""Label pairs sorted by name: hashable and order-independent."""


class Series(NamedTuple):
    """Identity of one time series: metric name and sorted labels."""

    name: str
    labels: Labels

    def label(self, key: str) -> str | None:
        """The value of label `key`, or None when the series lacks it."""
        for name, value in self.labels:
            if name == key:
                return value
        return None

    def with_label(self, key: str, value: str) -> Series:
        """A copy with label `key` set to `value` (sharing the other label pairs: a store
        holds one of these per series)."""
        pairs = [pair for pair in self.labels if pair[0] != key]
        pairs.append(label_pair(key, value))
        pairs.sort()
        return Series(self.name, tuple(pairs))

    def without(self, keys: frozenset[str]) -> Labels:
        """The labels minus `keys`."""
        return tuple(pair for pair in self.labels if pair[0] not in keys)


@functools.lru_cache(maxsize=4096)
def label_pair(key: str, value: str) -> tuple[str, str]:
    """One tuple for a label pair that many series carry (the `instance` a store gives every
    series of a target: 42,000 series of 100 servers share 100 pairs)."""
    return key, value


class Sample(NamedTuple):
    """One parsed exposition line."""

    series: Series
    value: float
    timestamp: float | None = None


class PayloadLayout(Protocol):
    """The lines of a payload around its values: rebuilds the payload from them."""

    def text(self, value_text: str) -> str:
        """The payload with these values (one per line, in sample order)."""
        ...


class SampleColumns(Sequence[Sample]):
    """Samples as two columns: series (shared between scrapes of one layout) and values.

    Lets a scrape hold its values in one list instead of one tuple per line: a hundred servers
    make tens of thousands of samples a second, and every tuple would be garbage-collector work.
    Samples are made on demand for readers that want them one by one.
    """

    __slots__ = ("layout", "series", "value_text", "values")

    def __init__(
        self,
        series: tuple[Series, ...],
        values: list[float],
        layout: PayloadLayout | None = None,
        value_text: str = "",
    ) -> None:
        self.series = series
        self.values = values
        self.layout = layout
        """The payload's lines around its values, when the columns were read through them."""
        self.value_text = value_text
        """The values as the payload wrote them, one per line (with `layout`: the payload)."""

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Sample, ...]: ...

    def __getitem__(self, index: int | slice) -> Sample | tuple[Sample, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        return Sample(self.series[index], self.values[index])

    def __iter__(self) -> Iterator[Sample]:
        rows = zip(self.series, self.values, repeat(None), strict=False)
        return map(tuple.__new__, repeat(Sample), rows)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class ParseError:
    """A line that could not be parsed; the rest of the scrape is kept."""

    line_number: int
    line: str
    message: str
    refused_by_prometheus: bool = False
    """Not a line vtop cannot read, but one Prometheus would fail the whole scrape on."""

    def __str__(self) -> str:
        shown = self.line if len(self.line) <= 120 else self.line[:117] + "..."
        return f"line {self.line_number}: {self.message}: {shown!r}"


class ScrapeStatus(enum.Enum):
    """Outcome of one /metrics fetch."""

    OK = "ok"
    UNREACHABLE = "unreachable"
    HTTP_ERROR = "http error"
    NOT_VLLM = "not a vLLM endpoint"

    @property
    def event_kind(self) -> EventKind:
        """The kind of the event a failed scrape of this status is."""
        return EventKind(self.value.replace(" ", "_").lower())


@dataclass(frozen=True)
class InFlightRequest:
    """One request still running, as vtop's middleware in vLLM's API server lists it
    (`vtop.core.manage.vtop_inflight`; `vtop.core.ingest.sources.in_flight` reads it)."""

    request_id: str
    path: str
    age_s: float
    stream: bool
    max_tokens: int | None
    events: int
    """Server-sent events written so far: about one token each when streamed, 0 otherwise."""
    body_bytes: int


@dataclass(frozen=True, slots=True)
class TargetScrape:
    """One target's /metrics at one instant: raw text, parsed samples and outcome."""

    target: str
    status: ScrapeStatus
    raw_text: str = ""
    samples: Sequence[Sample] = ()
    metric_types: Mapping[str, str] = field(default_factory=dict)
    """Declared type by family; shared by the scrapes read through one payload layout."""
    parse_errors: tuple[ParseError, ...] = ()
    error: str = ""
    http_status: int | None = None
    duration_s: float = 0.0
    server_version: str | None = None
    """What the server's GET /version said (asked once per process start)."""
    server_settings: tuple[tuple[str, float | str | bool, str], ...] = ()
    """(setting, value, source) the server reported over HTTP (/v1/models, /server_info)."""
    skipped_series: int = 0
    """Sample lines of series not from vLLM the parser left unparsed (over its cap)."""
    in_flight: tuple[InFlightRequest, ...] | None = None
    """The requests running at the scrape, oldest first, as vtop's middleware in vLLM lists
    them (None: the server does not list them; `vtop serve` loads the middleware)."""

    @property
    def ok(self) -> bool:
        """True when samples from this scrape may be ingested."""
        return self.status is ScrapeStatus.OK

    def bare(self) -> TargetScrape:
        """The scrape without its text and samples: what is kept of it once ingested (a
        payload is 50 KB of text and 420 samples)."""
        return replace(self, samples=(), raw_text="")


@dataclass(frozen=True)
class ProcessInfo:
    """A process using a GPU."""

    pid: int
    used_memory_bytes: int | None


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one instant; None means the driver does not report that field."""

    index: int
    name: str | None = None
    uuid: str | None = None
    utilization_pct: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    clock_event_reasons: int | None = None
    throttle_reasons: tuple[str, ...] = ()
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    processes: tuple[ProcessInfo, ...] = ()
    errors: tuple[str, ...] = ()


class GpuStatus(enum.Enum):
    """Whether GPU readings are available at all."""

    OK = "ok"
    NO_GPU = "no NVIDIA GPU"
    ERROR = "NVML error"


@dataclass(frozen=True)
class GpuSnapshot:
    """All GPUs at one instant, or why there are none."""

    state: GpuStatus
    gpus: tuple[GpuReading, ...] = ()
    driver_version: str | None = None
    message: str = ""


class EventKind(enum.StrEnum):
    """What an event or a mark is about (a str, so recordings store it as text)."""

    RESTART = "restart"
    ALTERNATING = "alternating"
    """Processes answer one URL in turn (their start times come back)."""
    COUNTER_RESET = "counter_reset"
    SERIES_LIMIT = "series_limit"
    EXITED = "exited"
    UNREACHABLE = "unreachable"
    HTTP_ERROR = "http_error"
    NOT_VLLM = "not_a_vllm_endpoint"
    PROMETHEUS_DOWN = "prometheus_down"
    RECOVERED = "recovered"
    APPLIED = "applied"
    ROLLBACK = "rollback"
    PREEMPTIONS = "preemptions"
    KV = "kv"
    FINDING = "finding"
    CLEARED = "cleared"
    DATA_QUALITY = "data_quality"
    STACKS = "stacks"
    """Where the engine was, from its processes' stacks (`w` in the dashboard)."""


SCRAPE_FAILURES = frozenset({EventKind.UNREACHABLE, EventKind.HTTP_ERROR, EventKind.NOT_VLLM})
"""Event kinds of failed scrapes (the session marks a change of status instead of each)."""


@dataclass(frozen=True)
class Event:
    """Something that happened at a time: a restart, a reset, a source failure."""

    timestamp: float
    kind: EventKind
    target: str
    message: str


@dataclass(frozen=True)
class RequestSpan:
    """One finished request as vLLM's span of it tells it (`vtop.core.ingest.sources.otlp`
    decodes it; None: the attribute was not sent)."""

    request_id: str
    trace_id: str
    server: str
    arrival_s: float
    end_s: float
    queue_s: float | None
    ttft_s: float | None
    prefill_s: float | None
    decode_s: float | None
    inference_s: float | None
    e2e_s: float | None
    prompt_tokens: int | None
    output_tokens: int | None
    max_tokens: int | None

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first (decode time over the tokens after it)."""
        if self.decode_s is None or self.output_tokens is None or self.output_tokens < 2:
            return None
        return self.decode_s / (self.output_tokens - 1)


@dataclass(frozen=True)
class ProbeResult:
    """One canary request through the URL users call, as the client saw it (times in seconds
    from sending it; `vtop.core.ingest.sources.probe` sends it)."""

    url: str
    """The URL probed (without a password)."""
    endpoint: str
    started: float
    """Wall-clock time the request was sent."""
    status: int | None = None
    """The HTTP status (None when no answer came)."""
    error: str = ""
    """Why it failed: the status and body, a timeout, a connection failure, a cut stream."""
    first_byte_s: float | None = None
    first_token_s: float | None = None
    """Seconds from sending to the read that brought the first token's event."""
    duration_s: float | None = None
    reads: tuple[tuple[float, int], ...] = ()
    """(seconds since sent, bytes) of every read of the body off the socket."""
    tokens: int = 0
    """Events vLLM wrote for generated tokens (one per engine step, its text possibly empty)."""
    usage_tokens: int | None = None
    """completion_tokens of the usage chunk, None when none arrived."""
    usage_asked: bool = True
    finished: bool = False
    """The stream ended with `data: [DONE]`."""
    headers: tuple[tuple[str, str], ...] = ()
    body_bytes: int = 0
    request_id: str = ""
    """The X-Request-Id it was sent with (vLLM's request id contains it)."""
    trace_id: str = ""
    """The W3C trace id of the traceparent it was sent with (vLLM's span continues it)."""

    @property
    def ok(self) -> bool:
        """A 200 whose stream ran to its end."""
        return self.status == 200 and self.finished and not self.error

    @property
    def usage_in_stream(self) -> bool | None:
        """Whether the usage chunk arrived; None when it was not asked for or the stream never
        reached its end (a cut stream says nothing of its usage)."""
        if not (self.usage_asked and self.finished):
            return None
        return self.usage_tokens is not None

    @property
    def max_gap_s(self) -> float | None:
        """The longest silence of the canary: between reads, from sending to the first read,
        and from the last read to its end (a stream a proxy cut, or one with no byte at all,
        was silent until the cut)."""
        times = [0.0, *(at for at, _ in self.reads)]
        if self.duration_s is not None:
            times.append(max(self.duration_s, times[-1]))
        return max((b - a for a, b in itertools.pairwise(times)), default=None)

    @property
    def mean_read_gap_s(self) -> float | None:
        """The mean time between reads after the first token."""
        after = [
            at for at, _ in self.reads if self.first_token_s is None or at >= self.first_token_s
        ]
        if len(after) < 2:
            return None
        return (after[-1] - after[0]) / (len(after) - 1)

    def header(self, name: str) -> str | None:
        """A response header kept for the report (lower-case name)."""
        return next((value for key, value in self.headers if key == name), None)


@dataclass(frozen=True)
class Frame:
    """Everything observed at one instant."""

    timestamp: float
    scrapes: tuple[TargetScrape, ...] = ()
    gpu: GpuSnapshot | None = None
    log_lines: tuple[str, ...] = ()
    events: tuple[Event, ...] = ()
    probes: tuple[ProbeResult, ...] = ()
    """Canary requests through the front door that finished since the last frame."""
    spans: tuple[RequestSpan, ...] = ()
    """vLLM's request spans received since the last frame (when the feed listens for them)."""


def picker(indices: list[int]) -> Callable[[Sequence[T]], tuple[T, ...]]:
    """A getter of the items at `indices` as a tuple, at itemgetter's (C) speed."""
    if len(indices) > 1:
        return itemgetter(*indices)
    return lambda items: tuple(items[index] for index in indices)
