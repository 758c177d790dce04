"""The fleet judged inside Prometheus: a few queries a tick instead of every raw series.

Each tick reads the servers' headline series and their `vllm:cache_config_info` (what the
fleet table shows, and the settings each server reports), groups the servers by those
settings, and asks Prometheus, once per group and once for the fleet rules, which rule
conditions hold for which server (the judge writes the queries: rules/judge.py). The answers
become the `ALERTS` series Prometheus would write for vtop's exported rules, so the session
shows them as the `--alerts` mode does, with no rule file loaded into Prometheus.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Protocol

from vtop.core.catalog import ALERTS, ALERTS_FOR_STATE
from vtop.core.config.cache_config import cache_config_from_labels
from vtop.core.config.server_config import assemble
from vtop.core.frame import Frame
from vtop.core.ingest.sources import dcgm
from vtop.core.ingest.sources.prometheus import (
    HEADLINE_SELECTOR,
    Point,
    PrometheusClient,
    PrometheusError,
    Reader,
    frames_of,
    instance_of,
    of_instances,
    raw_selector,
)
from vtop.core.ingest.sources.vllm_http import ScrapeOptions

JUDGED_SELECTOR = HEADLINE_SELECTOR.replace(
    "|num_preemptions_total)",
    "|num_preemptions_total|cache_config_info"
    "|current_qps|healthy_pods_total|routing_decisions_total|request_errors_total"
    "|num_incoming_requests_total|request_latency_seconds_(bucket|count|sum))",
).replace('|up"}', f'|up|{dcgm.SELECTOR}"}}')
"""The headline series, the settings each engine reports (`vllm:cache_config_info`), a
router's own series (a router is told from a server by them, and shown as its view) and
dcgm-exporter's GPU fields (joined to the servers by pod: vtop judges the GPU rules)."""
CACHE_CONFIG_INFO = ("vllm:cache_config_info", "ray_vllm:cache_config_info")
ROUTER_MARK = "vllm:current_qps"
"""A series only the production-stack router exports."""
ENGINE_LATENCY_SELECTOR = '{__name__=~"vllm:e2e_request_latency_seconds_(bucket|count|sum)"}'
"""Read too where a router is seen: its view of a backend is set beside the engine's own."""


def _routed(points: list[Point]) -> bool:
    return any(p.labels.get("__name__") == ROUTER_MARK for p in points)


class Judge(Protocol):
    """What writes the judged queries and turns their answers into firing alerts."""

    def target_query(self, settings: Mapping[str, float]) -> str | None:
        """The per-server conditions for servers with these settings, as one query."""
        ...

    def fleet_query(self) -> str | None:
        """The fleet rules' conditions, as one query."""
        ...

    def alerts(
        self, now: float, answers: Iterable[Mapping[str, str]]
    ) -> list[tuple[dict[str, str], float]]:
        """The ALERTS series' labels (instance and job kept) of what holds at `now`, each
        with the time it began to hold."""
        ...


def server_settings(points: Iterable[Point]) -> dict[str, dict[str, float]]:
    """The `vtop:` settings (without the prefix) each instance's engines report."""
    configs: dict[str, list[dict[str, str]]] = {}
    for point in points:
        if point.labels.get("__name__") in CACHE_CONFIG_INFO:
            configs.setdefault(point.labels.get("instance", ""), []).append(point.labels)
    found: dict[str, dict[str, float]] = {}
    for instance, labels in configs.items():
        config = assemble(cache_configs=[cache_config_from_labels(one) for one in labels])
        found[instance] = {
            name.removeprefix("vtop:"): value
            for name, value in config.pseudo_metrics().items()
            if value is not None
        }
    return found


MOST_GROUPS = 8
"""Settings groups queried a tick at most: servers whose settings differ (a KV pool sized by
each GPU's free memory) would otherwise cost a query each."""


def settings_groups(
    instances: Iterable[str], settings: Mapping[str, Mapping[str, float]]
) -> dict[frozenset[tuple[str, float]], list[str]]:
    """The servers by the settings they share (a server reporting none has none known). Past
    MOST_GROUPS groups, the smallest are judged as one group on the settings they all share:
    a rule needing one in which they differ is not judged for them in Prometheus."""
    groups: dict[frozenset[tuple[str, float]], list[str]] = {}
    for instance in sorted(set(instances)):
        key = frozenset(settings.get(instance, {}).items())
        groups.setdefault(key, []).append(instance)
    if len(groups) <= MOST_GROUPS:
        return groups
    largest = sorted(groups.items(), key=lambda group: (-len(group[1]), sorted(group[0])))
    kept = dict(largest[: MOST_GROUPS - 1])
    rest = largest[MOST_GROUPS - 1 :]
    shared = frozenset.intersection(*(key for key, _ in rest))
    kept[shared] = sorted(kept.get(shared, []) + [i for _, members in rest for i in members])
    return kept


