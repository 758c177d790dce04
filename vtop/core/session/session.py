"""A watching session: frames in, store + findings + chart history + event log out.

The dashboard, replay and demo all feed frames to a Session; it never does I/O and takes time
from the frames, so a replay gives the same findings at the same times as the live run.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass, field

from vtop.core.config.effective_config import DiagnoseOptions, server_config
from vtop.core.config.inference import WINDOW_S as INFERENCE_WINDOW_S
from vtop.core.config.inference import Inferences
from vtop.core.config.server_config import ServerConfig
from vtop.core.frame import (
    SCRAPE_FAILURES,
    EventKind,
    Frame,
    GpuSnapshot,
    RequestSpan,
    TargetScrape,
)
from vtop.core.histogram import Buckets
from vtop.core.ingest.excerpt import STARTUP_LINE
from vtop.core.ingest.quality import Defect, QualityChecker
from vtop.core.rules.alerts import alert_triage, fleet_alert_triage, merged, vtop_made_rules
from vtop.core.rules.engine import Engine, Finding, Triage
from vtop.core.rules.promql.printer import VTOP_MADE_PREFIXES
from vtop.core.rules.promql.samples import LOOKBACK_S
from vtop.core.rules.rule import Rule, reach_s
from vtop.core.session.history import SummaryHistory
from vtop.core.session.recent import RecentFrames
from vtop.core.store.rings import Reaches
from vtop.core.store.store import DEFAULT_CAPACITY, INSTANCE, Store
from vtop.core.store.summary import (
    WINDOW_NAMES,
    TargetSummary,
    merged_latency,
    quick_summary,
    summarize_with_ttft,
)

LOG_LINES_KEPT = 5000
SPANS_KEPT = 20_000
"""Request spans a session keeps (about 8 MB): hours of a busy server's slowest."""
MARKS_KEPT = 500
KV_SATURATED = 0.95
FLEET_TARGET = "fleet"
RULE_BUDGET = 10
"""Servers whose rules run per frame in a fleet (in turn; the one on screen always)..."""
JUDGED_EVERY_FRAMES = 5
"""...and in a small fleet, each server's rules every this many frames (their windows are
minutes and their `for` seconds; the one on screen every frame)."""
FLEET_RULES_EVERY_S = 5.0
STORE_TICKS_X_SERVERS = 14_400
"""Ticks x servers the store keeps (history shrinks as servers are added, to bound memory)."""
MIN_STORE_TICKS = 400
"""Never fewer: the rules' longest window is 5 minutes."""
DEFECTS_KEPT = 200
QUIET_BEFORE_MARK_S = 60.0
"""A burst or saturation is marked again only after this long without one."""


@dataclass(frozen=True)
class Mark:
    """Something worth a line in the event log and a marker on the charts."""

    timestamp: float
    kind: EventKind
    target: str
    text: str


@dataclass
class TargetView:
    """What the session knows about one target."""

    target: str
    history: SummaryHistory
    config: ServerConfig = field(default_factory=ServerConfig)
    """The effective config: what the server, its flags and log say, plus inferences."""
    base_config: ServerConfig = field(default_factory=ServerConfig)
    """What the server, its flags and its log say (no inference)."""
    inferences: Inferences = field(default_factory=Inferences)
    quality: QualityChecker = field(default_factory=QualityChecker)
    defects: deque[tuple[float, Defect]] = field(default_factory=lambda: deque(maxlen=DEFECTS_KEPT))
    """Data-quality defects seen recently (time, defect)."""
    alternating: int = 0
    """Processes answering this URL in turn (0: one); no triage while they alternate."""
    triage: Triage | None = None
    last_scrape: TargetScrape | None = None
    last_ok_scrape: TargetScrape | None = None
    """The last answer, without its text and samples (the store holds its values)."""
    last_timestamp: float | None = None
    failures_since_ok: int = 0
    """Scrapes that failed since the last answer (0 while it answers)."""
    first_ok_timestamp: float | None = None
    """When the target first answered in this session (a window needs that long behind it)."""
    ttft_buckets: Buckets | None = None
    """The TTFT buckets' increases behind the summary's latest full figures (a fleet's TTFT
    adds its servers')."""

    @property
    def summary(self) -> TargetSummary | None:
        """The newest headline figures."""
        return self.history.latest


