"""The one apply -> verify -> roll back: restart with a finding's change, measure, keep or undo.

It is parameterised by how traffic is measured after the change (`vtop tune` generates a load,
the dashboard's `a` watches the server's own traffic) and by what is told along the way (the
dashboard shows the "applied" / "rollback" marks on its charts). The rollback sits in a
`finally`, so no error leaves a server on half-applied flags; every restart runs in a thread
(stopping a server waits for it) and is followed by a wait for readiness.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from vtop.core.config.startup_failures import explain_failure
from vtop.core.frame import Event, EventKind
from vtop.core.manage.audit import audit
from vtop.core.manage.flag_edits import apply_change, argv_diff
from vtop.core.manage.process import ProcessError, foreign_listener, restart
from vtop.core.manage.verdict import Measurement, Verdict, judge
from vtop.core.managed_server import ManagedServer, is_alive, read_log, reap
from vtop.core.rules.engine import Finding, ProposedChange
from vtop.core.whatif.predict import ChangePrediction

READY_TIMEOUT_S = 900.0

MeasureAfter = Callable[[ManagedServer], Awaitable[Measurement]]
"""The traffic after the restart, measured on the restarted server."""
Tell = Callable[[Event], None]
"""Where the "applied" and "rollback" events go (a feed's next frame, a report)."""
Followed = Callable[[ManagedServer], None]
"""Called with each new server state (the dashboard's feed follows the new process)."""


@dataclass
class Applied:
    """What the flow did, for the report, the audit log and the exit code."""

    state: ManagedServer
    finding: Finding
    change: ProposedChange
    diff: tuple[str, ...]
    before: Measurement
    after: Measurement | None = None
    verdict: Verdict | None = None
    rolled_back: bool = False
    problem: str = ""
    predicted: ChangePrediction | None = None
    """What the scheduler model said the change would do (recorded next to `after`)."""

    @property
    def kept(self) -> bool:
        """True when the change stays."""
        return not self.rolled_back and self.verdict is not None and self.verdict.improved


async def wait_ready(state: ManagedServer, timeout: float) -> str | None:
    """None when the server's own /health answers; else why not (it died, another process
    answers on its port, or time ran out)."""
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


async def switch(
    state: ManagedServer, argv: list[str], directory: Path, followed: Followed
) -> ManagedServer:
    """Restart with argv in a thread, follow the new process, wait until it is ready
    (a problem is raised as ProcessError)."""
    new_state = await asyncio.to_thread(restart, state, argv, directory)
    followed(new_state)
    problem = await wait_ready(new_state, READY_TIMEOUT_S)
    if problem is not None:
        raise ProcessError(problem)
    return new_state


async def apply_and_verify(
    state: ManagedServer,
    finding: Finding,
    change: ProposedChange,
    before: Measurement,
    measure_after: MeasureAfter,
    directory: Path,
    tell: Tell = lambda _event: None,
    followed: Followed = lambda _state: None,
    rollback: bool = True,
    predicted: ChangePrediction | None = None,
) -> Applied:
    """Restart with the change, measure, judge; roll back (in a `finally`) unless it helped.
    The model's prediction, when given, is audited with the measurement, so every apply tests
    the model."""
    old_argv = list(state.argv)
    new_argv = apply_change(old_argv, change)
    diff = tuple(argv_diff(old_argv, new_argv))
    result = Applied(state, finding, change, diff, before, predicted=predicted)
    audit(
        directory,
        "apply",
        server=state.name,
        finding=finding.key,
        diff=result.diff,
        before=before,
        prediction=predicted,
    )
    tell(Event(time.time(), EventKind.APPLIED, state.url, " ".join(result.diff)))
    try:
        result.state = await switch(state, new_argv, directory, followed)
        result.after = await measure_after(result.state)
        result.verdict = judge(finding, before, result.after)
    except (ProcessError, OSError) as error:
        result.problem = f"the change could not be verified: {error}"
    finally:
        audit(
            directory,
            "verify",
            server=state.name,
            predicted=None if predicted is None else predicted.figures,
            predicted_after_restart=None if predicted is None else predicted.after_restart,
            after=result.after,
            verdict=result.verdict,
            problem=result.problem,
        )
        if rollback and not (result.verdict is not None and result.verdict.improved):
            await _roll_back(result, old_argv, directory, tell, followed)
    return result


async def _roll_back(
    result: Applied, old_argv: list[str], directory: Path, tell: Tell, followed: Followed
) -> None:
    """Back to the previous flags (and say so, even when that restart fails too)."""
    result.rolled_back = True
    tell(Event(time.time(), EventKind.ROLLBACK, result.state.url, "back to the previous flags"))
    try:
        result.state = await switch(result.state, old_argv, directory, followed)
        problem = ""
    except (ProcessError, OSError) as error:
        problem = f"the rollback restart failed: {error}"
        result.problem = "; ".join(p for p in (result.problem, problem) if p)
    audit(directory, "rollback", server=result.state.name, argv=old_argv, problem=problem)
