"""One-shot triage: sample a target for a window, run the rule engine every tick, report."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from vtop.core.config.effective_config import DiagnoseOptions as DiagnoseOptions
from vtop.core.config.server_config import ServerConfig
from vtop.core.forensics.classify import EngineWhereabouts
from vtop.core.forensics.last_words import LastWords
from vtop.core.forensics.processes import NotVisible
from vtop.core.frame import Frame, InFlightRequest, ScrapeStatus, TargetScrape
from vtop.core.ingest.quality import Defect
from vtop.core.ingest.sources.prometheus import instance_of
from vtop.core.rules.engine import Engine, Triage, Unchecked
from vtop.core.rules.rule import Rule
from vtop.core.session.fleet_verdicts import GroupVerdict, group_verdicts, worst_first
from vtop.core.session.request_findings import RequestEvidence
from vtop.core.session.router import RouterView, is_router, router_view
from vtop.core.session.session import FLEET_TARGET, Mark, Session, alternation_text
from vtop.core.session.unjudged import (
    LENGTHEN_MARGIN_S,
    GaugeWindow,
    has_inputs,
    mechanism_shown,
    not_judged,
    window_gauges,
)
from vtop.core.session.window_session import judged_window
from vtop.core.status import ExitCode, Status, worst
from vtop.core.store.store import Store
from vtop.core.store.summary import (
    GENERATION_TOKENS,
    RUNNING,
    WAITING,
    TargetSummary,
    summarize,
)

EXIT_UNKNOWN = ExitCode.UNKNOWN
NO_TRAFFIC = "no traffic during the window: nothing ran, waited or was generated"
"""Why an idle-looking server is not diagnosed (an engine stuck in the step it had just begun
looks the same from its metrics: the stacks tell them apart)."""


@dataclass
class Diagnosis:
    """The outcome: a triage, or the reason there is none."""

    target: str
    time: float
    window_s: float
    triage: Triage | None
    config: ServerConfig
    summary: TargetSummary | None
    reason: str | None = None
    events: list[Mark] = field(default_factory=list)
    data_quality: list[Defect] = field(default_factory=list)
    """What the endpoint exposed that no vLLM can, during the window (distinct, in order)."""
    stopped_answering: str | None = None
    """Why the window's last scrapes failed when earlier ones answered (the triage is then
    of the evidence up to the last answer)."""
    gauges: dict[str, GaugeWindow] = field(default_factory=dict)
    """Running, waiting and the KV cache over the window: now, mean and max."""
    not_judged: list[str] = field(default_factory=list)
    """What the window saw and could not judge (a problem no finding explains, a pending
    rule, a rule longer than the window): a verdict with any of these is never ok."""
    whereabouts: EngineWhereabouts | NotVisible | None = None
    """Where the engine is, from its processes' stacks (taken live when a rule that collects
    them fires: the stall)."""
    last_words: LastWords | None = None
    """Why the engine died, from the server's log (given when the server does not answer)."""
    requests: RequestEvidence | None = None
    """What vLLM's request spans of the window say (given when vtop received them)."""
    in_flight: tuple[InFlightRequest, ...] | None = None
    """The requests running at the last answer, oldest first (None: the server does not
    list them; vtop's middleware in vLLM does)."""

    @property
    def verdict(self) -> Status:
        """critical, warning, incomplete, ok, or unknown (could not diagnose); bad data, a
        problem the window saw without judging it, or requests that made others wait, is never
        ok; an engine whose log records its death, or whose stacks show it stuck, is
        critical."""
        if self.triage is None:
            stuck = isinstance(self.whereabouts, EngineWhereabouts) and self.whereabouts.stuck
            return Status.CRITICAL if self.last_words is not None or stuck else Status.UNKNOWN
        severity = self.triage.severity
        if severity.troubled:
            return severity
        if self.data_quality or self.stopped_answering:
            return Status.WARNING
        if self.requests is not None and self.requests.troubled:
            return Status.WARNING
        return Status.INCOMPLETE if self.not_judged else Status.OK

    @property
    def exit_code(self) -> int:
        """0 healthy, 1 warning (or bad data), 2 critical, 3 could not diagnose, 4 incomplete."""
        return self.verdict.exit_code


