"""What the dashboard shows, built once per refresh from the session and the feed (pure).

The dashboard screen reads this value and nothing else: the header by priority (state first,
then what is watched), the one-line action of the primary finding, the banner, the findings and
whether they are current or the last ones seen before the data stopped, the chart history, the
TTFT buckets of the window, the GPUs, the events and the log.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from vtop.core.config.server_config import ServerConfig
from vtop.core.frame import EventKind, GpuSnapshot, ProbeResult
from vtop.core.ingest.feed_status import FeedStatus, Mode
from vtop.core.rules.engine import Finding, ProposedChange, Triage
from vtop.core.session.facts import LIVE, TargetFacts, target_detail, target_facts
from vtop.core.session.history import ChartHistory
from vtop.core.session.session import Mark, Session, TargetView, short_key
from vtop.core.store.summary import TargetSummary
from vtop.text.probe import tokens_in_reads
from vtop.ui.format import clock_time, duration, number, seconds


@dataclass(frozen=True)
class Shown:
    """One refresh of the dashboard."""

    now: float
    status: FeedStatus
    facts: TargetFacts | None
    """The server on screen (None: no server has answered yet)."""
    state: str
    """LIVE, STALE, UNREACHABLE, ... or REPLAY; PAUSED and END are in `header`."""
    header: tuple[str, ...]
    """Header parts in priority order: the first ones must stay when the line is cut."""
    action: str
    """The primary finding's action in one line (or what there is instead)."""
    banner: str | None
    triage: Triage | None
    no_finding: str
    stale_note: str | None
    """Why the findings and charts on screen are not current (None when they are)."""
    action_parts: ActionParts | None = None
    """The action line in parts, so it can be fitted to the width (None: `action` as is)."""
    history: ChartHistory | None = None
    """The target's headline figures over time (the charts' data): a read-only view of the
    session's own, read up to `now` only, so a later tick's figures never show in this
    state."""
    config: ServerConfig = field(default_factory=ServerConfig)
    ttft_buckets: tuple[tuple[float, float], ...] = ()
    """The TTFT histogram's cumulative buckets filled during the window."""
    window_s: float = 15.0
    gpu: GpuSnapshot | None = None
    vllm_pids: frozenset[int] = frozenset()
    marks: tuple[Mark, ...] = ()
    log_lines: tuple[str, ...] = ()
    exited: bool = False
    """The managed server's process exited (the log panel explains why)."""
    held: bool = False
    """The display is paused: only the header follows."""
    redraw: bool = False
    """Charts are redrawn whether or not they are due (a step, a seek, a scroll)."""
    front_door: str | None = None
    """The last canary through the front door beside the engine (None: not probed)."""
    summary: TargetSummary | None = None
    """The newest headline figures."""


@dataclass(frozen=True)
class ActionParts:
    """`CRITICAL M1`, `preemption storm ...`, `--max-num-seqs 16 -> 1`, `e: why`: the title
    is what gives way when the line is too long; the flag diff never does."""

    head: str
    title: str
    change: str = ""
    tail: str = ""
    prefix: str = ""
    """`UNREACHABLE, last data 2m ago; last seen: ` when the data is old."""


@dataclass(frozen=True)
class Surroundings:
    """What a refresh shows besides the target: the session's GPUs, events and log, the
    managed server's pids, and how the screen should take it."""

    window_s: float = 15.0
    vllm_pids: frozenset[int] = frozenset()
    held: bool = False
    redraw: bool = False
    probe_note: str | None = None
    """What the canaries cost (`canary 64 tok / 10 s`), for the header."""


def fit_action(parts: ActionParts, width: int) -> str:
    """The action in one line of `width`. What gives way, in order: the title (cut with an
    ellipsis, then dropped), the `e: why` hint, the stale note's wording, the engine in the
    rule's key. The flag diff is never cut."""
    candidates = [parts]
    candidates.append(dataclasses.replace(parts, tail=""))
    short = _short_prefix(parts.prefix)
    candidates.append(dataclasses.replace(parts, tail="", prefix=short))
    candidates.append(dataclasses.replace(parts, tail="", prefix=short, head=_bare(parts.head)))
    fitted = [_with_title_cut(candidate, width) for candidate in candidates]
    titled = [line for line, kept in fitted if kept and len(line) <= width]
    fitting = [line for line, _ in fitted if len(line) <= width]
    return (titled or fitting or [fitted[-1][0]])[0]


