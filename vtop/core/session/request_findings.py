"""Which requests made others wait, from vLLM's own request spans: head-of-line blocking by
long prompts' prefill, slot hogs, and the slow requests neither explains.

Each span gives a request's timeline on the engine's clock: it arrived (the span's start), was
scheduled (first token less prefill), produced its first token (arrival plus TTFT) and ended.
vLLM's scheduler (`vllm/v1/core/sched/scheduler.py`) serves RUNNING requests first, a prompt
still in prefill included, each taking up to the step's token budget; WAITING requests get
what is left. So a prompt longer than the budget, prefilled in chunks, leaves nothing for the
requests behind it until its last chunk: they are scheduled in that step, as its prefill ends
(head-of-line blocking). A request that waits for a sequence slot is scheduled instead when a
running request finishes; when the slots are held by generations running to their max_tokens,
far longer than the rest, those are slot hogs. Both judgements rest on the requests' own
times: a wait that the long prefills do not cover, or that ends when nothing ended, is not
blamed on them.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from vtop.core.config.inference import is_inferred
from vtop.core.config.server_config import ServerConfig
from vtop.core.frame import RequestSpan
from vtop.core.session.request_view import TimeSplit, ranked, time_split
from vtop.core.status import Status

MIN_REQUESTS = 5
"""Fewer finished requests than this make no population to compare with."""
LONG_PROMPT_FACTOR = 4.0
"""A long prompt: at least this many times the median prompt (and over the step budget when
it is known: shorter ones fit one step and block nobody)."""
WAITED_FACTOR = 2.0
"""A victim waited in the queue at least this many times its own prefill, and longer than a
decode step: its wait is not its own work."""
COVERED = 0.8
"""The share of a victim's wait that the culprits must cover."""
HOG_OUTPUT_SHARE = 0.9
"""A slot hog generated at least this share of its max_tokens..."""
HOG_FACTOR = 4.0
"""...and held its slot (scheduled to finished) at least this many times the median request
did: its own generation, not a wait in the queue, made it long."""
VICTIMS_SHARE = 0.1
"""A finding needs at least two victims and this share of the requests that could be."""
OUTLIER_FACTOR = 4.0
"""A request this many times the median end-to-end latency is an outlier when no finding
explains it."""
LISTED = 5
"""Culprits and victims named in a finding (the count says how many there were)."""


@dataclass(frozen=True)
class RequestFinding:
    """A cause found in the requests' own timelines, with the requests as evidence."""

    kind: str
    """`head-of-line` or `slot-hog`."""
    severity: Status
    title: str
    culprits: tuple[RequestSpan, ...]
    """The long prompts, or the hogs, longest first."""
    victims: tuple[RequestSpan, ...]
    """The requests that waited behind them, longest wait first."""
    covered: float
    """The share of the victims' queue time the culprits account for."""
    changes: tuple[str, ...]
    """`vllm serve` flag changes, computed from the requests and the config (or said to need
    a value that is unknown)."""
    why: str


@dataclass(frozen=True)
class RequestTriage:
    """What the window's request spans show."""

    spans: int
    findings: tuple[RequestFinding, ...]
    outliers: tuple[RequestSpan, ...]
    """Slow requests (OUTLIER_FACTOR x the median) that no finding names: listed, never hidden."""


@dataclass(frozen=True)
class Timeline:
    """A request's moments on the wall clock, from its span."""

    span: RequestSpan
    queued: float
    scheduled: float
    first_token: float
    ended: float


def timeline(span: RequestSpan) -> Timeline | None:
    """The request's moments, when vLLM sent the times they need."""
    if span.ttft_s is None or span.prefill_s is None or span.queue_s is None:
        return None
    first_token = span.arrival_s + span.ttft_s
    scheduled = first_token - span.prefill_s
    return Timeline(span, scheduled - span.queue_s, scheduled, first_token, span.end_s)


def waited_behind(
    span: RequestSpan, spans: Sequence[RequestSpan]
) -> list[tuple[RequestSpan, float]]:
    """The requests that ran while `span` waited in the queue, with the seconds of its wait
    each overlapped, the longest first (empty when it did not wait, or its times are unknown)."""
    mine = timeline(span)
    if mine is None or mine.scheduled <= mine.queued:
        return []
    found = []
    for other in spans:
        theirs = timeline(other)
        if theirs is None or other is span:
            continue
        overlap = min(mine.scheduled, theirs.ended) - max(mine.queued, theirs.scheduled)
        if overlap > 0:
            found.append((other, overlap))
    return sorted(found, key=lambda pair: -pair[1])


