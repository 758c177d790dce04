"""`vtop tune`: the apply flow with generated traffic: a load before, the same load after."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from vtop.core.config.server_config import ServerConfig
from vtop.core.config.settings import Settings
from vtop.core.frame import Frame
from vtop.core.ingest.feeds import sample
from vtop.core.ingest.open_feed import open_feed
from vtop.core.manage.apply import Applied, apply_and_verify
from vtop.core.manage.bench import Bench, BenchConfig
from vtop.core.manage.bench_report import BenchReport
from vtop.core.manage.verdict import Measurement, measure
from vtop.core.managed_server import ManagedServer, read_log
from vtop.core.rules.engine import Finding, ProposedChange
from vtop.core.rules.rule import Rule
from vtop.core.session.diagnose import DiagnoseOptions, Diagnosis, judged_diagnosis
from vtop.core.session.window_session import judged_window
from vtop.core.whatif.predict import predict_change, remember_steps
from vtop.core.whatif.profile import StepProfiles


@dataclass(frozen=True)
class TuneOptions:
    """The load that measures, and whether to roll back."""

    rules: list[Rule]
    directory: Path
    load: Callable[[str], BenchConfig]
    settings: Settings = field(default_factory=Settings)
    """How to reach the server (its deadline, interval, key and TLS): the command's settings."""
    finding_id: str | None = None
    rollback: bool = True
    warmup: Callable[[str], BenchConfig] | None = None
    """A short load run after each restart, before measuring (first requests are slow)."""
    profiles: StepProfiles | None = None
    """Where the model keeps the step times it has seen (None: nowhere)."""


async def measure_window(
    state: ManagedServer, load: BenchConfig, settings: Settings
) -> tuple[list[Frame], BenchReport]:
    """Run the load and read the server's live feed while it runs (and once after)."""
    feed = open_feed(settings, gpus=False, server=state)
    task = asyncio.ensure_future(Bench(load).run())
    frames: list[Frame] = []
    try:
        async with contextlib.aclosing(sample(feed)) as frames_of:
            async for frame in frames_of:
                frames.append(frame)
                if task.done():
                    break
        frames += await feed.frames(time.time())
    finally:
        await feed.close()
    return frames, task.result()


def measurement(
    frames: list[Frame],
    report: BenchReport,
    options: TuneOptions,
    server: ServerConfig | None = None,
) -> Measurement:
    """The judged figures over the whole window (its step times kept in the profiles)."""
    store = judged_window(frames, options.rules, DiagnoseOptions(read_gpus=False)).store
    profiles = options.profiles
    target = frames[0].scrapes[0].target
    now = frames[-1].timestamp
    window = now - frames[0].timestamp
    if profiles is not None and window > 0:
        remember_steps(profiles, store, target, now, window, server or ServerConfig())
    return measure(store, target, now, window, report.failed)


@dataclass(frozen=True)
class NotApplied:
    """Why a tune changed nothing, with the baseline it judged (a user reruns with more load,
    a longer window or a named finding on these figures)."""

    reason: str
    before: Measurement
    window_s: float


def why_nothing(diagnosis: Diagnosis, finding_id: str | None) -> str:
    """What the baseline's triage held: its verdict, the findings acted on that carry no
    computable change, and the rules still pending their `for:` (a longer load shows them)."""
    named = f" {finding_id}" if finding_id else ""
    parts = [f"no finding{named} with a computable change (verdict {diagnosis.verdict}"]
    triage = diagnosis.triage
    if triage is None:
        return f"{parts[0]}: {diagnosis.reason or 'no triage'})"
    without = [f.rule.id for f in triage.findings if _acted_on(f, finding_id)]
    if without:
        parts.append(f"{', '.join(without)} without a flag to change")
    for held in triage.pending:
        parts.append(
            f"{held.rule.id} pending: held {held.held_s:.0f} s of its {held.rule.for_s:.0f} s"
            " (a longer load may show it)"
        )
    return "; ".join(parts) + ")"


def pick(diagnosis: Diagnosis, finding_id: str | None) -> tuple[Finding, ProposedChange] | None:
    """The finding to act on (the primary by default) and its first computable change. By
    default only findings that call for action (warning, critical) are acted on: an info
    finding's change is applied only when it is named."""
    if diagnosis.triage is None:
        return None
    findings = [f for f in diagnosis.triage.findings if _acted_on(f, finding_id)]
    for finding in findings:
        for change in finding.changes:
            if change.argument() is not None:
                return finding, change
    return None


def _acted_on(finding: Finding, finding_id: str | None) -> bool:
    """The named finding, or by default any that calls for action."""
    if finding_id is not None:
        return finding.rule.id == finding_id
    return finding.rule.severity != "info"


async def tune(state: ManagedServer, options: TuneOptions) -> Applied | NotApplied:
    """Baseline under the load, then the apply flow measured by the same load (or why nothing
    was applied, with the baseline's figures)."""
    frames, report = await measure_window(state, options.load(state.url), options.settings)
    log, _ = read_log(state)
    settings = dataclasses.replace(options.settings, vllm_args=" ".join(state.argv))
    told = DiagnoseOptions.from_settings(settings, log, read_gpus=False)
    diagnosis, session = judged_diagnosis(state.url, frames, options.rules, told)
    chosen = pick(diagnosis, options.finding_id)
    before = measurement(frames, report, dataclasses.replace(options, profiles=None))
    if chosen is None:
        return NotApplied(why_nothing(diagnosis, options.finding_id), before, diagnosis.window_s)

    async def after(new_state: ManagedServer) -> Measurement:
        if options.warmup is not None:
            await Bench(options.warmup(new_state.url)).run()
        load = options.load(new_state.url)
        frames, report = await measure_window(new_state, load, options.settings)
        return measurement(frames, report, options, config)

    finding, change = chosen
    config = session.targets[state.url].config if state.url in session.targets else None
    predicted = None
    if config is not None and session.now is not None:
        window = diagnosis.window_s
        predicted = predict_change(
            session.store, state.url, session.now, window, config, change, options.profiles
        )
    return await apply_and_verify(
        state,
        finding,
        change,
        before,
        after,
        options.directory,
        rollback=options.rollback,
        predicted=predicted,
    )