def _with_title_cut(parts: ActionParts, width: int) -> tuple[str, bool]:
    """The line with its title shortened to fit (dropped when too little room is left), and
    whether any of the title is left."""

    def joined(title: str) -> str:
        first = f"{parts.prefix}{parts.head} {title}".rstrip()
        return "  ".join(p for p in (first, parts.change, parts.tail) if p)

    line = joined(parts.title)
    if len(line) <= width or not parts.title:
        return line, bool(parts.title)
    room = width - len(joined(""))
    if room <= 6:
        return joined(""), False
    return joined(parts.title[: room - 2] + "…"), True


def _short_prefix(prefix: str) -> str:
    """`UNREACHABLE, last data 6s ago; last seen: ` -> `UNREACHABLE 6s ago, last seen: `."""
    if not prefix:
        return prefix
    state, _, rest = prefix.partition(",")
    age = rest.split("last data", 1)[-1].split(";", 1)[0].strip().removesuffix("ago").strip()
    return f"{state} {age} ago, last seen: " if age and age != rest.strip() else f"{state}: "


def _bare(head: str) -> str:
    """`CRITICAL M1[engine 0]` -> `CRITICAL M1`."""
    return head.split("[", 1)[0]


def build(
    session: Session,
    status: FeedStatus,
    target_index: int,
    urls: tuple[str, ...],
    now: float,
    wall: float,
    around: Surroundings | None = None,
) -> Shown:
    """The dashboard's state for the target at `target_index` (data time `now`, wall clock)."""
    around = around or Surroundings()
    targets = list(session.targets.values())
    target = targets[target_index % len(targets)] if targets else None
    facts = target_facts(session, target, now) if target is not None else None
    detail = target_detail(session, facts, now, around.window_s) if facts is not None else None
    common = {
        "window_s": around.window_s,
        "gpu": detail.gpu if detail is not None else session.gpu,
        "vllm_pids": around.vllm_pids,
        "marks": tuple(session.marks),
        "log_lines": tuple(session.log_lines),
        "held": around.held,
        "redraw": around.redraw,
    }
    if target is None or facts is None or detail is None:
        head = ("CONNECTING", *mode_words(status, now), ", ".join(urls))
        down = prometheus_down(session, now)
        banner = None if down is None else f" {down}"
        waiting = "waiting for the first scrape" if down is None else down
        return Shown(
            now,
            status,
            None,
            "connecting",
            head,
            waiting,
            banner,
            None,
            "No data yet.",
            None,
            **common,  # type: ignore[arg-type]
        )
    state = facts.state
    stale = None if facts.current else _stale_note(facts, now)
    seen = facts.watched_s
    label = _label(state, status, seen, around.window_s)
    header = _header(facts, label, status, now, wall, target_index, len(targets))
    if around.probe_note:
        header = (*header, around.probe_note)
    note = detail.unjudged
    parts = action_parts(facts.triage, stale, seen, around.window_s, facts.summary, note)
    return Shown(
        now,
        status,
        facts,
        state,
        header,
        render_action(parts),
        banner_text(session, target, facts, status, now),
        facts.triage,
        no_finding(target),
        stale,
        parts,
        target.history,
        facts.config,
        detail.ttft_buckets,
        exited=facts.exited is not None,
        front_door=front_door_line(detail.last_probe, facts.summary),
        summary=facts.summary,
        **common,  # type: ignore[arg-type]
    )


def front_door_line(probe: ProbeResult | None, summary: TargetSummary | None) -> str | None:
    """The last canary as the user saw it, the engine's TTFT beside it."""
    if probe is None:
        return None
    engine = summary.ttft_p50_s if summary is not None else None
    head = f"front door {probe.endpoint}: "
    if probe.status is None or not probe.ok:
        return head + (probe.error or f"HTTP {probe.status}")
    return head + (
        f"first token {seconds(probe.first_token_s)} (engine p50 {seconds(engine)}), "
        f"{tokens_in_reads(probe)}, HTTP {probe.status}"
    )