def triage_requests(
    spans: Sequence[RequestSpan],
    budget: int | None = None,
    cap: int | None = None,
    max_model_len: int | None = None,
    inferred: frozenset[str] = frozenset(),
) -> RequestTriage:
    """Head-of-line blocking and slot hogs among the spans, and the outliers neither explains
    (`budget`: max_num_batched_tokens, `cap`: max_num_seqs, when known; `inferred` names
    those vtop inferred, which the findings say)."""
    timelines = [t for s in spans if (t := timeline(s)) is not None]
    findings = [
        finding
        for finding in (
            head_of_line(timelines, budget, max_model_len, "max_num_batched_tokens" in inferred),
            slot_hogs(timelines, cap, "max_num_seqs" in inferred),
        )
        if finding is not None
    ]
    named = {id(s) for f in findings for s in (*f.culprits, *f.victims)}
    e2e = [s.e2e_s for s in spans if s.e2e_s is not None]
    outliers: tuple[RequestSpan, ...] = ()
    if len(e2e) >= MIN_REQUESTS:
        bar = OUTLIER_FACTOR * statistics.median(e2e)
        slow = [s for s in spans if s.e2e_s is not None and s.e2e_s >= bar and id(s) not in named]
        outliers = tuple(sorted(slow, key=lambda s: -(s.e2e_s or 0.0))[:LISTED])
    return RequestTriage(len(spans), tuple(findings), outliers)


def head_of_line(
    timelines: list[Timeline],
    budget: int | None,
    max_model_len: int | None = None,
    budget_inferred: bool = False,
) -> RequestFinding | None:
    """Short requests that waited while long prompts were prefilled, and were scheduled as a
    long prefill ended."""
    prompts = [t for t in timelines if t.span.prompt_tokens is not None]
    if len(prompts) < MIN_REQUESTS:
        return None
    median_prompt = statistics.median(t.span.prompt_tokens or 0 for t in prompts)
    floor = max(LONG_PROMPT_FACTOR * median_prompt, budget or 0)
    long = [t for t in prompts if (t.span.prompt_tokens or 0) > floor]
    short = [t for t in prompts if (t.span.prompt_tokens or 0) <= median_prompt * 2]
    if not long or not short:
        return None
    step = _step_s(timelines)
    lag = _lag_s(timelines)
    prefills = [_prefill_reach(t, budget, step, lag) for t in long]
    victims: list[tuple[Timeline, float]] = []
    for request in short:
        waited = request.scheduled - request.queued
        if waited <= max(WAITED_FACTOR * (request.span.prefill_s or 0.0), step):
            continue
        covered = _overlap(request.queued, request.scheduled, prefills) / waited
        released = any(start <= request.scheduled <= end for start, end in prefills)
        if covered >= COVERED and released:
            victims.append((request, covered))
    if len(victims) < max(2, math.ceil(VICTIMS_SHARE * len(short))):
        return None
    victims.sort(key=lambda pair: -(pair[0].scheduled - pair[0].queued))
    shown_long = sorted(long, key=lambda t: -(t.span.prompt_tokens or 0))
    p90_short = _percentile([t.span.prompt_tokens or 0 for t in short], 0.9)
    waits = sum(v.scheduled - v.queued for v, _ in victims)
    covered_share = sum((v.scheduled - v.queued) * c for v, c in victims) / waits
    return RequestFinding(
        "head-of-line",
        Status.WARNING,
        f"{len(victims)} short request(s) waited behind {len(long)} long prompt(s)' prefill",
        tuple(t.span for t in shown_long[:LISTED]),
        tuple(v.span for v, _ in victims[:LISTED]),
        covered_share,
        _prefill_changes(budget, p90_short, max_model_len),
        "a prompt longer than the step's token budget is prefilled in chunks, each taking the "
        "whole budget, and the requests behind it are scheduled only in its last chunk's step; "
        "a long-prefill threshold caps its chunk so short requests join every step"
        + (
            f" (the budget, {budget}, is inferred)"
            if budget is not None and budget_inferred
            else ""
        ),
    )