def restricted(query: str, instances: Iterable[str]) -> str:
    """The query's answers for these servers only (a group sharing settings), matched on the
    instance label of a series every scraped target has."""
    return f"({query}) and on (instance) up{{{of_instances(instances)}}}"


def judged_queries(judge: Judge, instances: Iterable[str], base: list[Point]) -> list[str]:
    """The queries of one evaluation: one per group of servers sharing settings (restricted to
    its servers when there are several groups) and one for the fleet rules."""
    groups = settings_groups(instances, server_settings(base))
    queries: list[str] = []
    for key, members in groups.items():
        query = judge.target_query(dict(key))
        if query is not None:
            queries.append(query if len(groups) == 1 else restricted(query, members))
    fleet = judge.fleet_query()
    return queries + ([fleet] if fleet is not None else [])


async def judged_tick(
    client: PrometheusClient, judge: Judge, now: float, focus: str | None = None
) -> list[Point]:
    """The headline series at `now` (every raw series of the server on screen, `focus`) and
    the alerts of what the judge's queries find: a window of one step."""
    points = await judged_window(client, judge, now, now, step=1.0)
    if focus is None:
        return points
    return with_raw(points, await client.query(raw_selector([instance_of(focus)]), now))


async def judged_window(
    client: PrometheusClient, judge: Judge, start: float, end: float, step: float
) -> list[Point]:
    """As `judged_tick` at every step of a past window: the settings of its end, the judge's
    holds carried from step to step (a condition must hold for its `for:` across them)."""
    base = await client.query_range(JUDGED_SELECTOR, start, end, step)
    if _routed(base):
        base += await client.query_range(ENGINE_LATENCY_SELECTOR, start, end, step)
    last = max((p.timestamp for p in base), default=end)
    at_end = [p for p in base if p.timestamp == last]
    instances = {p.labels.get("instance", "") for p in base if "instance" in p.labels}
    queries = judged_queries(judge, instances, at_end)
    answers = await asyncio.gather(
        *(client.query_range(query, start, end, step) for query in queries)
    )
    by_time: dict[float, list[Mapping[str, str]]] = {p.timestamp: [] for p in base}
    for answer in answers:
        for point in answer:
            by_time.setdefault(point.timestamp, []).append(point.labels)
    alerts: list[Point] = []
    for at in sorted(by_time):
        alerts += alert_points(judge.alerts(at, by_time[at]), at)
    return base + alerts


def with_raw(base: list[Point], raw: list[Point]) -> list[Point]:
    """The headline points with a server's raw ones added (each series once)."""
    merged = {tuple(sorted(p.labels.items())): p for p in base}
    merged.update({tuple(sorted(p.labels.items())): p for p in raw})
    return list(merged.values())


def alert_points(alerts: list[tuple[dict[str, str], float]], at: float) -> list[Point]:
    """ALERTS samples (value 1) of the given label sets, and ALERTS_FOR_STATE samples (when
    each began to hold), as Prometheus writes them for a firing alert."""
    points = [Point({**labels, "__name__": ALERTS}, at, 1.0) for labels, _ in alerts]
    for labels, since in alerts:
        state = {k: v for k, v in labels.items() if k != "alertstate"}
        points.append(Point({**state, "__name__": ALERTS_FOR_STATE}, at, since))
    return points


SEED_S = 60.0
"""How far back the first tick asks: the longest `for:` a rule holds for is a minute, so the
first screen shows what has held for it already, not an empty fleet for a minute."""
SEED_STEP_S = 5.0


def judged_reader(judge: Judge, interval_s: float) -> Reader:
    """The feed's read of a tick with the rules judged in Prometheus by `judge`; the first
    tick reads the last minute too, so a condition that held through it is a finding at once;
    the server on screen is read whole (its charts and figures)."""
    seeded = False

    async def read(client: PrometheusClient, now: float, focus: str | None) -> list[Point]:
        nonlocal seeded
        if seeded:
            return await judged_tick(client, judge, now, focus)
        step = max(interval_s, SEED_STEP_S)
        points = await judged_window(client, judge, now - SEED_S, now, step)
        seeded = True
        newest = max((p.timestamp for p in points), default=now)
        return [Point(p.labels, now, p.value) for p in points if p.timestamp == newest]

    return read


async def judged_past_window(
    url: str, since_s: float, step_s: float, scrape_options: ScrapeOptions, now: float, judge: Judge
) -> list[Frame]:
    """As `past_window`, the rules judged in Prometheus: the frames of [now - since, now] with
    each server's headline series and the alerts of what held (PrometheusError when
    Prometheus holds no vLLM series then)."""
    client = PrometheusClient(url, scrape_options)
    try:
        points = await judged_window(client, judge, now - since_s, now, step_s)
        frames = frames_of(points, await client.metadata())
    finally:
        await client.close()
    if not frames:
        raise PrometheusError(f"{url}: no vLLM series (vllm:*) in the last {since_s:.0f} s")
    return frames
