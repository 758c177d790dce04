"""A Prometheus server as the source: the vLLM servers it scrapes, read through its HTTP API.

Prometheus already holds the fleet's series, so vtop reads them there (instant `query` for live
ticks, `query_range` for a past window) and turns them into the same frames a direct scrape
gives: one TargetScrape per discovered instance, so the store, rules and views are unchanged.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from vtop.core.catalog import ALERTS, ALERTS_FOR_STATE, is_vllm, sample_type
from vtop.core.frame import Event, EventKind, Frame, Sample, ScrapeStatus, Series, TargetScrape
from vtop.core.ingest.feed_status import (
    INTERVAL_STEPS,
    UNAVAILABLE,
    Control,
    FeedStatus,
    Mode,
    Moved,
    next_step,
)
from vtop.core.ingest.sources import dcgm
from vtop.core.ingest.sources.bounded_http import BodyError, DeadlineError, bounded_request
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, describe_error, make_client
from vtop.core.managed_server import ManagedServer

VLLM_SELECTOR = (
    '{__name__=~"vllm:.+|ray_vllm[:_].+|process_start_time_seconds|up|' + dcgm.SELECTOR + '"}'
)
"""Everything vtop reads: vLLM's series (Ray Serve's names too), the restart marker,
Prometheus' own `up`, and the GPU fields dcgm-exporter exposes (joined to the servers by pod)."""
HEADLINE_SELECTOR = (
    '{__name__=~"(vllm:|ray_vllm[:_])(num_requests_running|num_requests_waiting'
    "|kv_cache_usage_perc|generation_tokens_total|prompt_tokens_total|num_preemptions_total)"
    '|process_start_time_seconds|up"}'
)
"""What `--alerts` reads of each server (Ray Serve's names too): the fleet table's figures,
restarts and `up`..."""
ALERTS_SELECTOR = 'ALERTS{alertname=~"Vllm.+", alertstate="firing"}'
"""...and the alerts Prometheus fires for the exported rules (the triage, done there)."""
DCGM_SELECTOR = f'{{__name__=~"{dcgm.SELECTOR}"}}'
"""dcgm-exporter's GPU fields: vtop judges the GPU rules itself (no Prometheus can)."""
ALERTS_QUERY = f"{HEADLINE_SELECTOR} or {ALERTS_SELECTOR} or {DCGM_SELECTOR}"
KNOWN_SERVERS = (
    "group by (job, instance) (last_over_time("
    '{__name__=~"vllm:num_requests_running|ray_vllm[:_]num_requests_running"}[1h]))'
)
"""Servers that exposed vLLM series in the last hour: found even when down as vtop starts."""
DROPPED_LABELS = frozenset({"__name__", "instance", "job"})
RUNNING = frozenset({"vllm:num_requests_running", "ray_vllm:num_requests_running"})
"""A series every server exposes: its target labels name the server's pod (GPUs join by it)."""
UP = "up"
MAX_ANSWER_BYTES = 512 * 1024 * 1024
"""An API answer past this is refused (a range query over a large fleet: narrow --since/--step)."""
METADATA_REFRESH_S = 300.0
LONGEST_URL_QUERY = 2000
"""A query longer than this is POSTed as a form (the API takes both; proxies cap URLs at 8 KB)."""


class PrometheusError(Exception):
    """The Prometheus server could not answer a query."""


@dataclass(frozen=True)
class Point:
    """One series' value at one time, as Prometheus returned it."""

    labels: dict[str, str]
    timestamp: float
    value: float


