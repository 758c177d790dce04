"""Long-form text for the help, explain and diagnosis screens (pure)."""

from __future__ import annotations

from pathlib import Path

from vtop.core.config.server_config import ServerConfig
from vtop.core.rules.engine import Finding
from vtop.core.rules.loader import PACKAGED
from vtop.core.session.diagnose import Diagnosis
from vtop.core.session.session import Mark, TargetState
from vtop.text.report import finding_lines, text_report

HELP = """\
Keys
  q          quit (a server vtop started keeps running)
  p          pause / resume the display (polling continues, nothing is lost)
  + / -      poll faster / slower (in a replay: play faster / slower)
  1 ... 9    show or hide a panel:
             1 requests  2 KV cache  3 preemptions  4 TTFT histogram  5 TTFT over time
             6 throughput  7 latency (ITL, queue, prefill)  8 prefix cache  9 GPUs
  d          full diagnosis of the selected endpoint (as `vtop diagnose` prints it)
  b          write an incident bundle (last 10 minutes, findings, log tail) to a tarball
  a          apply the highlighted finding's flag change to a server vtop started: shows the
             argv diff, then baseline -> restart -> same window -> keep or roll back
  r          restart the server vtop started, same flags (asks first)
  e / Enter  explain the highlighted finding: evidence, flag change, why, expected effect
  tab        move between the findings list and the charts
  ctrl+p     command palette (bundle, replay, fleet, panels, screenshot)
  t          next endpoint (when watching several)
  f          the fleet table, and back; Esc goes to it when watching several
  ?          this help

The line under the header is the primary finding's action: severity, rule, title and the
first flag change. When the data stops, it and the findings say so ("UNREACHABLE, last data
2m ago; last seen: ...") instead of showing the last warning as current.

Fleet table (several URLs, or --prometheus)
  Enter      open the server's dashboard
  s / S      sort by the next column / flip the order
  /          filter by server, model, state or finding (Esc clears)

Replay (vtop replay FILE, vtop demo)
  p          pause / resume playback
  + / -      faster / slower (x0.25 ... x100)
  [ / ]      one frame back / forward (pauses)
  { / }      60 s back / forward
  s          speed: x1, x10, as fast as possible

Charts plot seconds relative to now. Vertical lines mark events: restarts, preemption
bursts, KV saturation, applied changes. The horizontal line on Requests is max-num-seqs.

Triage order: queue -> memory -> compute. The primary finding is the root cause to act on
first; symptoms it explains are listed under it, not as separate alarms. A rule that needs a
value vtop does not know is listed under "not checked" in the diagnosis (d), with the option
that would let it run (--vllm-args, --vllm-log).
"""


def rule_location(path: str) -> str:
    """A packaged rule file as rules/NAME (where vtop is installed does not matter)."""
    file = Path(path)
    return f"rules/{file.name}" if file.parent == PACKAGED else path


def explain(finding: Finding, config: ServerConfig | None = None) -> str:
    """Everything vtop knows about one finding (inferred settings it used said so)."""
    rule = finding.rule
    lines = finding_lines(finding, config=config)
    lines += ["", f"rule: {rule_location(rule.path)}:{rule.line}", f"expression: {rule.expr_text}"]
    if rule.source:
        lines.append(f"source: {rule.source}")
    since = f"holding since t={finding.since:.0f}"
    return "\n".join([*lines, since])


def current_diagnosis(view: TargetState, window: float, events: list[Mark]) -> Diagnosis:
    """The session's current state of a target as a Diagnosis (as `vtop diagnose` reports)."""
    now = view.last_timestamp or 0.0
    diagnosis = Diagnosis(view.target, now, window, view.triage, view.config, view.summary)
    if view.triage is None:
        diagnosis.reason = "no successful scrape yet"
    diagnosis.events = events
    return diagnosis


def diagnosis_text(view: TargetState, window: float, events: list[Mark]) -> str:
    """The `vtop diagnose` report for the session's current state of a target."""
    return text_report(current_diagnosis(view, window, events))