class Session:
    """Ingests frames in time order; everything the views show comes from here."""

    def __init__(
        self,
        rules: list[Rule],
        options: DiagnoseOptions,
        rule_budget: int | None = None,
        store_capacity: int = DEFAULT_CAPACITY,
        alerts: bool = False,
        store_retention_s: float | None = None,
        store_reaches: Reaches | None = None,
    ) -> None:
        self.store = Store(store_capacity, retention_s=store_retention_s, reaches=store_reaches)
        self.alerts = alerts
        """Findings are the alerts Prometheus fires for the exported rules (alert_triage), not
        the rules evaluated here (the raw series are not read)."""
        self.engine = Engine(rules)
        self.vtop_made = Engine(vtop_made_rules(rules)) if alerts else None
        """With the findings from Prometheus: the rules only vtop can evaluate (GPU series)."""
        self._vtop_made_names = frozenset(
            name
            for rule in (self.vtop_made.rules if self.vtop_made else [])
            for name in rule.names_read
            if name.startswith(VTOP_MADE_PREFIXES)
        )
        """The series those rules need, one of which a server must have for them to run."""
        self.options = options
        self.history_points = store_capacity
        """Chart points kept per server: as many as the store keeps ticks."""
        self.targets: dict[str, TargetView] = {}
        self.marks: deque[Mark] = deque(maxlen=MARKS_KEPT)
        self.recent_frames = RecentFrames()
        """Recent frames as text only (a bundle re-parses them, as a replay does)."""
        self.log_lines: deque[str] = deque(maxlen=LOG_LINES_KEPT)
        self.spans: deque[RequestSpan] = deque(maxlen=SPANS_KEPT)
        """vLLM's request spans the frames brought, the newest SPANS_KEPT."""
        self.startup_log: list[str] = []
        self.gpu: GpuSnapshot | None = None
        self.exited: dict[str, Mark] = {}
        """Managed servers whose process exited, by target (until they answer again)."""
        self.now: float | None = None
        self.first_timestamp: float | None = None
        """The time of the first frame: the session has seen from then to `now`."""
        self._log_changed = False
        self.rule_budget = rule_budget
        """At most this many targets' rules per frame (round robin; the focused one always)."""
        self.fleet = TargetView(FLEET_TARGET, SummaryHistory(1))
        """Findings of the fleet-scope rules (imbalance across servers) and the fleet's TTFT."""
        self._rotation = 0

    def ingest(self, frame: Frame, focus: str | None = None) -> None:
        """One frame: store, log, config, rules, history and marks (under a rule budget, the
        `focus` target, the one on screen, is judged every frame)."""
        self.now = frame.timestamp
        if self.first_timestamp is None:
            self.first_timestamp = frame.timestamp
        self.recent_frames.add(frame)
        if frame.gpu is not None:
            self.gpu = frame.gpu
        self.spans.extend(frame.spans)
        self._take_log(frame.log_lines)
        events = [*self.store.ingest(frame), *frame.events]
        for event in events:
            if event.kind not in SCRAPE_FAILURES:
                mark = Mark(event.timestamp, event.kind, event.target, event.message)
                self.marks.append(mark)
                if event.kind is EventKind.EXITED:
                    self.exited[event.target] = mark
        restarted = {event.target for event in events if event.kind is EventKind.RESTART}
        judged = self._judged_now(frame.scrapes, focus)
        for scrape in frame.scrapes:
            self._ingest_scrape(scrape, frame, scrape.target in restarted, scrape.target in judged)
        if len(self.targets) > 1 and self._fleet_due(frame.timestamp):
            self.fleet.last_timestamp = frame.timestamp
            self.fleet_point_reached(frame.timestamp)
            latency = merged_latency(self.store, frame.timestamp, self.options.window_s)
            self.fleet.history.append(frame.timestamp, latency)
        self._log_changed = False

    def judge_fleet(self, now: float) -> None:
        """The fleet-scope rules at `now`."""
        triage = (
            fleet_alert_triage(self.store, now, self.engine.rules)
            if self.alerts
            else self.engine.evaluate_fleet(self.store, now)
        )
        self._mark_findings(self.fleet, triage, now)
        self.fleet.triage = triage

    def _fleet_due(self, now: float) -> bool:
        """Fleet rules run every frame, or every FLEET_RULES_EVERY_S under a rule budget (their
        windows are minutes long; over a hundred servers one run costs tens of ms)."""
        last = self.fleet.last_timestamp
        if self.rule_budget is None or last is None:
            return True
        return not 0 <= now - last < FLEET_RULES_EVERY_S

    def _judged_now(self, scrapes: tuple[TargetScrape, ...], focus: str | None) -> set[str]:
        """Targets whose rules run this frame: all, or the budget's share in turn (plus focus)."""
        names = [scrape.target for scrape in scrapes if scrape.ok]
        if self.rule_budget is None or self.alerts:  # reading alerts costs next to nothing
            return set(names)
        budget = min(self.rule_budget, math.ceil(len(names) / JUDGED_EVERY_FRAMES))
        start = self._rotation % max(len(names), 1)
        self._rotation = start + budget
        chosen = {names[(start + offset) % len(names)] for offset in range(budget)}
        return chosen | ({focus} & set(names) if focus else set())

    def _take_log(self, lines: tuple[str, ...]) -> None:
        """Keep log lines; a new startup begins a new startup log."""
        for line in lines:
            if STARTUP_LINE.search(line):
                self.startup_log = []
            self.startup_log.append(line)
            self.log_lines.append(line)
        self._log_changed = self._log_changed or bool(lines)

    def target(self, target: str) -> TargetView:
        """The view of a target, created on first sight."""
        if target not in self.targets:
            self.targets[target] = TargetView(target, SummaryHistory(self.history_points))
        return self.targets[target]

    def _ingest_scrape(
        self, scrape: TargetScrape, frame: Frame, restarted: bool, judged: bool = True
    ) -> None:
        """One target's scrape: its failure, or its config, figures and (when `judged`)
        triage."""
        view = self.target(scrape.target)
        view.last_timestamp = frame.timestamp
        view.failures_since_ok = 0 if scrape.ok else view.failures_since_ok + 1
        if not scrape.ok:
            self._take_failure(view, scrape, frame.timestamp)
            return
        self._take_answer(view, scrape, frame, restarted)
        now = frame.timestamp
        self._check_quality(view, scrape, now)
        self._take_figures(view, now, judged)
        if judged:
            view.alternating = self.store.alternating(scrape.target, now, ALTERNATION_WINDOW_S)
            point = JudgePoint(now, view.target, view.base_config, restarted, view.alternating)
            self.point_reached(view, point)

    def _take_failure(self, view: TargetView, scrape: TargetScrape, now: float) -> None:
        """A failed scrape: marked when its kind of failure begins."""
        previous = view.last_scrape
        if previous is None or previous.status is not scrape.status:
            text = f"{scrape.status.value}: {scrape.error}"
            self.marks.append(Mark(now, scrape.status.event_kind, scrape.target, text))
        view.last_scrape = scrape

    def _take_answer(
        self, view: TargetView, scrape: TargetScrape, frame: Frame, restarted: bool
    ) -> None:
        """An answer: a recovery marked, the config read again where it may have changed (a
        restart, a new startup log, the first answer), the process alive again."""
        recovered = view.last_scrape is not None and not view.last_scrape.ok
        if recovered:
            text = "scrapes work again"
            self.marks.append(Mark(frame.timestamp, EventKind.RECOVERED, scrape.target, text))
        if restarted:
            view.inferences.clear()
        if restarted or self._log_changed or view.last_scrape is None or recovered:
            view.base_config = server_config(scrape, frame.gpu or self.gpu, self._options())
            view.config = view.base_config
        view.last_scrape = view.last_ok_scrape = scrape.bare()
        if view.first_ok_timestamp is None:
            view.first_ok_timestamp = frame.timestamp
        self.exited.pop(scrape.target, None)

    def _take_figures(self, view: TargetView, now: float, judged: bool) -> None:
        """The headline figures (in full when the target is judged this frame), their marks
        and the chart history."""
        window = self.options.window_s
        if judged:
            summary, view.ttft_buckets = summarize_with_ttft(self.store, view.target, now, window)
        else:
            summary = quick_summary(self.store, view.target, now, window, view.summary)
        self._mark_changes(view, summary, now)
        view.history.append(now, summary)

    def point_reached(self, view: TargetView, point: JudgePoint) -> None:
        """A target's point to judge: a watching session judges it now."""
        self.judge(view, point)

    def fleet_point_reached(self, now: float) -> None:
        """The fleet's point to judge: a watching session judges it now."""
        self.judge_fleet(now)

    def judge(self, view: TargetView, point: JudgePoint) -> None:
        """The target's rules at the point's time on its config plus inferences, and the marks
        they make (none while processes alternate behind its URL)."""
        if point.alternating:
            view.triage = Triage((), (), (alternation_text(point.alternating),))
            return
        now = point.timestamp
        view.config = self.with_inferences(view, now, point.base_config)
        if self.alerts:
            triage = alert_triage(self.store, view.target, now, self.engine.rules)
            if self.vtop_made is not None:
                triage = self._with_vtop_made(view, triage, now)
        else:
            pseudo = view.config.pseudo_metrics()
            triage = self.engine.evaluate(self.store, view.target, now, pseudo)
        self._mark_findings(view, triage, now)
        view.triage = triage

    def _with_vtop_made(self, view: TargetView, triage: Triage, now: float) -> Triage:
        """The findings from Prometheus and those of the rules only vtop evaluates (GPU), which
        run only for a server with a series they read (most servers of a fleet have none)."""
        assert self.vtop_made is not None
        target = view.target
        if not any(self.store.select(n, {INSTANCE: target}) for n in self._vtop_made_names):
            self.vtop_made.forget(target)
            return triage
        pseudo = view.config.pseudo_metrics()
        return merged(triage, self.vtop_made.evaluate(self.store, target, now, pseudo))

    def _check_quality(self, view: TargetView, scrape: TargetScrape, now: float) -> None:
        """Keep the scrape's data-quality defects; mark a kind when it first appears."""
        before = {defect.kind for when, defect in view.defects if when >= now - QUIET_BEFORE_MARK_S}
        found = view.quality.check(scrape, self.store.defects(scrape.target))
        for defect in found:
            view.defects.append((now, defect))
        for kind in sorted({d.kind for d in found} - before):
            first = next(d for d in found if d.kind == kind)
            self.marks.append(Mark(now, EventKind.DATA_QUALITY, view.target, str(first)))

    def with_inferences(self, view: TargetView, now: float, base: ServerConfig) -> ServerConfig:
        """A config with what the engine's behaviour shows up to `now` (see inference.py)."""
        capacity, engines = base.number("kv_capacity_tokens"), base.number("num_engines")
        per_engine = capacity / (engines or 1) if capacity else None
        inferred = view.inferences.update(self.store, view.target, now, per_engine)
        return base.with_inferences(inferred) if inferred else base

    def _options(self) -> DiagnoseOptions:
        """Diagnose options with the startup log seen in frames (when there is one)."""
        if not self.startup_log:
            return self.options
        return dataclasses.replace(self.options, vllm_log="\n".join(self.startup_log))

    def _mark_changes(self, view: TargetView, summary: TargetSummary, now: float) -> None:
        """Marks for the start of a preemption burst and for KV saturation."""
        previous = view.summary
        before_preempt = previous.preemptions_per_s if previous else None
        before_kv = previous.kv_usage if previous else None
        if _started(before_preempt, summary.preemptions_per_s, 0.0):
            text = f"preemption burst: {summary.preemptions_per_s:.2f}/s"
            self._mark_unless_recent(Mark(now, EventKind.PREEMPTIONS, view.target, text), view)
        if _started(before_kv, summary.kv_usage, KV_SATURATED):
            text = f"KV cache saturated: {summary.kv_usage:.0%}"
            self._mark_unless_recent(Mark(now, EventKind.KV, view.target, text), view)

    def _mark_unless_recent(self, mark: Mark, view: TargetView) -> None:
        """Add a mark unless the figure was already over its threshold within the quiet time."""
        field = "preemptions_per_s" if mark.kind is EventKind.PREEMPTIONS else "kv_usage"
        threshold = 0.0 if mark.kind is EventKind.PREEMPTIONS else KV_SATURATED
        recent = view.history.newest_first(field, mark.timestamp - QUIET_BEFORE_MARK_S)
        if any(value > threshold for _, value in recent):
            return
        self.marks.append(mark)

    def _mark_findings(self, view: TargetView, triage: Triage, now: float) -> None:
        """Marks for findings that appeared or cleared since the last evaluation."""
        before = _by_key(view.triage)
        after = _by_key(triage)
        for key in sorted(after.keys() - before.keys()):
            text = f"{short_key(after[key])} appeared: {after[key].rule.title}"
            self.marks.append(Mark(now, EventKind.FINDING, view.target, text))
        for key in sorted(before.keys() - after.keys()):
            text = f"{short_key(before[key])} cleared: {before[key].rule.title}"
            self.marks.append(Mark(now, EventKind.CLEARED, view.target, text))