def _label(state: str, status: FeedStatus, seen: float | None, window: float) -> str:
    """The header's first word: REPLAY, WATCHING 6 s of 15 while the first window fills, or
    the state (LIVE, STALE, UNREACHABLE, ...)."""
    if status.mode is Mode.REPLAY:
        return "REPLAY"
    if state in LIVE and seen is not None and seen < window:
        return f"WATCHING {seen:.0f} s of {window:g}"
    return state.upper()


def mode_words(status: FeedStatus, now: float) -> tuple[str, ...]:
    """Replay position and speed, or the poll interval; where the findings come from (ALERTS,
    JUDGED IN PROM); PAUSED, END, and the recording: the header's and the fleet line's."""
    parts: list[str] = []
    if status.mode is Mode.REPLAY:
        speed = "max" if status.speed <= 0 else f"x{status.speed:g}"
        parts += [clock_time(now), speed]
    else:
        parts.append(f"every {status.interval_s:g}s")
    if status.mode is Mode.PROMETHEUS_ALERTS:
        parts.append("ALERTS")  # the findings are what Prometheus fires
    if status.mode is Mode.PROMETHEUS_JUDGED:
        parts.append("JUDGED IN PROM")
    if status.paused:
        parts.append("PAUSED")
    if status.finished:
        parts.append("END")
    if status.recording_to:
        parts.append(f"REC {Path(status.recording_to).name}")
    return tuple(parts)


def _header(
    facts: TargetFacts,
    label: str,
    status: FeedStatus,
    now: float,
    wall: float,
    index: int,
    count: int,
) -> tuple[str, ...]:
    """State, age and mode first; then the server, shortened, and its facts."""
    parts = [label]
    if status.mode is not Mode.REPLAY and facts.last_ok is not None:
        parts.append(f"age {seconds(wall - facts.last_ok)}")
    parts += mode_words(status, now)
    if count > 1:
        parts.append(f"[{index % count + 1}/{count}]")
    parts.append(facts.target.removeprefix("http://"))
    parts.append(",".join(facts.models) or "model ?")
    parts.append(f"vLLM {facts.version or '?'}")
    if facts.engines > 1:
        parts.append(f"{facts.engines} engines")
    parts.append(f"up {duration(facts.uptime_s)}")
    return tuple(parts)


def fit(parts: tuple[str, ...], width: int) -> str:
    """The header cut to `width` columns from the end: the parts that come first stay."""
    line = ""
    for part in parts:
        candidate = f"{line}  {part}" if line else f" {part}"
        if len(candidate) > width:
            room = width - len(line) - 3
            return line + (f"  {part[: room - 1]}…" if room > 6 else "")
        line = candidate
    return line


def change_text(change: ProposedChange) -> str | None:
    """`--max-num-seqs 16 -> 1`, `--kv-cache-dtype fp8`, None when not computable."""
    argument = change.as_flag()
    if argument is None:
        return None
    if change.current is None or not isinstance(change.proposed, float):
        return argument
    return f"{change.flag} {number(change.current, '{:g}')} -> {number(change.proposed, '{:g}')}"


def finding_parts(finding: Finding) -> ActionParts:
    """`CRITICAL M1` `preemption storm` `--max-num-seqs 16 -> 1` `e: why`."""
    changes = [text for c in finding.changes if (text := change_text(c)) is not None]
    head = f"{finding.rule.severity.upper()} {short_key(finding)}"
    return ActionParts(head, finding.rule.title, changes[0] if changes else "", "e: why")


