"""The evidence of servers judged in Prometheus: their raw series over a window, judged here.

Findings judged by Prometheus (`--judge prometheus`, `--alerts`) say which rule holds, not
the numbers behind it nor the flag change. For the servers someone looks at (the worst five
of `vtop diagnose --prometheus`, the server on screen when `d` is pressed) vtop pulls those
servers' raw series for the window and judges them with its own engine, as a direct scrape
would be judged.
"""

from __future__ import annotations

from collections.abc import Sequence

from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.ingest.sources.prometheus import instance_of, past_window
from vtop.core.ingest.sources.vllm_http import ScrapeOptions
from vtop.core.rules.rule import Rule
from vtop.core.session.diagnose import (
    Diagnosis,
    FleetDiagnosis,
    diagnose_fleet,
    evidence_by_target,
)

DRILL_WINDOW_S = 300.0
"""The dashboard's drill-down reads the last five minutes: the widest window a rule reads."""


async def evidence_of(
    url: str,
    targets: Sequence[str],
    window: tuple[float, float, float],
    scraping: ScrapeOptions,
    rules: list[Rule],
    options: DiagnoseOptions,
) -> FleetDiagnosis:
    """The targets' raw series over the window (since, step, now) judged here (and the GPUs
    of their pods, joined as always)."""
    since_s, step_s, now = window
    instances = [instance_of(target) for target in targets]
    frames = await past_window(url, since_s, step_s, scraping, now, instances)
    return diagnose_fleet(frames, rules, options)


def evidence_for(fleet: FleetDiagnosis, target: str) -> Diagnosis | None:
    """The target's diagnosis in a drill-down's fleet (None: it had no data there)."""
    return evidence_by_target(fleet).get(instance_of(target))
