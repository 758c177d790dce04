"""Apply -> verify -> roll back: baseline under load, restart with the change, measure, decide."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from vtop.core.bench import Bench, BenchConfig, BenchReport
from vtop.core.diagnose import DiagnoseOptions, Diagnosis, diagnose_frames
from vtop.core.engine import Finding, ProposedChange
from vtop.core.frame import Frame
from vtop.core.poller import poll
from vtop.core.process import ServerState, foreign_listener, is_alive, read_log, reap, restart
from vtop.core.rules import Rule
from vtop.core.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.startup_failures import explain_failure
from vtop.core.store import Store
from vtop.core.tuning import Measurement, Verdict, apply_change, argv_diff, audit, judge, measure


@dataclass(frozen=True)
class TuneOptions:
    """How to measure and when to roll back."""

    rules: list[Rule]
    directory: Path
    load: Callable[[str], BenchConfig]
    window_s: float = 30.0
    finding_id: str | None = None
    rollback: bool = True
    ready_timeout_s: float = 900.0
    warmup: Callable[[str], BenchConfig] | None = None
    """A short load run after each restart, before measuring (first requests are slow)."""


@dataclass
class TuneResult:
    """What happened, for the report and the exit code."""

    state: ServerState
    finding: Finding | None = None
    change: ProposedChange | None = None
    diff: tuple[str, ...] = ()
    before: Measurement | None = None
    after: Measurement | None = None
    verdict: Verdict | None = None
    rolled_back: bool = False
    problem: str = ""


async def measure_window(url: str, load: BenchConfig) -> tuple[list[Frame], BenchReport]:
    """Run the load and scrape once a second while it runs."""
    source = VllmHttpSource(url, ScrapeOptions(timeout_s=10))
    task = asyncio.ensure_future(Bench(load).run())
    frames: list[Frame] = []
    try:
        while not task.done():
            frames.append(await poll([source], None, time.time()))
            await asyncio.sleep(1.0)
        frames.append(await poll([source], None, time.time()))
    finally:
        await source.close()
    return frames, task.result()


def measurement(frames: list[Frame], report: BenchReport) -> Measurement:
    """The judged figures over the whole window."""
    store = Store()
    for frame in frames:
        store.ingest(frame)
    target = frames[0].scrapes[0].target
    window = frames[-1].timestamp - frames[0].timestamp
    return measure(store, target, frames[-1].timestamp, window, report.failed)


async def wait_ready(state: ServerState, timeout: float) -> str | None:
    """None when /health answers; else why not (the process died, or time ran out)."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2) as client:
        while time.monotonic() < deadline:
            reap()
            if not is_alive(state):
                log, _ = read_log(state)
                failure = explain_failure(log)
                return failure.explanation if failure else "vLLM exited during startup"
            try:
                healthy = (await client.get(state.url + "/health")).status_code == 200
            except httpx.HTTPError:
                healthy = False
            if healthy:
                impostor = foreign_listener(state)
                if impostor is None:
                    return None
                return (
                    f"port {state.port} is answered by pid {impostor}, not by the server vtop "
                    "started: stop that process or choose another --port"
                )
            await asyncio.sleep(1.0)
    return f"not ready after {timeout:.0f} s"


async def settle(state: ServerState, options: TuneOptions) -> None:
    """Run the warm-up load, if any."""
    if options.warmup is not None:
        await Bench(options.warmup(state.url)).run()


def pick(diagnosis: Diagnosis, finding_id: str | None) -> tuple[Finding, ProposedChange] | None:
    """The finding to act on (the primary by default) and its first computable change."""
    if diagnosis.triage is None:
        return None
    findings = [f for f in diagnosis.triage.findings if finding_id in (None, f.rule.id)]
    for finding in findings:
        for change in finding.changes:
            if change.as_flag() is not None:
                return finding, change
    return None


async def tune(state: ServerState, options: TuneOptions) -> TuneResult:
    """Baseline, apply, verify, and roll back when the change did not help."""
    result = TuneResult(state)
    frames, report = await measure_window(state.url, options.load(state.url))
    log, _ = read_log(state)
    diagnose = DiagnoseOptions(vllm_args=" ".join(state.argv), vllm_log=log)
    chosen = pick(diagnose_frames(state.url, frames, options.rules, diagnose), options.finding_id)
    if chosen is None:
        result.problem = f"no finding {options.finding_id or ''} with a computable change".strip()
        return result
    result.finding, result.change = chosen
    result.before = measurement(frames, report)
    new_argv = apply_change(state.argv, result.change)
    result.diff = tuple(argv_diff(state.argv, new_argv))
    audit(
        options.directory,
        "apply",
        server=state.name,
        finding=result.finding.key,
        diff=result.diff,
        before=result.before,
    )
    return await verify(result, state, new_argv, options)


async def verify(
    result: TuneResult, old: ServerState, new_argv: list[str], options: TuneOptions
) -> TuneResult:
    """Restart with new_argv, measure the same load, keep it or roll back to old's argv."""
    assert result.finding is not None and result.before is not None
    result.state = restart(old, new_argv, options.directory)
    problem = await wait_ready(result.state, options.ready_timeout_s)
    if problem is None:
        await settle(result.state, options)
        frames, report = await measure_window(result.state.url, options.load(result.state.url))
        result.after = measurement(frames, report)
        result.verdict = judge(result.finding, result.before, result.after)
    else:
        result.problem = f"the server did not start with the change: {problem}"
    audit(
        options.directory,
        "verify",
        server=old.name,
        after=result.after,
        verdict=result.verdict,
        problem=result.problem,
    )
    if options.rollback and (result.verdict is None or not result.verdict.improved):
        result.state = restart(result.state, list(old.argv), options.directory)
        result.rolled_back = True
        rollback_problem = await wait_ready(result.state, options.ready_timeout_s)
        audit(
            options.directory, "rollback", server=old.name, argv=old.argv, problem=rollback_problem
        )
    return result
