"""Long-form text for the help, explain and diagnosis screens (pure)."""

from __future__ import annotations

from pathlib import Path

from vtop.core.config.panels import help_words, key_range
from vtop.core.config.server_config import ServerConfig
from vtop.core.rules.engine import Finding
from vtop.core.rules.loader import PACKAGED
from vtop.text.report import finding_lines

HELP_TEMPLATE = """\
Keys
  q, ctrl+c  quit (a server vtop started keeps running)
  ?, h, F1   this help
  Enter, e   explain the highlighted finding (the primary one
             until you move): evidence, every fix, why
  d          the full diagnosis, as `vtop diagnose` prints it
  p          pause the display (polling goes on, nothing lost)
  + / -      poll faster / slower (replay: play faster / slower)
{panels}
  b          write an incident bundle (last 10 minutes)
  w          where the engine is: its processes' Python stacks
             (py-spy, read-only; a live server on this host)
  R          the slowest requests, and which held up others
             (vLLM's spans: vtop --otlp ADDR, a recording's)
  a          on a server vtop started: apply the finding's
             change, measure, keep it or roll back
  r          on a server vtop started: restart, same flags
  t          next endpoint (several servers)
  f, Esc     the fleet table and back (several servers)
  tab        move between the findings and the charts
  ctrl+p     command palette (panels, replay, screenshot)

Fleet table
  Enter      open the server's dashboard
  s / S      sort by the next column / flip the order
  /          filter by server, model, state or finding

Replay (vtop replay FILE, vtop demo)
  p          pause / resume playback
  + / -      faster / slower (x0.25 ... x100)
  [ / ]      one frame back / forward (pauses)
  { / }      60 s back / forward
  s          speed: x1, x10, as fast as possible

The line under the header is the primary finding's action:
severity, rule, title and the first flag change. While the
first window fills, the header says WATCHING and no verdict is
given. When the data stops, the findings are marked as the last
ones seen. Charts plot seconds relative to now; vertical lines
mark restarts, preemption bursts, KV saturation and applied
changes; the line on Requests is max-num-seqs.

Triage order: queue -> memory -> compute. The primary finding is
the root cause to act on first; the symptoms it explains are
listed under it. A rule that needs a value vtop does not know is
"not checked" in the diagnosis (d), with how to give it.
"""
PANEL_HELP_INDENT = 13
"""Where the help's descriptions begin."""
HELP_WIDTH = 65
"""The help's widest line (it is shown in a modal at 80 columns)."""


def _panel_help() -> str:
    """The panel keys' lines of the help, from the panel table."""
    first, *rest = help_words(HELP_WIDTH - PANEL_HELP_INDENT, "show or hide a panel:")
    head = f"  {key_range():<{PANEL_HELP_INDENT - 2}}{first}"
    return "\n".join([head] + [" " * PANEL_HELP_INDENT + line for line in rest])


HELP = HELP_TEMPLATE.replace("{panels}", _panel_help())
"""The help screen's text."""


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