@dataclass(frozen=True)
class JudgePoint:
    """A target's rules to run: who, when, on what config."""

    timestamp: float
    target: str
    base_config: ServerConfig
    restarted: bool = False
    """The target restarted at this frame: what was inferred before no longer holds."""
    alternating: int = 0
    """Processes answering the target's URL in turn at this frame (0: one)."""


ALTERNATION_WINDOW_S = 300.0
"""A process start time that came back within this long means the URL alternates."""


def alternation_text(processes: int) -> str:
    """What to say about a URL answered by several processes in turn."""
    return (
        f"this URL alternates between {processes} vLLM processes (their start times come back "
        "in turn: a load balancer in front of replicas); its counters jump both ways, so no "
        "diagnosis is made from it: scrape each replica's own URL"
    )


def watching_retention_s(rules: list[Rule], options: DiagnoseOptions) -> float:
    """The seconds of ticks a watching session's store keeps: what its rules reach back (the
    widest range, an instant selector's lookback), the summary window and the inference
    window. A one-shot triage keeps its whole window instead: its diagnosis reads all of it."""
    return max(LOOKBACK_S, options.window_s, INFERENCE_WINDOW_S, *(r.reach_s for r in rules))


def watching_session(
    rules: list[Rule], options: DiagnoseOptions, servers: int, alerts: bool = False
) -> Session:
    """The session of a watching view (the dashboard, `--plain`, the fleet table): history and
    retention sized to the servers watched and the rules; several servers share the rule
    budget (each judged in turn), so a fleet costs the same per tick whatever shows it."""
    return Session(
        rules,
        options,
        rule_budget=RULE_BUDGET if servers > 1 else None,
        store_capacity=store_ticks_for(servers),
        alerts=alerts,
        store_retention_s=watching_retention_s(rules, options),
        store_reaches=watching_reaches(rules, options),
    )