def had_traffic(store: Store, target: str, now: float, window: float) -> bool:
    """True when requests ran, waited, or tokens were produced during the window."""
    only = {"instance": target}
    for name in (RUNNING, WAITING):
        if any((store.max_over_time(s, now, window) or 0) > 0 for s in store.select(name, only)):
            return True
    grown = store.sum_by(store.increase, GENERATION_TOKENS, now, window, only)
    return any(value > 0 for value in grown.values())


MIN_DECISIVE_S = 3.0
"""The shortest live window that may end early: a few scrapes' deltas."""
STORM_KV = 0.9
"""A queue limiter with the KV cache this full is not decisive: preemptions (M1, which
outranks it) come in bursts and may not have shown in the first seconds."""


@dataclass
class EarlyVerdict:
    """Ends a live window as soon as the evidence is decisive: the same primary finding on
    two judgements in a row, after at least MIN_DECISIVE_S, that nothing later could
    outrank: a critical one (a stall, a storm at full KV), or a queue limiter (a pinned cap,
    a full budget) with no preemption seen and the KV cache under STORM_KV (a storm would take
    it over); never a fallback ("no limiter identified"), which a limiter may yet replace.
    The frames are judged exactly as the report will judge them."""

    rules: list[Rule]
    options: DiagnoseOptions
    _last: str | None = None

    def __call__(self, frames: list[Frame]) -> bool:
        if frames[-1].timestamp - frames[0].timestamp < MIN_DECISIVE_S or not frames[0].scrapes:
            return False
        target = frames[0].scrapes[0].target
        found = diagnose_frames(target, frames, self.rules, self.options)
        primary = found.triage.primary if found.triage else None
        key = primary.key if primary is not None and self._decisive(found) else None
        decided = key is not None and key == self._last
        self._last = key
        return decided

    @staticmethod
    def _decisive(found: Diagnosis) -> bool:
        """Whether the diagnosis's primary cannot be outranked by what a longer window adds."""
        primary = found.triage.primary if found.triage else None
        if primary is None or primary.rule.severity == "info":
            return False
        if primary.rule.severity == "critical":
            return True
        storming = any(line.startswith("seen: preemptions") for line in found.not_judged)
        preempting = (found.summary.preemptions_per_s or 0) > 0 if found.summary else False
        fallback = bool(primary.rule.unless_found)  # Q0: a limiter may yet be identified
        kv = found.gauges.get("kv")
        filling = kv is None or kv.peak is None or kv.peak >= STORM_KV  # a storm may follow
        return primary.rule.phase == "queue" and not (storming or preempting or fallback or filling)


def needed_window(
    frame: Frame, rules: list[Rule], options: DiagnoseOptions
) -> tuple[float, tuple[Rule, ...]]:
    """The window a one-shot triage of `frame`'s servers needs, and the rules that need more
    than `options.window_s`: those whose mechanism the frame shows (the drafts of speculative
    decoding, a GPU's power and clocks, multimodal items looked up) and whose `for:` is
    longer. A rule whose inputs are absent, or all zero (the multimodal cache of a text-only
    model), could not fire however long the window."""
    session = Session(rules, options)
    session.ingest(frame)
    now = frame.timestamp
    longer = tuple(
        rule
        for rule in rules
        if rule.scope == "target"
        and rule.for_s > options.window_s
        and any(mechanism_shown(rule, session.store, t, now) for t in session.targets)
    )
    if not longer:
        return options.window_s, ()
    return max(rule.for_s for rule in longer) + LENGTHEN_MARGIN_S, longer


def diagnose_frames(
    target: str, frames: list[Frame], rules: list[Rule], options: DiagnoseOptions
) -> Diagnosis:
    """Triage recorded or freshly sampled frames (the same code as the dashboard)."""
    return judged_diagnosis(target, frames, rules, options)[0]


def judged_diagnosis(
    target: str, frames: list[Frame], rules: list[Rule], options: DiagnoseOptions
) -> tuple[Diagnosis, Session]:
    """`diagnose_frames`, and the session that judged the window (for the scheduler model,
    which calibrates on the same store)."""
    session = judged_window(frames, rules, options)
    return diagnosis(session, target), session