def _prefill_reach(
    long: Timeline, budget: int | None, step: float, lag: float
) -> tuple[float, float]:
    """A long prompt's prefill, widened by two steps and the API server's lag each side: a
    request behind it is scheduled in its last chunk's step or the one after. A chunk's step
    is the prefill over its chunks when the budget is known (a prefill step is longer than a
    decode step)."""
    chunks = math.ceil((long.span.prompt_tokens or 0) / budget) if budget else 0
    chunk_s = (long.first_token - long.scheduled) / chunks if chunks else 0.0
    slack = 2 * max(step, chunk_s) + lag
    return long.scheduled - slack, long.first_token + slack


def _prefill_changes(
    budget: int | None, p90_short: float, max_model_len: int | None
) -> tuple[str, ...]:
    """The long-prefill threshold that leaves a step room for the short prompts, and a larger
    budget."""
    if budget is not None:
        threshold = max(budget // 4, budget - math.ceil(p90_short))
        return (
            f"--long-prefill-token-threshold {threshold}",
            f"--max-num-batched-tokens {budget * 2}",
        )
    if max_model_len is not None:
        # vLLM's own choice when it caps partial prefills: 4% of the context
        threshold = max(1, int(max_model_len * 0.04))
        return (
            f"--long-prefill-token-threshold {threshold} (4% of the context: the step budget is "
            "unknown; give --vllm-args or the log for a value that fits the budget)",
        )
    return (
        "--long-prefill-token-threshold N (N under the step budget less the short prompts' "
        f"{math.ceil(p90_short)} tokens; the budget is unknown)",
    )


def slot_hogs(
    timelines: list[Timeline], cap: int | None, cap_inferred: bool = False
) -> RequestFinding | None:
    """Requests that waited for a slot while most slots ran generations to their max_tokens,
    far longer than the rest, and were scheduled as a request finished."""
    ended = [t for t in timelines if t.ended > t.scheduled]
    if len(ended) < MIN_REQUESTS:
        return None
    median_held = statistics.median(t.ended - t.scheduled for t in ended)
    hogs = [t for t in ended if _is_hog(t, median_held)]
    others = [t for t in ended if not _is_hog(t, median_held)]
    if not hogs or not others:
        return None
    step = _step_s(timelines)
    slack = 2 * step + _lag_s(timelines)
    slots = cap or _most_running(timelines, slack)
    held = max(1, math.ceil(slots / 2))
    runs = [(t.scheduled, t.ended) for t in hogs]
    ends = [t.ended for t in timelines]
    victims: list[tuple[Timeline, float]] = []
    for request in others:
        waited = request.scheduled - request.queued
        if waited <= max(WAITED_FACTOR * (request.span.prefill_s or 0.0), step):
            continue
        covered = _held_at_least(request.queued, request.scheduled, runs, held) / waited
        released = any(abs(request.scheduled - end) <= slack for end in ends)
        if covered >= COVERED and released:
            victims.append((request, covered))
    if len(victims) < max(2, math.ceil(VICTIMS_SHARE * len(others))):
        return None
    victims.sort(key=lambda pair: -(pair[0].scheduled - pair[0].queued))
    waits = sum(v.scheduled - v.queued for v, _ in victims)
    covered_share = sum((v.scheduled - v.queued) * c for v, c in victims) / waits
    typical = _percentile([t.span.output_tokens or 0 for t in others], 0.9)
    if cap is None:
        cap_text = f"unknown ({slots} ran at once at most, in the spans)"
    else:
        cap_text = f"{cap} (inferred)" if cap_inferred else f"{cap}"
    return RequestFinding(
        "slot-hog",
        Status.WARNING,
        f"{len(hogs)} generation(s) to max_tokens held the slots while "
        f"{len(victims)} request(s) waited",
        tuple(sorted((t.span for t in hogs), key=lambda s: -(s.e2e_s or 0.0))[:LISTED]),
        tuple(v.span for v, _ in victims[:LISTED]),
        covered_share,
        (
            f"max_tokens <= {max(1, math.ceil(2 * typical))} at the gateway (twice the other "
            "requests' 90th percentile output)",
            f"--max-num-seqs above {cap or slots}, if the KV cache has room for more sequences",
        ),
        f"max_num_seqs is {cap_text}; at least {held} slot(s) ran generations to their "
        "max_tokens through the victims' waits, and each victim was scheduled as a request "
        "finished",
    )


def _is_hog(request: Timeline, median_held: float) -> bool:
    """A generation run to its max_tokens that held its slot far longer than the median."""
    span = request.span
    if span.max_tokens is None or span.output_tokens is None:
        return False
    long_output = span.output_tokens >= HOG_OUTPUT_SHARE * span.max_tokens
    return long_output and request.ended - request.scheduled >= HOG_FACTOR * median_held


def _step_s(timelines: list[Timeline]) -> float:
    """A decode step's length: the median time per output token (10 ms when unknown)."""
    tpots = [t.span.tpot_s for t in timelines if t.span.tpot_s is not None]
    return statistics.median(tpots) if tpots else 0.01


def _lag_s(timelines: list[Timeline]) -> float:
    """The API server's part of a request's time, the median over the requests: end-to-end
    less the engine's queue and inference (vLLM times those on the engine's clock and the
    others on the API server's, which hears of each token a little later)."""
    lags = [
        max(0.0, t.span.e2e_s - t.span.queue_s - t.span.inference_s)
        for t in timelines
        if t.span.e2e_s is not None
        and t.span.queue_s is not None
        and t.span.inference_s is not None
    ]
    return statistics.median(lags) if lags else 0.0


def _overlap(start: float, end: float, intervals: list[tuple[float, float]]) -> float:
    """Seconds of [start, end] inside the union of the intervals."""
    covered, reached = 0.0, start
    for low, high in sorted(intervals):
        low, high = max(low, reached), min(high, end)
        if high > low:
            covered += high - low
            reached = high
    return covered


def _held_at_least(start: float, end: float, runs: list[tuple[float, float]], held: int) -> float:
    """Seconds of [start, end] during which at least `held` of the runs were running."""
    edges = sorted({start, end, *(t for run in runs for t in run if start < t < end)})
    total = 0.0
    for low, high in itertools.pairwise(edges):
        middle = (low + high) / 2
        if sum(1 for a, b in runs if a <= middle < b) >= held:
            total += high - low
    return total


def _most_running(timelines: list[Timeline], slack: float) -> int:
    """The most requests the spans show running at once (a lower bound of max_num_seqs). A
    request scheduled within `slack` of another's end took its slot: the two moments are on
    clocks a little apart, and are not counted as running together."""
    moments = sorted(
        [(min(t.scheduled + slack, t.ended), 1) for t in timelines]
        + [(t.ended, -1) for t in timelines],
        key=lambda pair: (pair[0], pair[1]),
    )
    running = most = 0
    for _, change in moments:
        running += change
        most = max(most, running)
    return max(1, most)


def _percentile(values: list[int], q: float) -> float:
    """The q-quantile of the values (nearest rank)."""
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)])


