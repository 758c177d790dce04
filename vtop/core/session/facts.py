"""What every view says of one server at one moment, read once from the session: its state,
model, engines, version, age, headline figures and findings (`TargetFacts`, cheap enough for
every row of a thousand-server fleet), and what the dashboard adds for the server on screen
(`TargetDetail`: the TTFT buckets of the window, its own GPUs, what the window shows that no
rule judged, the last canary). The dashboard, `--plain` and the fleet rows read these values;
none of them reads the store."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vtop.core.config.server_config import ServerConfig
from vtop.core.frame import EventKind, GpuSnapshot, ProbeResult, ScrapeStatus
from vtop.core.rules.engine import Finding, Triage
from vtop.core.session.remote_gpus import own_gpus
from vtop.core.session.session import Mark, Session, TargetView
from vtop.core.session.unjudged import watch_note
from vtop.core.store.store import Store
from vtop.core.store.summary import TTFT, TargetSummary

STALE_AFTER_S = 5.0
LIVE = ("live", "restarted")
"""States in which a server's findings describe the present."""
RESTART_SHOWN_S = 60.0


@dataclass(frozen=True)
class TargetFacts:
    """One server at one moment, as every view names it."""

    target: str
    state: str
    """live, restarted, stale, connecting, unreachable, http error, not vLLM."""
    models: tuple[str, ...]
    """Served model names (a path's last part), from its last answer."""
    engines: int
    version: str | None
    last_ok: float | None
    """When it last answered (data time)."""
    watched_s: float | None
    """Seconds of answered scrapes behind its figures (None before the first)."""
    uptime_s: float | None
    summary: TargetSummary | None
    triage: Triage | None
    """Its own findings, then the fleet findings that name it (None before a judgement)."""
    fleet_about: tuple[Finding, ...]
    """Fleet-scope findings that name it (imbalance: B1 on this replica)."""
    exited: Mark | None
    """The managed process's exit, until it answers again."""
    config: ServerConfig

    @property
    def current(self) -> bool:
        """Its findings describe the present (live or just restarted)."""
        return self.state in LIVE

    @property
    def model(self) -> str:
        """The models in one word (`?` when none is known)."""
        return ",".join(self.models) or "?"


@dataclass(frozen=True)
class TargetDetail:
    """What the dashboard shows of the server on screen besides its facts."""

    ttft_buckets: tuple[tuple[float, float], ...]
    """The TTFT histogram's cumulative buckets filled during the window."""
    gpu: GpuSnapshot | None
    """Its own GPUs (dcgm-exporter's), else the host's."""
    unjudged: str
    """What the window shows that no rule judged yet ('' when nothing)."""
    last_probe: ProbeResult | None


def target_facts(
    session: Session,
    view: TargetView,
    now: float,
    restarts: Mapping[str, float] | None = None,
) -> TargetFacts:
    """The server's facts at `now` (`restarts`: each target's last restart, when the caller
    read them for many servers at once)."""
    name, store = view.target, session.store
    restarted_at = last_restart(session, name) if restarts is None else restarts.get(name)
    about = tuple(fleet_findings_about(session, name))
    triage = view.triage
    if triage is not None and about:
        triage = dataclasses.replace(triage, findings=triage.findings + about)
    return TargetFacts(
        name,
        target_status(view, now, restarted_at),
        model_names(store, name),
        len(label_values(store, name, "engine")) or 1,
        view.config.facts.version,
        store.target_last_ok(name),
        None if view.first_ok_timestamp is None else now - view.first_ok_timestamp,
        uptime(store, name, now),
        view.summary,
        triage,
        about,
        session.exited.get(name),
        view.config,
    )


def target_detail(
    session: Session, facts: TargetFacts, now: float, window_s: float
) -> TargetDetail:
    """What the dashboard adds for the server on screen, over `window_s`."""
    store, name = session.store, facts.target
    buckets = store.histogram_buckets(TTFT, now, window_s, {"instance": name})
    probes = list(store.probes.last.values())
    return TargetDetail(
        tuple(buckets.get((), ())),
        own_gpus(store, name, now) or session.gpu,
        watch_note(facts.triage, store, name, now, window_s),
        max(probes, key=lambda p: p.started) if probes else None,
    )


def last_restart(session: Session, target: str) -> float | None:
    """When the target last restarted (None if not seen)."""
    times = [
        m.timestamp for m in session.marks if m.kind == EventKind.RESTART and m.target == target
    ]
    return max(times, default=None)


def last_restarts(session: Session) -> dict[str, float]:
    """When each target last restarted, from one pass over the marks (not one per server)."""
    found: dict[str, float] = {}
    for mark in session.marks:
        if mark.kind == EventKind.RESTART:
            found[mark.target] = max(mark.timestamp, found.get(mark.target, mark.timestamp))
    return found


def target_status(view: TargetView, now: float, restarted_at: float | None) -> str:
    """live / stale / unreachable / http error / not vLLM / restarted."""
    scrape = view.last_scrape
    if scrape is None:
        return "connecting"
    if not scrape.ok:
        return "not vLLM" if scrape.status is ScrapeStatus.NOT_VLLM else scrape.status.value
    if view.last_timestamp is not None and now - view.last_timestamp > STALE_AFTER_S:
        return "stale"
    if restarted_at is not None and now - restarted_at < RESTART_SHOWN_S:
        return "restarted"
    return "live"


def model_names(store: Store, target: str) -> tuple[str, ...]:
    """The target's served models, a path by its last part (as vLLM names a local model)."""
    return tuple(Path(m).name or m for m in label_values(store, target, "model_name"))


def label_values(store: Store, target: str, key: str) -> list[str]:
    """Distinct values of a label on the running-requests series of the target's last good
    scrape (so a server that went down keeps its model name)."""
    found = {
        series.label(key)
        for series in store.select("vllm:num_requests_running", {"instance": target})
        if store.in_last_answer(series, target)
    }
    return sorted(value for value in found if value is not None)


def fleet_findings_about(session: Session, target: str) -> list[Finding]:
    """Fleet-scope findings whose `instance` label names this target."""
    triage = session.fleet.triage
    if triage is None:
        return []
    return [f for f in triage.findings if dict(f.labels).get("instance") == target]


def uptime(store: Store, target: str, now: float) -> float | None:
    """Seconds since the vLLM process started."""
    started = store.latest_by("process_start_time_seconds", now, {"instance": target})
    values = list(started.values())
    return now - values[0] if values else None