def action_parts(
    triage: Triage | None,
    stale: str | None,
    seen: float | None = None,
    window: float = 15.0,
    summary: TargetSummary | None = None,
    unjudged: str = "",
) -> ActionParts:
    """The primary finding's action; while the first window fills, what is seen so far (never
    OK before a verdict can be made); a problem no rule has judged yet (`unjudged`, never OK);
    said to be old when the data is."""
    primary = triage.primary if triage is not None else None
    prefix = f"{stale}; last seen: " if stale and triage is not None else ""
    if primary is not None and primary.rule.severity != "info":
        return dataclasses.replace(finding_parts(primary), prefix=prefix)
    if triage is None:
        return ActionParts(stale or "no data yet", "")
    if seen is not None and seen < window and not stale:
        figures = _so_far(summary)
        return ActionParts(f"WATCHING: {seen:.0f} s of the {window:g} s window", figures)
    if unjudged:
        return ActionParts("NOT OK, not judged yet:", unjudged, "", "d: why", prefix=prefix)
    text = "OK: no warning or critical finding"
    if triage.unchecked:
        text += f" ({len(triage.unchecked)} rules not checked: d)"
    return ActionParts(text, "", prefix=prefix)


def _so_far(summary: TargetSummary | None) -> str:
    """`so far: 19 waiting, 4 running, KV 100%` (what the window has shown)."""
    if summary is None:
        return "no verdict before a full window"
    kv = "-" if summary.kv_usage is None else f"{summary.kv_usage:.0%}"
    return (
        f"so far {number(summary.waiting)} waiting, {number(summary.running)} running, "
        f"KV {kv}; no verdict before a full window"
    )


def render_action(parts: ActionParts) -> str:
    """The action line unfitted (plain output, tests)."""
    return "  ".join(
        p
        for p in [f"{parts.prefix}{parts.head} {parts.title}".strip(), parts.change, parts.tail]
        if p
    )


def action_line(triage: Triage | None, stale: str | None) -> str:
    """The primary finding's action, said to be old when the data is."""
    return render_action(action_parts(triage, stale))


def _stale_note(facts: TargetFacts, now: float) -> str:
    """`UNREACHABLE, last data 2m ago` and the like."""
    last_ok = facts.last_ok
    since = f"last data {duration(now - last_ok)} ago" if last_ok is not None else "no data yet"
    return f"{facts.state.upper()}, {since}"


def banner_text(
    session: Session, target: TargetView, facts: TargetFacts, status: FeedStatus, now: float
) -> str | None:
    """What is wrong with the data, or None."""
    if facts.exited is not None:
        return f" {facts.exited.text}"
    scrape = target.last_scrape
    if scrape is None:
        return None
    if not scrape.ok:
        last_ok = facts.last_ok
        since = f"last data {duration(now - last_ok)} ago" if last_ok else "no data yet"
        retry = f"; retrying in {status.retry_in_s:.0f}s" if status.retry_in_s > 0 else ""
        if last_ok is None and status.mode is not Mode.REPLAY:
            return f" Nothing answers at {target.target} ({scrape.status.value}){FIRST_CONTACT}"
        return f" {target.target} {scrape.status.value}: {scrape.error} ({since}{retry})"
    down = prometheus_down(session, now)
    if down is not None:
        return f" {down}"
    if target.alternating:
        return f" {target.triage.errors[0]}" if target.triage and target.triage.errors else None
    if scrape.parse_errors:
        first = scrape.parse_errors[0]
        return f" {len(scrape.parse_errors)} malformed /metrics line(s) skipped, e.g. {first}"
    if target.defects and target.defects[-1][0] == target.last_timestamp:
        return f" data quality: {target.defects[-1][1]}"
    return None


FIRST_CONTACT = (
    ": start vLLM (vllm serve MODEL, or vtop serve -- MODEL), give its URL "
    "(vtop http://HOST:8000), or try vtop demo. Retrying."
)
"""What to do when the URL never answered (the dashboard's first screen with no server)."""


def prometheus_down(session: Session, now: float) -> str | None:
    """The last Prometheus outage, while it lasts (no frame came since)."""
    for mark in reversed(session.marks):
        if mark.kind is EventKind.PROMETHEUS_DOWN:
            return f"Prometheus unreachable: {mark.text}" if mark.timestamp >= now else None
        if mark.kind is EventKind.RECOVERED:
            return None
    return None


def no_finding(target: TargetView | None) -> str:
    """What the findings panel says when it is empty."""
    if target is None or target.triage is None:
        return "No data yet."
    unchecked = len(target.triage.unchecked)
    extra = f" ({unchecked} rules not checked: press d)" if unchecked else ""
    return f"No finding: nothing to act on.{extra}"
