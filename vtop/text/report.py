"""Render a Diagnosis as text (for people and tickets) or JSON (for scripts)."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

from vtop.core.config.inference import is_inferred
from vtop.core.config.server_config import ServerConfig, Setting
from vtop.core.rules.engine import Finding, Pending, ProposedChange
from vtop.core.session.diagnose import Diagnosis, FleetDiagnosis
from vtop.core.session.fleet_verdicts import GroupVerdict, worst_first
from vtop.core.session.router import RouterView
from vtop.core.session.session import Mark
from vtop.core.status import Status
from vtop.text.in_flight import in_flight_json, in_flight_lines
from vtop.text.requests import evidence_json, evidence_lines
from vtop.text.stacks import last_words_json, last_words_lines, whereabouts_json, whereabouts_lines

SCHEMA = "vtop.diagnose/2"
FLEET_SCHEMA = "vtop.fleet/2"
JsonNumber = int | float | None
ProposedValue = int | float | bool | str | None
"""A flag's new value: a number, true / false for a switch, a word (`fp8`), None if unknown."""


def _number(value: float | None) -> str:
    """Compact figure for text output."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "unknown"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def flag_diff(change: ProposedChange) -> list[str]:
    """A literal `vllm serve` argument diff for one change."""
    argument = change.as_flag()
    if argument is None:
        needs = ", ".join(change.unknown) or "data not seen in the window"
        return [f"  {change.flag}: value not computable (needs {needs})"]
    lines = []
    if change.current is not None:
        lines.append(f"  - {change.flag} {_number(change.current)}")
    lines.append(f"  + {argument}")
    return lines


def inferred_settings(finding: Finding, config: ServerConfig | None) -> dict[str, Setting]:
    """The inferred settings a finding's rule read (so the report can say they were inferred)."""
    if config is None:
        return {}
    return {
        name: setting
        for name in sorted(finding.rule.settings)
        if (setting := config.settings.get(name)) is not None and is_inferred(setting)
    }


def finding_lines(
    finding: Finding, indent: str = "", config: ServerConfig | None = None
) -> list[str]:
    """Text block for one finding and its symptoms."""
    rule = finding.rule
    labels = ", ".join(f"{k}={v}" for k, v in finding.labels if k != "model_name")
    head = f"{indent}[{rule.severity.upper()}] {rule.id} {rule.title} ({rule.phase})"
    lines = [head + (f" {{{labels}}}" if labels else ""), f"{indent}  {finding.diagnosis}"]
    evidence = ", ".join(f"{k}={_number(v)}" for k, v in finding.evidence.items())
    if evidence:
        lines.append(f"{indent}  evidence: {evidence}")
    for name, setting in inferred_settings(finding, config).items():
        lines.append(f"{indent}  {name} = {setting.value} is {setting.source}")
    for change in finding.changes:
        lines.append(f"{indent}  suggest: {change.why}")
        lines += [indent + line for line in flag_diff(change)]
        if change.effect:
            lines.append(f"{indent}    expected: {change.effect}")
    for symptom in finding.symptoms:
        lines.append(f"{indent}  explains {symptom.rule.id}: {symptom.diagnosis}")
    return lines


def served_name(model: str) -> str:
    """The model as its users name it: a path's last part (`/models/llama-3-8b` ->
    `llama-3-8b`, so a recording does not show the recording host's directories); a hub id
    (`meta-llama/Llama-3.1-8B`) as it is."""
    if model.startswith(("/", "./", "../", "~")):
        return model.rstrip("/").rsplit("/", 1)[-1] or model
    return model