def diagnosis(session: Session, target: str) -> Diagnosis:
    """One target's triage as the session stands: what `vtop diagnose`, the dashboard's `d`
    and `b`, bundles and `vtop tune` all report, so the same frames read alike everywhere.

    The window is the span the session has seen and its store still holds (a watching
    session keeps what its rules read, not its whole uptime). When the target stopped
    answering, it is judged on the evidence up to its last answer (a failed scrape leaves no
    value to judge, but the evidence before it stands) and the diagnosis says so.
    """
    view = session.target(target)
    last_ok = session.store.target_last_ok(target)
    end = session.now if session.now is not None else 0.0
    stopped = view.failures_since_ok > 0 and last_ok is not None
    now = last_ok if stopped and last_ok is not None else end
    held_since = session.store.held_since()
    seen = [t for t in (session.first_timestamp, held_since) if t is not None]
    window = max(0.0, now - max(seen, default=now))
    events = [m for m in session.marks if m.target == target]
    found = Diagnosis(target, now, window, view.triage, view.config, None, events=events)
    found.in_flight = None if view.last_ok_scrape is None else view.last_ok_scrape.in_flight
    found.data_quality = list({(d.kind, d.line): d for _, d in reversed(view.defects)}.values())
    found.data_quality.reverse()
    reason = _no_diagnosis_reason(session.store, target, now, window)
    if reason is not None:
        found.triage = None
        found.reason = reason if last_ok is not None else _never_answered(view.last_scrape)
        return found
    found.summary = summarize(session.store, target, now, window)
    found.gauges = window_gauges(session.store, target, now, window)
    if view.triage is not None:
        engine, store = session.engine, session.store
        found.triage = with_short_windows(view.triage, engine, store, target, window)
        found.not_judged = not_judged(found.triage, engine, store, target, now, window)
    if stopped and view.last_scrape is not None:
        last = view.last_scrape
        found.stopped_answering = (
            f"the last {view.failures_since_ok} scrape(s) of the window failed "
            f"({last.status.value}: {last.error}); judged up to the last answer, "
            f"{end - now:.0f} s before the window's end"
        )
    return found


def _never_answered(scrape: TargetScrape | None) -> str:
    """Why a target that never answered cannot be diagnosed."""
    if scrape is None:
        return "no scrape was taken"
    if scrape.status is ScrapeStatus.NOT_VLLM:
        return f"not a vLLM endpoint: {scrape.error}"
    return f"{scrape.status.value}: {scrape.error}"


@dataclass
class FleetDiagnosis:
    """Every server's diagnosis plus the fleet-scope findings (imbalance)."""

    servers: list[Diagnosis]
    fleet: Triage | None
    events: list[Mark] = field(default_factory=list)
    routers: list[RouterView] = field(default_factory=list)
    """Routers in front of the servers (not servers: their view of each backend)."""
    groups: list[GroupVerdict] = field(default_factory=list)
    """The servers by namespace and by model: verdicts counted, the worst replica."""
    judged_in_prometheus: bool = False
    """The rules' conditions were evaluated by Prometheus (findings without their evidence)."""
    evidence_of: tuple[str, ...] = ()
    """Servers judged again here on their raw series, with their evidence and flag changes."""

    @property
    def exit_code(self) -> int:
        """The worst of the servers' and the fleet's: never 0 while a server could not be
        diagnosed (3 when none could); a warning when a router sees a backend slow on the path
        while its engine is not."""
        if not self.servers or all(d.triage is None for d in self.servers):
            return EXIT_UNKNOWN
        codes = [d.exit_code for d in self.servers]
        codes.append(Status(self.fleet.severity).exit_code if self.fleet else ExitCode.OK)
        slow = any(b.slow_on_the_path for router in self.routers for b in router.backends)
        codes.append(ExitCode.WARNING if slow else ExitCode.OK)
        return worst(codes)


def diagnose_fleet(
    frames: list[Frame], rules: list[Rule], options: DiagnoseOptions, alerts: bool = False
) -> FleetDiagnosis:
    """Triage every server in the frames, and the fleet rules across them (with `alerts`,
    the findings are the frames' ALERTS: the rules judged in Prometheus)."""
    session = judged_window(frames, rules, options, alerts)
    found = _fleet_of(session, frames)
    found.judged_in_prometheus = alerts
    return found


