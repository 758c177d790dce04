"""What the dashboard shows, built once per refresh from the session and the feed (pure).

Widgets read this value and nothing else: the header by priority (state first, then what is
watched), the one-line action of the primary finding, the banner, the findings and whether
they are current or the last ones seen before the data stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vtop.core.frame import EventKind
from vtop.core.ingest.feed_status import FeedStatus, Mode
from vtop.core.rules.engine import Finding, ProposedChange, Triage
from vtop.core.session.fleet import label_values, last_restart, target_state
from vtop.core.session.session import Session, TargetState, short_key
from vtop.ui.format import clock_time, duration, number, seconds

CURRENT = ("live", "restarted")
"""States in which the findings on screen describe the present."""


@dataclass(frozen=True)
class Shown:
    """One refresh of the dashboard."""

    now: float
    status: FeedStatus
    target: TargetState | None
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


def build(
    session: Session,
    status: FeedStatus,
    target_index: int,
    urls: tuple[str, ...],
    now: float,
    wall: float,
) -> Shown:
    """The dashboard's state for the target at `target_index` (data time `now`, wall clock)."""
    targets = list(session.targets.values())
    target = targets[target_index % len(targets)] if targets else None
    if target is None:
        head = ("CONNECTING", *_mode(status, now), ", ".join(urls))
        down = prometheus_down(session, now)
        banner = None if down is None else f" {down}"
        waiting = "waiting for the first scrape" if down is None else down
        return Shown(
            now, status, None, "connecting", head, waiting, banner, None, "No data yet.", None
        )
    state = target_state(target, now, last_restart(session, target.target))
    stale = None if state in CURRENT else _stale_note(session, target, state, now)
    triage = with_fleet(session, target)
    header = _header(session, target, state, status, now, wall, target_index, len(targets))
    return Shown(
        now,
        status,
        target,
        state,
        header,
        action_line(triage, stale),
        banner_text(session, target, status, now),
        triage,
        no_finding(target),
        stale,
    )


def _mode(status: FeedStatus, now: float) -> tuple[str, ...]:
    """Replay position and speed, or the poll interval; PAUSED and END."""
    parts: list[str] = []
    if status.mode is Mode.REPLAY:
        speed = "max" if status.speed <= 0 else f"x{status.speed:g}"
        parts += [clock_time(now), speed]
    else:
        parts.append(f"every {status.interval_s:g}s")
    if status.mode is Mode.PROMETHEUS_ALERTS:
        parts.append("ALERTS")  # the findings are what Prometheus fires
    if status.paused:
        parts.append("PAUSED")
    if status.finished:
        parts.append("END")
    if status.recording_to:
        parts.append(f"REC {Path(status.recording_to).name}")
    return tuple(parts)


def _header(
    session: Session,
    target: TargetState,
    state: str,
    status: FeedStatus,
    now: float,
    wall: float,
    index: int,
    count: int,
) -> tuple[str, ...]:
    """State, age and mode first; then the server, shortened, and its facts."""
    label = "REPLAY" if status.mode is Mode.REPLAY else state.upper()
    parts = [label]
    if status.mode is not Mode.REPLAY and target.last_timestamp is not None:
        parts.append(f"age {seconds(wall - target.last_timestamp)}")
    parts += _mode(status, now)
    if count > 1:
        parts.append(f"[{index % count + 1}/{count}]")
    parts.append(target.target.removeprefix("http://"))
    models = label_values(session, target.target, "model_name")
    parts.append(",".join(Path(m).name or m for m in models) or "model ?")
    parts.append(f"vLLM {target.config.facts.version or '?'}")
    engines = len(label_values(session, target.target, "engine")) or 1
    if engines > 1:
        parts.append(f"{engines} engines")
    parts.append(f"up {duration(uptime(session, target, now))}")
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


def uptime(session: Session, target: TargetState, now: float) -> float | None:
    """Seconds since the vLLM process started."""
    started = session.store.latest_by(
        "process_start_time_seconds", now, {"instance": target.target}
    )
    values = list(started.values())
    return now - values[0] if values else None


def change_text(change: ProposedChange) -> str | None:
    """`--max-num-seqs 16 -> 1`, `--kv-cache-dtype fp8`, None when not computable."""
    argument = change.as_flag()
    if argument is None:
        return None
    if change.current is None or not isinstance(change.proposed, float):
        return argument
    return f"{change.flag} {number(change.current, '{:g}')} -> {number(change.proposed, '{:g}')}"


def finding_action(finding: Finding) -> str:
    """`CRITICAL M1 preemption storm  --max-num-seqs 16 -> 1  e: why`."""
    changes = [text for c in finding.changes if (text := change_text(c)) is not None]
    action = f"  {changes[0]}" if changes else ""
    return (
        f"{finding.rule.severity.upper()} {short_key(finding)} {finding.rule.title}{action}  e: why"
    )


def action_line(triage: Triage | None, stale: str | None) -> str:
    """The primary finding's action, said to be old when the data is."""
    primary = triage.primary if triage is not None else None
    if primary is None or primary.rule.severity == "info":
        text = "OK: no warning or critical finding"
        if triage is not None and triage.unchecked:
            text += f" ({len(triage.unchecked)} rules not checked: d)"
    else:
        text = finding_action(primary)
    return f"{stale}; last seen: {text}" if stale else text


def _stale_note(session: Session, target: TargetState, state: str, now: float) -> str:
    """`UNREACHABLE, last data 2m ago` and the like."""
    last_ok = session.store.target_last_ok(target.target)
    since = f"last data {duration(now - last_ok)} ago" if last_ok is not None else "no data yet"
    return f"{state.upper()}, {since}"


def banner_text(
    session: Session, target: TargetState, status: FeedStatus, now: float
) -> str | None:
    """What is wrong with the data, or None."""
    exited = session.exited.get(target.target)
    if exited is not None:
        return f" {exited.text}"
    scrape = target.last_scrape
    if scrape is None:
        return None
    if not scrape.ok:
        last_ok = session.store.target_last_ok(target.target)
        since = f"last data {duration(now - last_ok)} ago" if last_ok else "no data yet"
        retry = f"; retrying in {status.retry_in_s:.0f}s" if status.retry_in_s > 0 else ""
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


def prometheus_down(session: Session, now: float) -> str | None:
    """The last Prometheus outage, while it lasts (no frame came since)."""
    for mark in reversed(session.marks):
        if mark.kind is EventKind.PROMETHEUS_DOWN:
            return f"Prometheus unreachable: {mark.text}" if mark.timestamp >= now else None
        if mark.kind is EventKind.RECOVERED:
            return None
    return None


def no_finding(target: TargetState | None) -> str:
    """What the findings panel says when it is empty."""
    if target is None or target.triage is None:
        return "No data yet."
    unchecked = len(target.triage.unchecked)
    extra = f" ({unchecked} rules not checked: press d)" if unchecked else ""
    return f"No finding: nothing to act on.{extra}"


def with_fleet(session: Session, target: TargetState) -> Triage | None:
    """A server's own findings, then fleet findings that name it (e.g. B1 on this replica)."""
    if target.triage is None:
        return None
    fleet = session.fleet.triage
    about = (
        [f for f in fleet.findings if dict(f.labels).get("instance") == target.target]
        if fleet
        else []
    )
    if not about:
        return target.triage
    own = target.triage
    return Triage(own.findings + tuple(about), own.unchecked, own.errors)
