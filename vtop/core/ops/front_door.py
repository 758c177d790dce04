"""`vtop probe`: canaries through the URL users call, the engine scraped around them, and the
path's rules on both (the same rules the dashboard and `vtop diagnose --probe` run).

The engine's view of the same moments comes from `/metrics` at the probed URL when the proxy
passes it, else from the engine's own URL; it covers every request of the window, the canaries'
and the others', which the report says.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.frame import Frame, ProbeResult, RequestSpan
from vtop.core.ingest.canary_feed import CanaryFeed
from vtop.core.ingest.feeds import sample
from vtop.core.ingest.poller import poll
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.rules.engine import Finding
from vtop.core.rules.rule import Rule
from vtop.core.session.session import Session
from vtop.core.status import Status, worst_status
from vtop.core.store.probe_series import PROBE_TARGET

Result = TypeVar("Result")
HTTP_OK = 200


@dataclass(frozen=True)
class EngineView:
    """What vLLM's own metrics say about the window of the canaries."""

    target: str | None
    """The engine scraped (None: none answered with vLLM metrics)."""
    ttft_mean_s: float | None = None
    itl_mean_s: float | None = None
    requests: float | None = None
    """Requests that got a first token in the window (the canaries' and any others')."""
    rejected: float | None = None
    """Requests rejected at admission in the window (None when the server has no counter)."""


@dataclass(frozen=True)
class FrontDoor:
    """The canaries, the engine's view, and the path's findings."""

    url: str
    canaries: tuple[ProbeResult, ...]
    engine: EngineView
    findings: tuple[Finding, ...]
    spans: tuple[RequestSpan, ...] = ()
    """vLLM's own spans of the canaries (found by their trace ids), when spans were received."""
    listening: tuple[str, ...] = ()
    """Where vtop received spans (empty: it did not listen)."""

    def span_of(self, canary: ProbeResult) -> RequestSpan | None:
        """The engine's span of a canary (None: none arrived for it)."""
        return next(
            (s for s in self.spans if canary.trace_id and s.trace_id == canary.trace_id), None
        )

    @property
    def verdict(self) -> Status:
        """critical or warning (the path's findings), ok, or unknown when no finding explains
        why no canary got a streamed answer (nothing listens, not an OpenAI API): never ok
        without a stream that reached the client."""
        if self.findings:
            return worst_status(f.rule.severity for f in self.findings)
        if not any(probe.status == HTTP_OK for probe in self.canaries):
            return Status.UNKNOWN
        return Status.OK

    @property
    def unanswered(self) -> str | None:
        """Why no canary got a streamed answer, when none did and no finding says why."""
        if self.verdict != Status.UNKNOWN:
            return None
        failed = self.canaries[0] if self.canaries else None
        if failed is None:
            return "no canary was sent"
        why = f"HTTP {failed.status}" if failed.status is not None else "no answer"
        return f"{why} ({failed.error})" if failed.error else why

    @property
    def exit_code(self) -> int:
        """0 ok, 1 warning, 2 critical, 3 no canary got an answer."""
        return self.verdict.exit_code


async def probe_front_door(feed: CanaryFeed, rules: list[Rule]) -> FrontDoor:
    """The canary feed's frames, judged by the path's rules (the feed closed after)."""
    frames: list[Frame] = []
    try:
        async with contextlib.aclosing(sample(feed)) as sampled:
            frames = [frame async for frame in sampled]
    finally:
        await feed.close()
    canaries = tuple(probe for frame in frames for probe in frame.probes)
    return judged(feed.url, frames, canaries, rules)


def judged(
    url: str, frames: list[Frame], canaries: tuple[ProbeResult, ...], rules: list[Rule]
) -> FrontDoor:
    """The path's rules over the frames: on the engine's target when it answered (its series
    and the canaries' together), else on the canaries alone."""
    session = Session(rules, DiagnoseOptions(read_gpus=False))
    for frame in frames:
        session.ingest(frame)
    answered = [t for t, view in session.targets.items() if view.last_ok_scrape is not None]
    target = answered[0] if answered else None
    now = frames[-1].timestamp
    view = session.targets[target] if target is not None else None
    pseudo = view.config.pseudo_metrics() if view is not None else {}
    triage = session.engine.evaluate(session.store, target or PROBE_TARGET, now, pseudo)
    path = tuple(f for f in triage.findings if f.rule.phase == "path")
    return FrontDoor(url, canaries, engine_view(session, target, now, frames), path)


def engine_view(
    session: Session, target: str | None, now: float, frames: list[Frame]
) -> EngineView:
    """Mean TTFT and ITL of the window from the engine's counters."""
    if target is None:
        return EngineView(None)
    store, window, only = session.store, now - frames[0].timestamp + 1, {"instance": target}

    def grown(name: str) -> float | None:
        values = store.sum_by(store.increase, name, now, window, only)
        return sum(values.values()) if values else None

    def mean(name: str) -> float | None:
        total, count = grown(f"{name}_sum"), grown(f"{name}_count")
        return total / count if total is not None and count else None

    return EngineView(
        target,
        mean("vllm:time_to_first_token_seconds"),
        mean("vllm:inter_token_latency_seconds"),
        grown("vllm:time_to_first_token_seconds_count"),
        grown("vllm:admission_rejections_total"),
    )


async def beside_engine(
    run: Awaitable[Result], engine_url: str, scraping: ScrapeOptions
) -> tuple[Result, EngineView]:
    """`run` (a load, a probe) with the engine scraped before and after it: what vLLM's own
    metrics say about the same moments."""
    engines = [VllmHttpSource(engine_url, scraping)]
    try:
        before = await poll(engines, None, time.time())
        result = await run
        after = await poll(engines, None, time.time())
    finally:
        await engines[0].close()
    session = Session([], DiagnoseOptions(read_gpus=False))
    for frame in (before, after):
        session.ingest(frame)
    answered = [t for t, view in session.targets.items() if view.last_ok_scrape is not None]
    target = answered[0] if answered else None
    return result, engine_view(session, target, after.timestamp, [before, after])


def with_canary_spans(door: FrontDoor, spans: list[RequestSpan], listening: list[str]) -> FrontDoor:
    """The front door with vLLM's spans of its canaries (their trace ids; vLLM continues the
    canary's traceparent), and where they were received."""
    traces = {canary.trace_id for canary in door.canaries if canary.trace_id}
    mine = tuple(span for span in spans if span.trace_id in traces)
    return dataclasses.replace(door, spans=mine, listening=tuple(listening))


def path_time_s(canary: ProbeResult, span: RequestSpan) -> float | None:
    """What the path added to the canary's first token: the client's time to it less the
    engine's (from the request's arrival at vLLM's API server)."""
    if canary.first_token_s is None or span.ttft_s is None:
        return None
    return max(0.0, canary.first_token_s - span.ttft_s)


def held_back(client_ttft_s: float | None, client_tpot_s: float | None, engine: EngineView) -> bool:
    """The client's first token far later than the engine's and its tokens far denser than the
    engine produces them: the stream arrives in lumps."""
    if None in (client_ttft_s, client_tpot_s, engine.ttft_mean_s, engine.itl_mean_s):
        return False
    assert client_ttft_s is not None and client_tpot_s is not None
    assert engine.ttft_mean_s is not None and engine.itl_mean_s is not None
    return client_ttft_s > 3 * engine.ttft_mean_s and client_tpot_s < engine.itl_mean_s / 3
