"""Plain-text monitoring: feed -> session -> one line per target per frame (pipes, logs, SSH).

Each line carries the headline figures and the primary finding with its first flag change, so
`vtop --plain | tee incident.log` keeps the answer, not only the numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.frame import Frame
from vtop.core.ingest.feeds import Feed, sample
from vtop.core.rules.engine import Triage
from vtop.core.rules.rule import Rule
from vtop.core.session.facts import target_detail, target_facts
from vtop.core.session.session import Session, short_key, watching_session
from vtop.core.store.summary import format_summary


def describe_frame(session: Session, frame: Frame) -> list[str]:
    """Lines describing each target in a frame (after the session ingested it)."""
    lines = []
    for scrape in frame.scrapes:
        if scrape.ok:
            now, window = frame.timestamp, session.options.window_s
            facts = target_facts(session, session.targets[scrape.target], now)
            text = format_summary(facts.summary) if facts.summary is not None else "no figures"
            if scrape.parse_errors:
                text += f" ({len(scrape.parse_errors)} bad lines: {scrape.parse_errors[0]})"
            text += primary_text(facts.triage)
            seen = target_detail(session, facts, now, window).unjudged
            text += f" | NOT OK, not judged yet: {seen}" if seen else ""
        else:
            text = f"{scrape.status.value}: {scrape.error}"
        lines.append(f"{scrape.target} {text}")
    return lines


def primary_text(triage: Triage | None) -> str:
    """` | CRITICAL M1 preemption storm: --max-num-seqs 1`, or nothing when all is well."""
    primary = triage.primary if triage is not None else None
    if primary is None or primary.rule.severity == "info":
        return ""
    flags = [change.as_flag() for change in primary.changes if change.as_flag()]
    action = f": {flags[0]}" if flags else ""
    return f" | {primary.rule.severity.upper()} {short_key(primary)} {primary.rule.title}{action}"


async def run_plain(
    feed: Feed,
    rules: list[Rule],
    options: DiagnoseOptions,
    ticks: int | None = None,
    emit: Callable[[str], None] = print,
    servers: int = 1,
) -> int:
    """Lines for every frame until `ticks` frames (forever when None); exit code 0 when every
    target's last scrape succeeded, else 3. Several `servers` share the dashboard's rule
    budget."""
    session = watching_session(rules, options, servers)
    try:
        async for frame in sample(feed, count=ticks):
            session.ingest(frame)
            stamp = time.strftime("%H:%M:%S", time.localtime(frame.timestamp))
            for line in describe_frame(session, frame):
                emit(f"{stamp} {line}")
    finally:
        await feed.close()
    answered = [t.last_scrape is not None and t.last_scrape.ok for t in session.targets.values()]
    return 0 if answered and all(answered) else 3
