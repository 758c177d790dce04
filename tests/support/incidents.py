"""Real incidents on a real vLLM: a load that provokes the mechanism, measured before judged.

A scenario names its precondition (requests waiting through the window, running held at the
cap, steps at the budget, the pool full). The load runs in its own process (`vtop bench`), so
neither the watcher nor the diagnosis can starve it; the watcher scrapes with vtop's own source.
If a recorded window does not show the precondition, the load grows (more clients, longer
prompts) and is tried again (the same load where the server answered too few scrapes to judge);
if it never holds, the test fails with the figures measured, not with a wrong verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.support.scenarios import ADMISSION_LIMITED, LIGHT, SEQ_LIMITED, SMALL_BUDGET, STORM
from tests.support.vllm_harness.server import ROOT, ServerSpec, VllmServer
from vtop.core.config.inference import EngineWindow, engine_windows
from vtop.core.config.server_config import ServerConfig
from vtop.core.frame import Frame
from vtop.core.ingest.poller import poll
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.rules.loader import load_rules
from vtop.core.rules.rule import Rule
from vtop.core.session.diagnose import DiagnoseOptions, Diagnosis, diagnose_frames
from vtop.core.session.window_session import judged_window
from vtop.core.store.store import Store
from vtop.core.whatif.calibrate import measure as model_measure
from vtop.core.whatif.calibrate import measured_figures
from vtop.core.whatif.predict import Calibration, calibrate, remember_steps, whatif
from vtop.core.whatif.profile import StepProfiles

WINDOW_S = 15.0
"""The diagnosis window (vtop diagnose's default)."""
SETTLE_S = 5.0
"""Load runs this long before the precondition is measured (first steps compile shapes)."""
ATTEMPTS = 3
SETTLED_SCRAPES = 3
"""Scrapes in a row answered promptly that show the server has come through its first steps
(the CPU build compiles each new batch shape, and a starved API server answers late)."""
PROMPT_S = 2.0
"""A scrape answered within this is prompt."""
SETTLE_MAX_S = 45.0
"""How long the load may take to settle before the windows are recorded anyway."""
LASTING_S = 6.0
"""The rules' `for:` (5 s) plus a scrape: an incident that begins later than this before the
window's end has not held long enough for a rule to fire, so the window does not show it."""


@dataclass(frozen=True)
class Load:
    """A closed-loop load for `vtop bench`."""

    clients: int
    prompt: int
    output: int
    stream: bool = False
    shared_prefix: int = 0
    output_max: int = 0
    """Output lengths drawn from output..output_max (clients then finish out of step)."""
    model: str = ""
    """The model (or LoRA adapter) requests name (default: the server's first)."""

    def argv(self, url: str, duration_s: float) -> list[str]:
        """The `vtop bench` command line."""
        words = [sys.executable, "-m", "vtop", "bench", url, "-c", str(self.clients)]
        output = f"{self.output}:{self.output_max}" if self.output_max else str(self.output)
        words += ["--prompt-tokens", str(self.prompt), "--output-tokens", output]
        words += ["-n", "1000000", "-d", f"{duration_s:.0f}", "--stall-timeout", "180"]
        words += ["--stream" if self.stream else "--no-stream", "--json"]
        if self.shared_prefix:
            words += ["--shared-prefix", str(self.shared_prefix)]
        if self.model:
            words += ["--model", self.model]
        return words


Check = Callable[[EngineWindow, ServerSpec], str | None]
"""None when the precondition holds, else what was measured instead."""


@dataclass(frozen=True)
class Incident:
    """A server configuration, the load that provokes it, and how to tell that it did."""

    name: str
    spec: ServerSpec
    load: Load
    precondition: Check
    grow: Callable[[Load, ServerSpec], Load] = lambda load, _: load


@dataclass
class Recorded:
    """Frames of the windows judged, the load that made them, and what was measured."""

    incident: Incident
    load: Load
    windows: list[list[Frame]]
    measured: list[str] = field(default_factory=list)


class LoadProcess:
    """`vtop bench` in its own process group, always stopped."""

    def __init__(self, load: Load, url: str, duration_s: float) -> None:
        self.process = subprocess.Popen(
            load.argv(url, duration_s),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            cwd=ROOT,
        )

    def stop(self) -> None:
        """SIGTERM then SIGKILL its group (by pgid, never by name)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()

    def report(self, timeout_s: float) -> dict[str, object]:
        """The JSON report of a load that ran to its end."""
        out, err = self.process.communicate(timeout=timeout_s)
        assert self.process.returncode == 0, err.decode(errors="replace")[-2000:]
        report = json.loads(out)
        assert isinstance(report, dict)
        return report


async def watch(url: str, seconds: float, interval: float = 1.0) -> list[Frame]:
    """Frames of vtop's own source for `seconds` (as `vtop diagnose` samples)."""
    source = VllmHttpSource(url, ScrapeOptions(timeout_s=10))
    frames: list[Frame] = []
    started = time.time()
    try:
        while not frames or time.time() - started < seconds:
            frames.append(await poll([source], None, time.time()))
            await asyncio.sleep(interval)
    finally:
        await source.close()
    return frames


async def settle(url: str) -> None:
    """Let the load run SETTLE_S, and on until the last SETTLED_SCRAPES scrapes answered within
    PROMPT_S each (at most SETTLE_MAX_S in all)."""
    started = time.time()
    source = VllmHttpSource(url, ScrapeOptions(timeout_s=10))
    prompt = 0
    try:
        while time.time() - started < SETTLE_MAX_S:
            asked = time.time()
            frame = await poll([source], None, asked)
            answered_in = time.time() - asked
            prompt = prompt + 1 if frame.scrapes[0].ok and answered_in < PROMPT_S else 0
            if prompt >= SETTLED_SCRAPES and time.time() - started >= SETTLE_S:
                return
            await asyncio.sleep(max(0.0, 1.0 - answered_in))
    finally:
        await source.close()


async def diagnose_live(url: str, rules: list[Rule], options: DiagnoseOptions) -> Diagnosis:
    """`vtop diagnose URL` as a function: a window of vtop's own source, then the triage."""
    frames = await watch(url, options.window_s, options.interval_s)
    return diagnose_frames(frames[-1].scrapes[0].target, frames, rules, options)


def measure(frames: list[Frame]) -> EngineWindow:
    """The scheduler evidence of the (single-engine) server over the frames."""
    store = Store()
    for frame in frames:
        store.ingest(frame)
    target = frames[-1].scrapes[0].target
    span = frames[-1].timestamp - frames[0].timestamp + 1
    windows = engine_windows(store, target, frames[-1].timestamp, span)
    assert len(windows) == 1, f"expected one engine, measured {windows}"
    return windows[0]


JUDGED_SCRAPES = 8
"""Answered scrapes of a 15 s window at 1 s that make it worth judging (a server still compiling
its first batch shapes, or starved by its load, answers a third of them)."""


def lost_precondition(incident: Incident, recorded: list[list[Frame]]) -> str | None:
    """Why a recorded window does not show the incident, or None when all do."""
    for frames in recorded:
        again = measure(frames)
        if again.scrapes < JUDGED_SCRAPES:
            return f"only {again.scrapes} scrapes answered; {figures(again)}"
        lost = incident.precondition(again, incident.spec)
        if lost is not None:
            return f"{lost}; {figures(again)}"
        early = [f for f in frames if f.timestamp <= frames[-1].timestamp - LASTING_S]
        lost = (
            "no scrape before"
            if len(early) < 2
            else incident.precondition(measure(early), incident.spec)
        )
        if lost is not None:
            return f"held only in the last {LASTING_S:.0f} s (before: {lost}); {figures(again)}"
    return None


def answered(recorded: list[list[Frame]]) -> bool:
    """The server answered enough scrapes of every window to judge it (a machine too busy to
    answer is tried again with the same load: a larger one would only starve it more)."""
    return all(measure(frames).scrapes >= JUDGED_SCRAPES for frames in recorded)


def figures(window: EngineWindow) -> str:
    """What a precondition failure prints."""
    return ", ".join(f"{f.name}={getattr(window, f.name)!r}" for f in dataclasses.fields(window))


async def provoke(server: VllmServer, incident: Incident, windows: int = 1) -> Recorded:
    """Run the load, record `windows` diagnosis windows, and keep them if each shows the
    precondition; else grow the load and try again (only a load that never holds fails)."""
    load, measured = incident.load, list[str]()
    for _ in range(ATTEMPTS):
        process = LoadProcess(load, server.url, SETTLE_MAX_S + windows * WINDOW_S + 15)
        try:
            await settle(server.url)
            recorded = [await watch(server.url, WINDOW_S) for _ in range(windows)]
        finally:
            process.stop()
        lost = lost_precondition(incident, recorded)
        if lost is None:
            kept = [f"{load}: holds [{figures(measure(frames))}]" for frames in recorded]
            return Recorded(incident, load, recorded, measured + kept)
        measured.append(f"{load}: {lost}")
        if answered(recorded):
            load = incident.grow(load, incident.spec)
    raise AssertionError(
        f"{incident.name}: precondition never held after {ATTEMPTS} loads:\n" + "\n".join(measured)
    )


def both_modes(server: VllmServer, frames: list[Frame], rules: list[Rule]) -> dict[str, Diagnosis]:
    """The same window diagnosed with the URL alone and with the flags and the startup log."""
    target = frames[-1].scrapes[0].target
    url_only = DiagnoseOptions(WINDOW_S, read_gpus=False)
    return {
        "url only": diagnose_frames(target, frames, rules, url_only),
        "with log": diagnose_frames(target, frames, rules, told(server)),
    }


def told(server: VllmServer) -> DiagnoseOptions:
    """Diagnose options with the server's flags and log (as an operator who has them)."""
    return DiagnoseOptions(
        WINDOW_S, vllm_args=" ".join(server.argv()), vllm_log=server.log_text(), read_gpus=False
    )


def _judged(
    server: VllmServer, frames: list[Frame], url_only: bool = False
) -> tuple[Store, str, float, float, ServerConfig]:
    """A window judged with the server's flags and log (or, `url_only`, with what the server
    reports and vtop infers, as `vtop whatif URL`): store, target, end, length, config."""
    options = DiagnoseOptions(WINDOW_S, read_gpus=False) if url_only else told(server)
    session = judged_window(frames, load_rules(), options)
    target = frames[-1].scrapes[0].target
    now, window = frames[-1].timestamp, frames[-1].timestamp - frames[0].timestamp
    return session.store, target, now, window, session.target(target).config


def calibrated(
    server: VllmServer,
    frames: list[Frame],
    profiles: StepProfiles | None = None,
    url_only: bool = False,
) -> Calibration:
    """The scheduler model calibrated on a recorded window (CannotModelError when it cannot),
    with and into the step profiles when given; `url_only` as `vtop whatif URL` knows it."""
    return calibrate(*_judged(server, frames, url_only), profiles=profiles)


def predicted(
    server: VllmServer, frames: list[Frame], changes: dict[str, float]
) -> dict[str, float | None] | None:
    """What `vtop whatif` predicts for the changes on a recorded window (None: it refuses)."""
    return whatif(*_judged(server, frames), changes).predicted


def remembered(server: VllmServer, frames: list[Frame], profiles: StepProfiles) -> None:
    """A window's step times kept in the profiles, as `vtop tune` keeps its after-window's."""
    remember_steps(profiles, *_judged(server, frames))


def window_figures(server: VllmServer, frames: list[Frame]) -> dict[str, float | None]:
    """A window's figures as the model's calibration measures them."""
    store, target, now, window, _ = _judged(server, frames)
    return measured_figures(model_measure(store, target, now, window))


def queue(window: EngineWindow) -> str | None:
    """Requests wait through the window (average of the gauge or Little's law)."""
    return None if window.waiting >= 2 else f"only {window.waiting:.2f} waiting on average"


def at_sequence_cap(window: EngineWindow, spec: ServerSpec) -> str | None:
    """A queue while running sits at max-num-seqs (by Little's law) with KV free."""
    little = window.running_little or 0.0
    if little < 0.9 * spec.max_num_seqs:
        return f"running {little:.2f} on average of max-num-seqs {spec.max_num_seqs}"
    return queue(window) or (None if window.kv_peak < 0.5 else f"KV up to {window.kv_peak:.0%}")


def at_token_budget(window: EngineWindow, spec: ServerSpec) -> str | None:
    """A queue while steps carry the budget."""
    budget = spec.max_num_batched_tokens or 0
    tokens = window.tokens_per_step or 0.0
    if tokens < 0.75 * budget:
        return f"steps carried {tokens:.0f} of a {budget}-token budget"
    return queue(window)


STORM_PREEMPTIONS_PER_REQUEST = 0.5
"""Preemptions for every two requests finished make a storm: the mechanism's own measure (M1
fires from 1%), whatever the host's speed. A rate per second does not carry across hosts: the
same load on the same server preempted 2.2/s when the demo was recorded and 0.6/s on a slower
day, with 9 preemptions for about 5 requests finished."""
STORM_PREEMPTIONS_MIN = 4
"""And at least this many in the window (a few while the load winds down do not make one)."""


def pool_full(window: EngineWindow, spec: ServerSpec) -> str | None:
    """A storm: requests wait while the full pool preempts again and again."""
    finished = window.finished or 0.0
    per_request = window.preemptions / finished if finished > 0 else math.inf
    if window.preemptions < STORM_PREEMPTIONS_MIN or per_request < STORM_PREEMPTIONS_PER_REQUEST:
        return (
            f"{window.preemptions:.0f} preemptions for {finished:.0f} requests finished in "
            f"{window.span_s:.1f} s (KV up to {window.kv_peak:.0%})"
        )
    return queue(window)


def no_queue(window: EngineWindow, spec: ServerSpec) -> str | None:
    """Traffic flows and nothing waits."""
    if window.generated <= 0:
        return "no token generated"
    return None if window.waiting < 0.5 else f"{window.waiting:.2f} waiting on average"


def traffic(window: EngineWindow, spec: ServerSpec) -> str | None:
    """Tokens are generated."""
    return None if window.generated > 0 else "no token generated"


def longer_prompts(load: Load, spec: ServerSpec) -> Load:
    """Prompts as long as the context allows, half as many clients again: each request holds
    the budget for more steps, and the API server has fewer requests to pass per step (on a
    starved machine more clients only slow it)."""
    room = spec.max_model_len - load.output - 8
    return dataclasses.replace(load, clients=min(load.clients * 3 // 2, 24), prompt=room)


def more_clients(load: Load, spec: ServerSpec) -> Load:
    """Twice the clients, prompts half as long again (within the context)."""
    room = spec.max_model_len - load.output - 8
    return dataclasses.replace(
        load, clients=min(2 * load.clients, 96), prompt=min(int(load.prompt * 1.5), room)
    )


BUDGET = Incident(
    "token budget 64", SMALL_BUDGET, Load(12, 800, 8), at_token_budget, longer_prompts
)
SEQ_CAP = Incident("max-num-seqs 2", SEQ_LIMITED, Load(16, 256, 32), at_sequence_cap, more_clients)
NO_CACHE = Incident(
    "prefix caching off", SMALL_BUDGET, Load(2, 160, 16, shared_prefix=128), traffic
)
ADMISSION = Incident("admission limit 4", ADMISSION_LIMITED, Load(16, 64, 64), traffic)
"""Four times the requests the server admits: the rest are answered 503."""
HEALTHY = Incident("healthy light load", LIGHT, Load(2, 32, 32), no_queue)
SHORT_PREFIX = Incident(
    "shared prefix < 1 block", STORM, Load(2, 128, 16, shared_prefix=96), traffic
)
OVER_ADMITTED = Incident(
    "preemption storm", STORM, Load(24, 96, 300, stream=True), pool_full, more_clients
)


INCIDENTS = (
    (HEALTHY, "no warning"),
    (OVER_ADMITTED, "M1, lower --max-num-seqs"),
    (SHORT_PREFIX, "K1-block, no 'enable caching'"),
    (SEQ_CAP, "Q2, raise it"),
    (NO_CACHE, "K1-off, enable it"),
    (BUDGET, "Q3, raise --max-num-batched-tokens"),
)
"""Every incident with what a right diagnosis says (benchmarks/compare_doctor.py)."""