def text_report(diagnosis: Diagnosis) -> str:
    """The human-readable report (fold it to the terminal's width to print it)."""
    model = diagnosis.config.settings.get("model")
    named = f" ({served_name(str(model.value))})" if model is not None else ""
    lines = [f"vtop diagnose {diagnosis.target}{named} over {diagnosis.window_s:.0f} s"]
    if diagnosis.triage is None:
        if diagnosis.last_words is not None:
            lines.append(f"VERDICT: CRITICAL - {diagnosis.last_words.summary}")
            lines.append(f"  the server: {diagnosis.reason}")
        elif diagnosis.verdict == Status.CRITICAL:
            lines.append("VERDICT: CRITICAL - the engine is stuck (its stacks, below)")
            lines.append(f"  its metrics: {diagnosis.reason}")
        else:
            lines.append(f"VERDICT: could not diagnose - {diagnosis.reason}")
        return "\n".join(
            lines + _quality_lines(diagnosis) + _process_lines(diagnosis) + _running(diagnosis)
        )
    triage = diagnosis.triage
    lines.append(f"VERDICT: {diagnosis.verdict.upper()}")
    if diagnosis.stopped_answering:
        lines.append(f"ENDPOINT STOPPED ANSWERING: {diagnosis.stopped_answering}.")
        lines.append(f"  {STOPPED_HINT}")
    if diagnosis.verdict == Status.INCOMPLETE:
        lines.append("Not healthy yet: the window saw what no rule has judged.")
        lines += [f"  {line}" for line in diagnosis.not_judged]
    elif diagnosis.requests is not None and diagnosis.requests.troubled:
        if triage.primary is None or triage.primary.rule.severity == "info":
            lines.append("No warning or critical finding in the metrics; the requests show one.")
    elif triage.primary is None or triage.primary.rule.severity == "info":
        lines.append("No warning or critical finding.")
    lines += _quality_lines(diagnosis)
    for index, finding in enumerate(triage.findings):
        lines.append("")
        lines.append("PRIMARY" if index == 0 and finding.rule.severity != "info" else "ALSO")
        lines += finding_lines(finding, "  ", diagnosis.config)
        lines += _shortened_hold(finding, diagnosis)
    lines += _process_lines(diagnosis)
    lines += _running(diagnosis)
    if diagnosis.requests is not None:
        lines += evidence_lines(diagnosis.requests)
    lines += _pending_lines(triage.pending)
    lines += _statistics_lines(diagnosis)
    if triage.unchecked:
        lines.append("")
        lines.append("NOT CHECKED")
        lines += [f"  {u.rule.id} {u.rule.title}: {u.how}" for u in triage.unchecked]
    lines += [f"rule error: {error}" for error in triage.errors]
    if diagnosis.events:
        lines += ["", "EVENTS", *(f"  {event_text(event)}" for event in diagnosis.events)]
    return "\n".join(lines)


def _process_lines(diagnosis: Diagnosis) -> list[str]:
    """Where the engine is stuck and why it died, where they were gathered."""
    lines: list[str] = []
    if diagnosis.whereabouts is not None:
        lines += ["", *whereabouts_lines(diagnosis.whereabouts)]
    if diagnosis.last_words is not None:
        lines += ["", *last_words_lines(diagnosis.last_words)]
    return lines


def _shortened_hold(finding: Finding, diagnosis: Diagnosis) -> list[str]:
    """Where a short window judged a finding before its full `for:`, how long it held."""
    held = diagnosis.time - finding.since
    if held >= finding.rule.for_s:
        return []
    return [
        f"    held {held:.0f} s of the {diagnosis.window_s:.0f} s window "
        f"(its for: is {finding.rule.for_s:g} s)"
    ]


def _pending_lines(pending: tuple[Pending, ...]) -> list[str]:
    """Rules holding at the end of the window, not yet for their `for:`."""
    if not pending:
        return []
    lines = ["", "PENDING (holds, not yet for its for:)"]
    for item in pending:
        lines.append(
            f"  [{item.rule.severity.upper()}] {item.rule.id} {item.rule.title}: holds for "
            f"{item.held_s:.0f} s of {item.rule.for_s:.0f} s (run again, or a longer --window)"
        )
    return lines


STOPPED_HINT = (
    "An API server too busy to answer /metrics is a symptom: check its CPU (tokenizing, "
    "streaming) and whether it still serves requests; run vtop diagnose again."
)


def _quality_lines(diagnosis: Diagnosis) -> list[str]:
    """What the endpoint exposed that no vLLM can (its values were left out of the triage)."""
    if not diagnosis.data_quality:
        return []
    lines = ["", "DATA QUALITY (these values were left out; figures built on them may be off)"]
    return lines + [f"  {defect}" for defect in diagnosis.data_quality[:20]]