READ_WHEN_ASKED_S = 120.0
"""The most history of a watching session a what-if calibrates on (the dashboard's model
window): every series is held at least this long, so that reading it lengthens nothing."""


def watching_reaches(rules: list[Rule], options: DiagnoseOptions) -> Reaches:
    """How far back a watching session reads each series name: the rules' widest range or
    lookback of it; a diagnosis' window, the whole retention, of the names it states over it;
    and at least what is read of any series when asked (a what-if's calibration, the summary
    and the inference windows). The store holds each name's rings that long from their first
    tick; the buckets, `_created` times and series not from vLLM that no rule reads are short
    until a view reads back as far (its charts and figures, from their first tick on)."""
    least = max(READ_WHEN_ASKED_S, options.window_s, INFERENCE_WINDOW_S)
    reach = dict.fromkeys(WINDOW_NAMES, math.inf)
    for rule in rules:
        for selector in rule.selectors_read:
            reach[selector.name] = max(reach.get(selector.name, least), reach_s(selector))
    return Reaches(reach, least)


def store_ticks_for(servers: int) -> int:
    """Store capacity in ticks for a number of servers (3600 for up to four)."""
    return max(MIN_STORE_TICKS, min(DEFAULT_CAPACITY, STORE_TICKS_X_SERVERS // max(servers, 4)))


def short_key(finding: Finding) -> str:
    """Rule id plus the engine when there is one (the model label is in the header)."""
    engine = dict(finding.labels).get("engine")
    return finding.rule.id if engine is None else f"{finding.rule.id}[engine {engine}]"


def _started(before: float | None, after: float | None, threshold: float) -> bool:
    """True when a figure rises above a threshold it was not above."""
    return after is not None and after > threshold and (before is None or before <= threshold)


def _by_key(triage: Triage | None) -> dict[str, Finding]:
    """Findings (with their symptoms) by key."""
    if triage is None:
        return {}
    found = {finding.key: finding for finding in triage.findings}
    found |= {s.key: s for finding in triage.findings for s in finding.symptoms}
    return found