class PrometheusClient:
    """The few HTTP API calls vtop needs: query, query_range, metadata."""

    def __init__(self, url: str, options: ScrapeOptions) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = options.timeout_s
        self.client = make_client(options)
        self.headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
        self.bytes_read = 0
        """Bytes of API answers read so far (what a tick costs the link)."""

    async def close(self) -> None:
        """Close the HTTP client."""
        await self.client.aclose()

    async def _get(self, path: str, params: dict[str, str]) -> Any:
        """GET an API path (POST a form where the query is too long for a URL); the `data`
        member of a successful answer."""
        long = len(params.get("query", "")) > LONGEST_URL_QUERY
        url = self.url + path if long else str(httpx.URL(self.url + path, params=params))
        try:
            response = await bounded_request(
                self.client,
                url,
                self.headers,
                self.timeout_s,
                MAX_ANSWER_BYTES,
                params if long else None,
            )
        except httpx.HTTPError as error:
            raise PrometheusError(f"{self.url}: {describe_error(error)}") from error
        except (DeadlineError, BodyError) as error:
            raise PrometheusError(f"{self.url}{path}: {error}") from error
        self.bytes_read += len(response.content)
        try:
            body = json.loads(response.content)
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError as error:
            raise PrometheusError(
                f"{self.url}{path}: HTTP {response.status_code}, not a Prometheus API answer"
            ) from error
        if response.status_code != 200 or body.get("status") != "success":
            raise PrometheusError(f"{self.url}{path}: {body.get('error') or response.status_code}")
        return body["data"]

    async def query(self, expr: str, at: float) -> list[Point]:
        """An instant vector at `at` (a native histogram as its classic series)."""
        data = await self._get("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})
        return _answer_points(data, "query")

    async def query_range(self, expr: str, start: float, end: float, step: float) -> list[Point]:
        """Every series' values at each step from `start` to `end`."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step}"}
        data = await self._get("/api/v1/query_range", params)
        return _answer_points(data, "query_range")

    async def metadata(self) -> dict[str, str]:
        """Declared metric types by family name, as the scraped targets exposed them."""
        data = await self._get("/api/v1/metadata", {})
        return {name: entries[0]["type"] for name, entries in data.items() if entries}


def _answer_points(data: Any, what: str) -> list[Point]:
    """The points of a query's `result`: float samples (`value`, `values`) and native
    histograms (`histogram`, `histograms`, as Prometheus 3 stores vLLM's histograms with
    `convert_classic_histograms_to_nhcb`), the latter as the classic series the rules read. A
    member of the wrong shape is an error naming the call, never a traceback."""
    try:
        points: list[Point] = []
        for item in data.get("result", []):
            metric = item["metric"]
            pairs = [item["value"]] if "value" in item else item.get("values", [])
            points += [_point(metric, pair) for pair in pairs]
            shapes = [item["histogram"]] if "histogram" in item else item.get("histograms", [])
            for at, histogram in shapes:
                points += native_histogram_points(metric, float(at), histogram)
        return points
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as error:
        raise PrometheusError(
            f"/api/v1/{what}: an answer of an unknown shape ({error!r})"
        ) from error


def _point(metric: dict[str, str], pair: list[Any]) -> Point:
    """A JSON `[timestamp, "value"]` pair of a series."""
    return Point(metric, float(pair[0]), float(pair[1]))


def native_histogram_points(
    metric: dict[str, str], at: float, histogram: dict[str, Any]
) -> list[Point]:
    """A native histogram sample as the classic `_bucket` (cumulative, by upper bound),
    `_count` and `_sum` series: custom buckets (NHCB) come back as the buckets vLLM exposed;
    exponential ones as their many small buckets, which histogram_quantile reads the same way.
    Prometheus's JSON gives each bucket as [boundary rule, lower, upper, count]."""
    name = metric.get("__name__", "")
    labels = {k: v for k, v in metric.items() if k != "__name__"}
    count = float(histogram["count"])
    counts: dict[float, float] = {}
    for _rule, _lower, upper, in_bucket in histogram.get("buckets") or []:
        counts[float(upper)] = counts.get(float(upper), 0.0) + float(in_bucket)
    points = [
        Point({**labels, "__name__": f"{name}_count"}, at, count),
        Point({**labels, "__name__": f"{name}_sum"}, at, float(histogram["sum"])),
    ]
    cumulative = 0.0
    for upper in sorted(counts):
        cumulative += counts[upper]
        if not math.isinf(upper):
            points.append(_bucket(name, labels, at, _le(upper), cumulative))
    points.append(_bucket(name, labels, at, "+Inf", count))
    return points


def _bucket(name: str, labels: dict[str, str], at: float, le: str, value: float) -> Point:
    return Point({**labels, "__name__": f"{name}_bucket", "le": le}, at, value)


def _le(upper: float) -> str:
    """A bucket bound as Prometheus writes `le` (1.0, 0.25, 2.5e-05)."""
    return repr(upper)


def target_names(points: Iterable[Point]) -> dict[tuple[str, str], str]:
    """A target name per (job, instance) serving vLLM: the instance, or job/instance if reused."""
    return names_of(
        {
            (p.labels.get("job", ""), p.labels.get("instance", ""))
            for p in points
            if is_vllm(p.labels.get("__name__", ""))
        }
    )


def names_of(pairs: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """A target name per (job, instance): the instance, or job/instance if reused."""
    instances = Counter(instance for _, instance in pairs)
    return {
        (job, instance): instance if instances[instance] == 1 else f"{job}/{instance}"
        for job, instance in pairs
    }


def instance_of(target: str) -> str:
    """The instance label of a target name (`job/instance` when an instance is reused)."""
    return target.rsplit("/", 1)[-1]


SeriesCache = dict[tuple[tuple[str, str], ...], Series]
"""A series per label set as Prometheus answered it: the same object every tick, so the store
recognises it at once (a fleet's tick is hundreds of thousands of points)."""
SERIES_CACHED = 1_000_000


def scrapes_from(
    points: Iterable[Point],
    names: dict[tuple[str, str], str],
    types: dict[str, str],
    cache: SeriesCache | None = None,
) -> tuple[TargetScrape, ...]:
    """One scrape per named target: its samples, or unreachable when Prometheus says up == 0."""
    cache = {} if cache is None else cache
    samples: dict[str, list[Sample]] = {name: [] for name in names.values()}
    down: dict[str, bool] = {}
    by_instance = {instance: name for (_, instance), name in names.items()}
    pods: dict[tuple[str, str], str] = {}
    gpus: list[Point] = []
    for point in points:
        instance = point.labels.get("instance", "")
        name = names.get((point.labels.get("job", ""), instance))
        metric = point.labels.get("__name__", "")
        if name is None and metric in (ALERTS, ALERTS_FOR_STATE):
            name = by_instance.get(instance)  # an alert keeps the labels its rule kept
        if name is None and dcgm.is_dcgm(metric) and not math.isnan(point.value):
            gpus.append(point)
        if name is None or math.isnan(point.value):
            continue
        if metric == UP:
            down[name] = point.value == 0
            continue
        if metric in RUNNING and (pod := dcgm.server_pod(point.labels)) is not None:
            pods.setdefault(pod, name)
        key = tuple(point.labels.items())
        series = cache.get(key)
        if series is None:
            series = cache[key] = Series(metric, _own_labels(point.labels))
        samples[name].append(Sample(series, point.value))
    for name, readings in _gpus_by_server(gpus, pods).items():
        samples[name] += dcgm.gpu_samples(readings)
    return tuple(_scrape(name, samples[name], down.get(name, False), types) for name in samples)


def _gpus_by_server(
    points: list[Point], pods: dict[tuple[str, str], str]
) -> dict[str, list[dcgm.GpuReading]]:
    """dcgm-exporter's readings by the server whose pod holds the GPU (GPUs of no server's
    pod are left out: another workload's, or an idle node's)."""
    found: dict[str, list[dcgm.GpuReading]] = {}
    for point in points:
        reading = dcgm.reading(point.labels, point.value)
        server = pods.get(reading.pod) if reading.pod is not None else None
        if server is not None:
            found.setdefault(server, []).append(reading)
    return found


def _own_labels(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The series' labels without the name and the labels Prometheus adds per target."""
    return tuple(sorted((k, v) for k, v in labels.items() if k not in DROPPED_LABELS))


def _scrape(name: str, samples: list[Sample], down: bool, types: dict[str, str]) -> TargetScrape:
    """A target's scrape from its Prometheus samples."""
    if down or not samples:
        why = "Prometheus reports the target down (up == 0)" if down else "no current samples"
        return TargetScrape(name, ScrapeStatus.UNREACHABLE, error=why)
    metric_types = {
        s.series.name: types.get(s.series.name) or sample_type(s.series.name) for s in samples
    }
    return TargetScrape(name, ScrapeStatus.OK, samples=tuple(samples), metric_types=metric_types)


Reader = Callable[[PrometheusClient, float, str | None], Awaitable[list[Point]]]
"""A tick's read of Prometheus other than the raw or alerts query (the fleet judged there),
told which server is on screen (None: the fleet table)."""


class PrometheusFeed:
    """Live frames from Prometheus: one instant query per tick covers every vLLM server."""

    def __init__(
        self,
        client: PrometheusClient,
        interval: float,
        alerts: bool = False,
        reader: Reader | None = None,
    ) -> None:
        self.client = client
        self.interval = interval
        self.alerts = alerts
        """Read the firing alerts and the headline series, not every raw series."""
        self.reader = reader
        """Read each tick this way instead (the rules judged in Prometheus)."""
        self.focused: str | None = None
        """The server on screen: a reader of less than every raw series reads its whole."""
        self._series: SeriesCache = {}
        self.paused = False
        self.names: dict[tuple[str, str], str] = {}
        self.types: dict[str, str] = {}
        self._known: set[tuple[str, str]] = set()
        self._catalogue_at = -math.inf

    async def frames(self, now: float) -> list[Frame]:
        """The servers' latest values as one frame (an event when Prometheus fails)."""
        try:
            if self.reader is not None:
                points = await self.reader(self.client, now, self.focused)
            else:
                query = ALERTS_QUERY if self.alerts else VLLM_SELECTOR
                points = await self.client.query(query, now)
            await self._refresh_catalogue(now)
        except PrometheusError as error:
            return [
                Frame(
                    now,
                    events=(Event(now, EventKind.PROMETHEUS_DOWN, self.client.url, str(error)),),
                )
            ]
        self._known |= set(target_names(points))
        self.names = names_of(self._known)
        if len(self._series) > SERIES_CACHED:
            self._series = {}
        return [Frame(now, scrapes_from(points, self.names, self.types, self._series))]

    async def _refresh_catalogue(self, now: float) -> None:
        """Metric metadata and the servers of the last hour, asked again every few minutes."""
        if abs(now - self._catalogue_at) > METADATA_REFRESH_S:
            self.types = await self.client.metadata()
            recent = await self.client.query(KNOWN_SERVERS, now)
            self._known |= {(p.labels.get("job", ""), p.labels.get("instance", "")) for p in recent}
            self._catalogue_at = now

    def status(self, now: float) -> FeedStatus:
        """Prometheus, polled at its interval."""
        mode = Mode.PROMETHEUS_ALERTS if self.alerts else Mode.PROMETHEUS
        if self.reader is not None:
            mode = Mode.PROMETHEUS_JUDGED
        return FeedStatus(mode, self.interval, self.paused)

    def control(self, action: Control, amount: float = 0.0) -> Moved:
        """Pause the display; poll faster or slower."""
        if action is Control.PAUSE:
            self.paused = not self.paused
            return Moved("paused" if self.paused else "live")
        if action in (Control.FASTER, Control.SLOWER):
            self.interval = next_step(INTERVAL_STEPS, self.interval, action is Control.SLOWER)
            return Moved(f"querying every {self.interval:g} s")
        return Moved(UNAVAILABLE, changed=False)

    def focus(self, target: str | None) -> None:
        """The server on screen (judged in Prometheus, its raw series are read too)."""
        self.focused = target

    def follow(self, server: ManagedServer) -> None:
        """Prometheus follows no managed server."""

    def note(self, event: Event) -> None:
        """Prometheus mode manages no server: nothing to note."""

    async def close(self) -> None:
        """Close the HTTP client."""
        await self.client.close()


async def history_frames(
    client: PrometheusClient,
    start: float,
    end: float,
    step: float,
    instances: Sequence[str] | None = None,
) -> list[Frame]:
    """Frames at every step of a past window, from one range query (of the `instances` only,
    when given: a drill-down)."""
    points = await client.query_range(raw_selector(instances), start, end, step)
    return frames_of(points, await client.metadata())


def raw_selector(instances: Sequence[str] | None) -> str:
    """Every raw series vtop reads, of these instances only when given (and every GPU
    dcgm-exporter reports, whose instance is the exporter's: joined to the servers by pod)."""
    if instances is None:
        return VLLM_SELECTOR
    own = VLLM_SELECTOR[:-1] + f", {of_instances(instances)}}}"
    return f"{own} or {DCGM_SELECTOR}"


def of_instances(instances: Iterable[str]) -> str:
    """The matcher of these instances: `instance=~"10\\.0\\.0\\.1:8000|..."` (each a literal
    of an RE2 pattern, written as a PromQL string)."""
    pattern = "|".join(sorted(re.escape(i).replace("\\", "\\\\") for i in instances))
    return f'instance=~"{pattern}"'


def frames_of(points: list[Point], types: dict[str, str]) -> list[Frame]:
    """The points of a range query as a frame per step."""
    names = target_names(points)
    by_time: dict[float, list[Point]] = {}
    for point in points:
        by_time.setdefault(point.timestamp, []).append(point)
    cache: SeriesCache = {}
    return [Frame(at, scrapes_from(by_time[at], names, types, cache)) for at in sorted(by_time)]


async def known_servers(url: str, scrape_options: ScrapeOptions, now: float) -> int:
    """How many servers exposed vLLM series to this Prometheus in the last hour."""
    client = PrometheusClient(url, scrape_options)
    try:
        return len(await client.query(KNOWN_SERVERS, now))
    finally:
        await client.close()


async def past_window(
    url: str,
    since_s: float,
    step_s: float,
    scrape_options: ScrapeOptions,
    now: float,
    instances: Sequence[str] | None = None,
) -> list[Frame]:
    """The frames of [now - since, now] of every vLLM server a Prometheus server scrapes (of
    the `instances` only, when given), the client closed after (PrometheusError when it holds
    no vLLM series then)."""
    client = PrometheusClient(url, scrape_options)
    try:
        frames = await history_frames(client, now - since_s, now, step_s, instances)
    finally:
        await client.close()
    if not frames:
        raise PrometheusError(f"{url}: no vLLM series (vllm:*) in the last {since_s:.0f} s")
    return frames