GAUGE_NAMES = {"running": "running", "waiting": "waiting", "kv": "KV cache"}


def _statistics_lines(diagnosis: Diagnosis) -> list[str]:
    """Key statistics and the effective config used."""
    summary = diagnosis.summary
    lines = ["", f"KEY STATISTICS (the {diagnosis.window_s:.0f} s window)"]
    for name, gauge in diagnosis.gauges.items():
        scale, unit = (100.0, "%") if name == "kv" else (1.0, "")
        figures = [
            f"{label} {_number(None if value is None else value * scale)}{unit}"
            for label, value in (("now", gauge.now), ("mean", gauge.mean), ("max", gauge.peak))
        ]
        lines.append(f"  {GAUGE_NAMES.get(name, name):<9} " + ", ".join(figures))
    if summary is not None:
        lines.append(
            f"  over the window: preemptions/s {_number(summary.preemptions_per_s)}, "
            f"generated tokens/s {_number(summary.generation_tokens_per_s)}, "
            f"TTFT p50 {_number(summary.ttft_p50_s)} s, p99 {_number(summary.ttft_p99_s)} s"
        )
    settings = diagnosis.config.settings
    known = ", ".join(
        f"{name}={served_name(str(value.value)) if name == 'model' else value.value} "
        f"({value.source})"
        for name, value in sorted(settings.items())
    )
    lines.append(f"  config: {known or 'nothing known'}")
    return lines


def json_number(value: float | None) -> JsonNumber:
    """An integral figure as an integer; a non-finite one as None (strict JSON has neither)."""
    if value is None or not math.isfinite(value):
        return None
    return int(value) if float(value).is_integer() else value


def proposed_value(change: ProposedChange) -> ProposedValue:
    """The change's new value, typed: the number, true for a switch, false for `--no-...`."""
    if change.proposed is None or isinstance(change.proposed, float | int):
        return json_number(change.proposed)
    words = change.proposed.split()
    if len(words) == 1:
        return not words[0].startswith("--no-")
    value = " ".join(words[1:])
    try:
        return json_number(float(value))
    except ValueError:
        return value


def change_json(change: ProposedChange) -> dict[str, Any]:
    """A change as JSON; advice in words keeps its text as `proposed` and has no `argument`."""
    words = change.argument()
    advice = words is None and change.as_flag() is not None
    return {
        "flag": words[0] if words else change.flag,
        "current": json_number(change.current),
        "proposed": change.proposed if advice else proposed_value(change),
        "argument": None if words is None else " ".join(words),
        "advice": advice,
        "why": change.why,
        "effect": change.effect,
        "unknown": list(change.unknown),
    }


def finding_json(finding: Finding, config: ServerConfig | None = None) -> dict[str, Any]:
    """One finding as JSON."""
    rule = finding.rule
    inferred = inferred_settings(finding, config)
    return {
        "id": rule.id,
        "title": rule.title,
        "phase": rule.phase,
        "severity": rule.severity,
        "labels": dict(finding.labels),
        "since": finding.since,
        "diagnosis": finding.diagnosis,
        "evidence": {name: json_number(value) for name, value in finding.evidence.items()},
        "changes": [change_json(c) for c in finding.changes],
        "symptoms": [finding_json(s, config) for s in finding.symptoms],
        "inferred": _settings_json(inferred),
    }


