"""Who evaluates the rules over a Prometheus fleet: `--judge auto|vtop|prometheus`.

`auto` counts the servers Prometheus has seen in the last hour once, at start: from
JUDGE_IN_PROMETHEUS_FROM of them Prometheus evaluates the rules' conditions (a few queries a
tick), below that vtop pulls the raw series and judges them itself (every figure and its
evidence on every server). The answer is written back into the settings as `vtop` or
`prometheus`, so every part of the command reads the same choice.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import time

from vtop.core.config.settings import (
    JUDGE_IN_PROMETHEUS_FROM,
    JUDGES,
    Settings,
    judged_in_prometheus,
)
from vtop.core.ingest.open_feed import scrape_options
from vtop.core.ingest.sources.prometheus import PrometheusError, Reader, known_servers
from vtop.core.ingest.sources.prometheus_judged import judged_reader
from vtop.core.rules.judge import FleetJudge
from vtop.core.rules.rule import Rule

JUDGED_INTERVAL_S = 5.0
"""The shortest tick judged in Prometheus: its data changes no faster than its scrape interval
(15 s is common), and a thousand servers' conditions take it about 1.7 s of CPU a tick."""


def resolved(settings: Settings) -> Settings:
    """The settings with `prometheus_judge` decided (`auto` by the fleet's size: a Prometheus
    that cannot be asked leaves vtop judging, and the feed reports the failure); judged in
    Prometheus, a tick of at least JUDGED_INTERVAL_S."""
    if settings.prometheus is None or settings.prometheus_alerts:
        return dataclasses.replace(settings, prometheus_judge="vtop")
    servers = 0
    if settings.prometheus_judge == "auto":
        try:
            options = scrape_options(settings)
            servers = asyncio.run(known_servers(settings.prometheus, options, time.time()))
        except PrometheusError:
            servers = 0
    if not judged_in_prometheus(settings, servers):
        return dataclasses.replace(settings, prometheus_judge="vtop")
    interval = max(settings.interval_s, JUDGED_INTERVAL_S)
    return dataclasses.replace(settings, prometheus_judge="prometheus", interval_s=interval)


def prometheus_reader(settings: Settings, rules: list[Rule]) -> Reader | None:
    """The feed's read of Prometheus when the (resolved) settings judge there, else None."""
    if not settings.findings_from_prometheus or settings.prometheus_alerts:
        return None
    return judged_reader(FleetJudge(rules, settings.interval_s), settings.interval_s)


def add_judge_option(parser: argparse.ArgumentParser) -> None:
    """`--judge auto|vtop|prometheus`."""
    parser.add_argument(
        "--judge",
        choices=JUDGES,
        help="--prometheus: who evaluates the rules: vtop on every raw series, or Prometheus "
        f"for the whole fleet at once (auto: Prometheus from {JUDGE_IN_PROMETHEUS_FROM} servers)",
    )