def _fleet_of(session: Session, frames: list[Frame]) -> FleetDiagnosis:
    """Every server's diagnosis and the fleet's, from a session that judged the frames."""
    routers = [t for t in session.targets if is_router(session.store, t)]
    names = [t for t in session.targets if t not in routers]
    servers = [diagnosis(session, target) for target in names]
    events = [m for m in session.marks if m.target == FLEET_TARGET]
    now = frames[-1].timestamp if frames else 0.0
    window = now - frames[0].timestamp if frames else 0.0
    views = [router_view(session.store, r, names, now, window) for r in routers]
    groups = group_verdicts(session.store, servers) if len(servers) > 1 else []
    return FleetDiagnosis(servers, session.fleet.triage, events, views, groups)


EVIDENCE_SERVERS = 5
"""The worst servers of a fleet judged in Prometheus whose raw series are pulled, so their
findings come with evidence and flag changes."""


def needing_evidence(fleet: FleetDiagnosis) -> list[str]:
    """The worst servers with a finding (at most EVIDENCE_SERVERS): a drill-down's targets."""
    troubled = [d for d in worst_first(fleet.servers) if d.triage is not None and d.triage.findings]
    return [d.target for d in troubled[:EVIDENCE_SERVERS]]


def evidence_by_target(detailed: FleetDiagnosis) -> dict[str, Diagnosis]:
    """A drill-down's diagnoses with data, by the instance they are of (a fleet names a target
    `job/instance` where an instance is reused, a drill-down of a few by its instance)."""
    return {instance_of(d.target): d for d in detailed.servers if d.triage is not None}


def with_evidence(fleet: FleetDiagnosis, detailed: FleetDiagnosis) -> FleetDiagnosis:
    """The fleet judged in Prometheus with the servers judged here on their raw series (the
    same rules, now with evidence) in place of their judged diagnoses."""
    found = evidence_by_target(detailed)
    servers = [
        dataclasses.replace(found[instance_of(d.target)], target=d.target)
        if instance_of(d.target) in found
        else d
        for d in fleet.servers
    ]
    drilled = tuple(sorted(d.target for d in fleet.servers if instance_of(d.target) in found))
    return dataclasses.replace(fleet, servers=servers, evidence_of=drilled)


def with_short_windows(
    triage: Triage, engine: Engine, store: Store, target: str, window: float
) -> Triage:
    """The triage plus, under NOT CHECKED, every rule whose inputs exist but that needs to hold
    for longer than the window sampled: it could not have fired, which is not the same as ok
    (and is listed there rather than as pending). A rule a short window can judge
    (`Engine.hold_cap_s`) stays pending while it holds."""
    seen = {f.rule.id for f in triage.findings} | {u.rule.id for u in triage.unchecked}
    seen |= {s.rule.id for f in triage.findings for s in f.symptoms}
    judgeable = {p.rule.id for p in triage.pending if engine.hold_needed_s(p.rule) <= window}
    short = [
        Unchecked(rule, (), _window_needed(rule.for_s, window))
        for rule in engine.rules
        if rule.scope == "target"
        and rule.id not in seen | judgeable
        and engine.hold_needed_s(rule) > window
        and has_inputs(rule, store, target)
    ]
    listed = {u.rule.id for u in short}
    pending = tuple(p for p in triage.pending if p.rule.id not in listed)
    return dataclasses.replace(triage, unchecked=(*triage.unchecked, *short), pending=pending)


def _window_needed(for_s: float, window: float) -> str:
    """How to let a rule with a long `for:` be judged."""
    needed = math.ceil(for_s + LENGTHEN_MARGIN_S)
    return (
        f"needs {for_s:.0f} s (its for:) to be judged, the window was {window:.0f} s: "
        f"use --window {needed}"
    )


def _no_diagnosis_reason(store: Store, target: str, now: float, window: float) -> str | None:
    """Why there can be no diagnosis: never answered, an answer older than the history held,
    alternating processes, or no traffic."""
    last_ok, held_since = store.target_last_ok(target), store.held_since()
    if last_ok is None:
        return "never answered"
    if held_since is not None and last_ok < held_since:
        newest = store.time_of(store.tick)
        return (
            f"its last answer came {newest - last_ok:.0f} s ago, before the "
            f"{newest - held_since:.0f} s of history vtop holds"
        )
    processes = store.alternating(target, now, window + 1)
    if processes:
        return alternation_text(processes)
    if not had_traffic(store, target, now, window):
        return NO_TRAFFIC
    return None