def json_report(diagnosis: Diagnosis) -> dict[str, Any]:
    """The documented JSON form (schema vtop.diagnose/2, docs/json-schema.md)."""
    triage = diagnosis.triage
    return {
        "schema": SCHEMA,
        "target": diagnosis.target,
        "time": diagnosis.time,
        "window_s": json_number(round(diagnosis.window_s, 3)),
        "verdict": diagnosis.verdict,
        "exit_code": diagnosis.exit_code,
        "reason": diagnosis.reason,
        "stopped_answering": diagnosis.stopped_answering,
        "not_judged": list(diagnosis.not_judged),
        "primary": finding_json(triage.primary, diagnosis.config)
        if triage and triage.primary
        else None,
        "findings": [finding_json(f, diagnosis.config) for f in triage.findings] if triage else [],
        "unchecked": [
            {"id": u.rule.id, "missing": list(u.missing), "how": u.how}
            for u in (triage.unchecked if triage else ())
        ],
        "pending": [
            {
                "id": item.rule.id,
                "title": item.rule.title,
                "severity": item.rule.severity,
                "labels": dict(item.labels),
                "held_s": json_number(round(item.held_s, 3)),
                "for_s": json_number(item.rule.for_s),
            }
            for item in (triage.pending if triage else ())
        ],
        "statistics": dataclasses.asdict(diagnosis.summary) if diagnosis.summary else None,
        "window_gauges": {
            name: {"now": gauge.now, "mean": gauge.mean, "max": gauge.peak}
            for name, gauge in diagnosis.gauges.items()
        },
        "config": _settings_json(diagnosis.config.settings),
        "events": [event_json(mark) for mark in diagnosis.events],
        "data_quality": [
            {"kind": d.kind, "line": d.line, "text": d.text} for d in diagnosis.data_quality
        ],
        "stacks": None
        if diagnosis.whereabouts is None
        else whereabouts_json(diagnosis.whereabouts),
        "last_words": None
        if diagnosis.last_words is None
        else last_words_json(diagnosis.last_words),
        "requests": None if diagnosis.requests is None else evidence_json(diagnosis.requests),
        "in_flight": None
        if diagnosis.in_flight is None
        else [in_flight_json(request) for request in diagnosis.in_flight],
    }


def _running(diagnosis: Diagnosis) -> list[str]:
    """The requests in flight at the last answer, when the server lists any."""
    if not diagnosis.in_flight:
        return []
    return ["", *in_flight_lines(diagnosis.in_flight)]


def _settings_json(settings: dict[str, Setting]) -> dict[str, dict[str, Any]]:
    """Settings with where each came from; numbers as numbers."""
    return {
        name: {
            "value": json_number(v.value) if isinstance(v.value, float | int) else v.value,
            "source": v.source,
        }
        for name, v in settings.items()
    }


def event_json(mark: Mark) -> dict[str, Any]:
    """One event: when (Unix seconds), its kind, the server and what happened."""
    return {
        "time": mark.timestamp,
        "kind": str(mark.kind),
        "target": mark.target,
        "message": mark.text,
    }


def event_text(mark: Mark) -> str:
    """One event as a report line."""
    return f"{time.strftime('%H:%M:%S', time.gmtime(mark.timestamp))}Z {mark.kind}: {mark.text}"


def fleet_text_report(fleet: FleetDiagnosis) -> str:
    """The fleet findings (imbalance across servers), then each server's report."""
    servers = fleet.servers
    routers = f", {len(fleet.routers)} router(s)" if fleet.routers else ""
    lines = [
        f"vtop fleet diagnosis: {len(servers)} vLLM server(s){routers}, exit code {fleet.exit_code}"
    ]
    lines += judged_lines(fleet)
    findings = fleet.fleet.findings if fleet.fleet else ()
    lines.append("ACROSS SERVERS" if findings else "No imbalance across servers.")
    for finding in findings:
        lines += finding_lines(finding, "  ")
    lines += [f"  {event_text(event)}" for event in fleet.events]
    lines += group_lines(fleet.groups)
    for router in fleet.routers:
        lines += router_lines(router)
    healthy = [d for d in servers if d.verdict is Status.OK] if fleet.judged_in_prometheus else []
    listed = {d.target for d in healthy}
    for diagnosis in worst_first(servers):
        if diagnosis.target not in listed:
            lines += ["", text_report(diagnosis)]
    if healthy:
        named = ", ".join(d.target for d in healthy[:OK_NAMED])
        more = f" and {len(healthy) - OK_NAMED} more" if len(healthy) > OK_NAMED else ""
        lines += ["", f"OK ({len(healthy)} servers, no finding): {named}{more}"]
    return "\n".join(lines)


OK_NAMED = 10
"""Healthy servers named in a fleet judged in Prometheus (the JSON lists every one)."""