@dataclass(frozen=True)
class RequestEvidence:
    """What the window's request spans say, beside the metrics' triage."""

    listening: tuple[str, ...]
    """Where vtop received them."""
    received: int
    """Spans of requests that finished in the window."""
    dropped: int
    refused: int
    splits: tuple[TimeSplit, ...]
    triage: RequestTriage
    slowest: tuple[RequestSpan, ...]

    @property
    def troubled(self) -> bool:
        """A finding names requests that made others wait."""
        return bool(self.triage.findings)


def request_evidence(
    spans: Sequence[RequestSpan],
    window: tuple[float, float],
    listening: Sequence[str],
    config: ServerConfig,
    dropped: int = 0,
    refused: int = 0,
) -> RequestEvidence:
    """The spans of requests that finished in `window` (start, end), judged with the
    server's budget, cap and context where known."""
    start, end = window
    inside = [s for s in spans if start <= s.end_s <= end]
    budget, cap = config.number("max_num_batched_tokens"), config.number("max_num_seqs")
    context = config.number("max_model_len")
    inferred = frozenset(name for name, s in config.settings.items() if is_inferred(s))
    triage = triage_requests(
        inside,
        budget=int(budget) if budget else None,
        cap=int(cap) if cap else None,
        max_model_len=int(context) if context else None,
        inferred=inferred,
    )
    return RequestEvidence(
        tuple(listening),
        len(inside),
        dropped,
        refused,
        tuple(time_split(inside)),
        triage,
        tuple(ranked(inside, "e2e", LISTED)),
    )
