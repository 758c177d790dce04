"""Acting on the managed server from the dashboard: bundle, apply -> verify -> roll back, restart.

The apply flow measures the server's own traffic: the baseline is the window before the change,
the result the same length of time after the restarted server is ready.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

from vtop.core.bundle import BundleContents, write_bundle
from vtop.core.engine import Finding, ProposedChange
from vtop.core.feeds import LiveFeed
from vtop.core.frame import Frame
from vtop.core.process import ServerState, restart, state_dir
from vtop.core.tuner import wait_ready
from vtop.core.tuning import (
    Measurement,
    apply_change,
    argv_diff,
    audit,
    comparison_lines,
    judge,
    measure,
)
from vtop.report import json_report
from vtop.ui.explain import current_diagnosis
from vtop.ui.screens.confirm import ConfirmScreen
from vtop.ui.screens.text_screen import TextScreen
from vtop.ui.widgets.findings import FindingsPanel

if TYPE_CHECKING:
    from vtop.ui.app import VtopApp

DRAIN_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 900.0


def bundle(app: VtopApp) -> None:
    """Write an incident bundle of the recent frames (in a thread: it compresses)."""
    view = app.view
    if view is None:
        app.notify("no data to bundle yet", timeout=2)
        return
    events = [f"{m.kind}: {m.text}" for m in app.session.marks if m.target == view.target]
    diagnosis = current_diagnosis(view, app.settings.window_s, events)
    contents = BundleContents(
        json_report(diagnosis),
        tuple(app.session.startup_log),
        app.settings.vllm_args,
        view.config.facts.version,
    )
    path = Path(app.settings.bundle_dir) / time.strftime("vtop-bundle-%Y%m%d-%H%M%S.tar.gz")
    frames = list(app.session.recent_frames)
    app.run_worker(lambda: _write(app, path, frames, contents), thread=True)


def _write(app: VtopApp, path: Path, frames: list[Frame], contents: BundleContents) -> None:
    """Thread worker: write the bundle, then say where it is."""
    write_bundle(path, frames, contents)
    app.call_from_thread(app.notify, f"bundle written: {path}", timeout=8)


def managed_server(app: VtopApp) -> ServerState | None:
    """The server vtop may act on, or None with the reason shown."""
    if app.server is None:
        app.notify("vtop did not start this server (use `vtop serve`): nothing to apply", timeout=4)
        return None
    if app.readonly:
        app.notify("read-only: actions are disabled", timeout=3)
        return None
    return app.server


def chosen_change(app: VtopApp) -> tuple[Finding, ProposedChange] | None:
    """The highlighted finding and its first change with a computable value."""
    finding = app.query_one(FindingsPanel).selected
    changes = [c for c in finding.changes if c.as_flag() is not None] if finding else []
    if finding is None or not changes:
        app.notify("no finding with a computable flag change is highlighted", timeout=3)
        return None
    return finding, changes[0]


async def apply(app: VtopApp) -> None:
    """Show the argv diff, and on confirmation: baseline, drain, restart, measure, decide."""
    server, chosen = managed_server(app), chosen_change(app)
    if server is None or chosen is None:
        return
    finding, change = chosen
    new_argv = apply_change(server.argv, change)
    diff = argv_diff(server.argv, new_argv)
    question = "\n".join([*diff, "", f"why: {change.why}", f"expected: {change.effect}"])
    if not await app.push_screen_wait(ConfirmScreen(f"apply {finding.rule.id}?", question)):
        return
    before = _measure_now(app)
    audit(state_dir(), "apply", server=server.name, finding=finding.key, diff=diff, before=before)
    await _drain(app)
    new_state = await _switch(app, server, new_argv)
    problem = await wait_ready(new_state, READY_TIMEOUT_S)
    after = None if problem else await _measure_after(app)
    verdict = judge(finding, before, after) if after is not None else None
    kept = verdict is not None and verdict.improved
    audit(state_dir(), "verify", server=server.name, after=after, verdict=verdict, problem=problem)
    if not kept:
        await _switch(app, new_state, list(server.argv))
        audit(state_dir(), "rollback", server=server.name, argv=server.argv)
    _show_result(app, diff, before, after, verdict.reason if verdict else problem or "", kept)


def _measure_now(app: VtopApp) -> Measurement:
    """The last window of the session."""
    view, now = app.view, app.session.now or time.time()
    target = view.target if view is not None else ""
    return measure(app.session.store, target, now, app.settings.window_s)


async def _measure_after(app: VtopApp) -> Measurement:
    """Let one window of traffic pass on the restarted server, then measure it."""
    await asyncio.sleep(app.settings.window_s + app.interval)
    return _measure_now(app)


async def _drain(app: VtopApp) -> None:
    """Wait until nothing is running (or the drain timeout passes)."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        view = app.view
        summary = view.summary if view is not None else None
        if summary is None or not summary.running:
            return
        await asyncio.sleep(app.interval)


async def _switch(app: VtopApp, old: ServerState, argv: list[str]) -> ServerState:
    """Restart with argv (stopping takes up to 30 s: in a thread) and follow the new process."""
    app.notify("restarting vLLM: " + " ".join(argv_diff(old.argv, argv)), timeout=5)
    new_state = await asyncio.to_thread(restart, old, argv, state_dir())
    app.server = new_state
    if isinstance(app.feed, LiveFeed):
        app.feed.follow(new_state)
    app.vllm_pids = frozenset({new_state.pid})
    return new_state


def _show_result(
    app: VtopApp,
    diff: list[str],
    before: Measurement,
    after: Measurement | None,
    reason: str,
    kept: bool,
) -> None:
    """Before/after side by side and what vtop did."""
    lines = [*diff, ""]
    lines += comparison_lines(before, after) if after is not None else ["no measurement after"]
    lines += ["", reason, "change kept" if kept else "rolled back to the previous flags"]
    app.push_screen(TextScreen("apply: before / after", "\n".join(lines)))


async def restart_same(app: VtopApp) -> None:
    """Restart with the same flags, after confirmation."""
    server = managed_server(app)
    if server is None:
        return
    if not await app.push_screen_wait(ConfirmScreen("restart vLLM?", " ".join(server.argv))):
        return
    audit(state_dir(), "restart", server=server.name, argv=server.argv)
    new_state = await _switch(app, server, list(server.argv))
    problem = await wait_ready(new_state, READY_TIMEOUT_S)
    app.notify(problem or "vLLM is ready again", timeout=5)