def judged_lines(fleet: FleetDiagnosis) -> list[str]:
    """Who judged: Prometheus for the fleet, vtop on the raw series of the servers named."""
    if not fleet.judged_in_prometheus:
        return []
    drilled = ", ".join(fleet.evidence_of) or "none (no server had a finding)"
    return [
        "judged in Prometheus: each rule's condition for every server (--judge prometheus);",
        f"  with evidence and flag changes (raw series judged here): {drilled}",
    ]


def group_lines(groups: list[GroupVerdict]) -> list[str]:
    """BY NAMESPACE, BY MODEL: each group's replicas by verdict, its requests, its worst."""
    lines: list[str] = []
    for group in groups:
        heading = f"BY {group.key.upper()}"
        if heading not in lines:
            lines += ["", heading]
        counted = ", ".join(f"{count} {verdict}" for verdict, count in group.verdicts)
        load = f"{_figure(group.running, '.0f')} running, {_figure(group.waiting, '.0f')} waiting"
        replicas = f"{group.replicas} replica{'' if group.replicas == 1 else 's'}"
        lines.append(f"  {group.value} ({replicas}): {counted}; {load}")
        lines.append(f"    worst {group.worst}: {group.worst_says}")
    return lines


def group_json(group: GroupVerdict) -> dict[str, Any]:
    """One group of the fleet as JSON (its fields; the verdicts as an object)."""
    return {**dataclasses.asdict(group), "verdicts": dict(group.verdicts)}


def router_lines(router: RouterView) -> list[str]:
    """A router's view of each backend, beside the engine's own latency."""
    lines = ["", f"ROUTER {router.target} (not a server: its view of each backend)"]
    if not router.backends:
        lines.append("  no backend in its series")
    for backend in router.backends:
        read_as = backend.target or "not among the servers read"
        lines.append(f"  {backend.backend} ({read_as})")
        figures = [
            f"{_figure(backend.qps, '.1f')} req/s",
            f"{_figure(backend.running, '.0f')} running",
            f"{_figure(backend.waiting, '.0f')} waiting",
            f"errors {_figure(backend.errors_per_s, '.2f')}/s",
        ]
        lines.append("    " + ", ".join(figures))
        latency = (
            f"p99 latency at the router {_figure(backend.router_p99_s, '.2f')} s, "
            f"in the engine {_figure(backend.engine_p99_s, '.2f')} s"
        )
        lines.append("    " + latency)
        if backend.slow_on_the_path:
            lines += [
                "    [WARNING] slow at the router, not in the engine: the time goes on the",
                "    path between them (network, a proxy, the router's own queue)",
            ]
    return lines


def _figure(value: float | None, spec: str) -> str:
    return "?" if value is None else format(value, spec)


def router_json(router: RouterView) -> dict[str, Any]:
    """A router's view of each backend as JSON."""
    return {
        "target": router.target,
        "backends": [
            {
                "backend": b.backend,
                "server": b.target,
                "qps": b.qps,
                "running": b.running,
                "waiting": b.waiting,
                "errors_per_s": b.errors_per_s,
                "router_p99_s": b.router_p99_s,
                "engine_p99_s": b.engine_p99_s,
                "slow_on_the_path": b.slow_on_the_path,
            }
            for b in router.backends
        ],
    }


def fleet_json_report(fleet: FleetDiagnosis) -> dict[str, Any]:
    """The fleet report as JSON (schema vtop.fleet/2): fleet findings plus every server's."""
    findings = fleet.fleet.findings if fleet.fleet else ()
    return {
        "schema": FLEET_SCHEMA,
        "exit_code": fleet.exit_code,
        "fleet": {
            "findings": [finding_json(f) for f in findings],
            "events": [event_json(m) for m in fleet.events],
        },
        "servers": [json_report(diagnosis) for diagnosis in worst_first(fleet.servers)],
        "routers": [router_json(router) for router in fleet.routers],
        "groups": [group_json(group) for group in fleet.groups],
        "judged_in": "prometheus" if fleet.judged_in_prometheus else "vtop",
        "evidence_of": list(fleet.evidence_of),
    }
