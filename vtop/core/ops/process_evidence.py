"""A diagnosis with what the server's own processes and log say: where the engine is (its
stacks) when a finding that collects them fires, and why it died (its log) when it does not
answer. The one place every command that diagnoses a live server gathers them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from vtop.core.forensics.classify import EngineWhereabouts
from vtop.core.forensics.last_words import last_words
from vtop.core.forensics.look import look_at
from vtop.core.forensics.processes import NotVisible
from vtop.core.managed_server import managed, read_log, state_dir
from vtop.core.rules.engine import Finding, Triage
from vtop.core.session.diagnose import NO_TRAFFIC, Diagnosis

Look = Callable[[str], EngineWhereabouts | NotVisible]


def stack_collectors(triage: Triage | None) -> list[Finding]:
    """The findings (and symptoms they explain) whose rule asks for the stacks
    (`collect: [stacks]`)."""
    if triage is None:
        return []
    findings = [*triage.findings, *(s for f in triage.findings for s in f.symptoms)]
    return [f for f in findings if "stacks" in f.rule.collect]


def collects_stacks(diagnosis: Diagnosis) -> bool:
    """Whether a finding (or a symptom it explains) asks for the stacks (`collect: [stacks]`),
    or the server looked idle: an engine stuck in the step it had just begun publishes no
    gauges after it, so its metrics read 0 running and 0 waiting while requests hang."""
    if diagnosis.triage is None:
        return diagnosis.reason == NO_TRAFFIC
    return bool(stack_collectors(diagnosis.triage))


def managed_log(url: str, directory: Path | None = None) -> str | None:
    """The log of the server vtop started on this URL's port, if it started one."""
    port = urlsplit(url).port
    for state in managed(directory or state_dir()):
        if port is not None and state.port == port:
            return read_log(state)[0]
    return None


def with_process_evidence(
    diagnosis: Diagnosis, url: str | None, log_text: str | None, look: Look = look_at
) -> Diagnosis:
    """The diagnosis of a live server (`url`) with its stacks where a finding collects them,
    and its last words (from `log_text`, else the log of the server vtop started there) where
    it did not answer to the end."""
    if url is None:
        return diagnosis
    whereabouts = look(url) if collects_stacks(diagnosis) else None
    if diagnosis.triage is None and not (
        isinstance(whereabouts, EngineWhereabouts) and whereabouts.stuck
    ):
        whereabouts = None  # an idle server's stacks say nothing worth a line
    words = None
    if diagnosis.triage is None or diagnosis.stopped_answering:
        log = log_text if log_text is not None else managed_log(url)
        words = last_words(log) if log else None
    return dataclasses.replace(diagnosis, whereabouts=whereabouts, last_words=words)
