"""The scheduler model against a real vLLM (CPU build): calibration, then prediction vs reality.

For the storm, the max-num-seqs cap, the token budget and a healthy load (the e2e incidents,
tests/support/incidents.py), the load is run and a window recorded; the model is calibrated on
it (with the server's flags and log, as `vtop diagnose` with them; and with the URL alone, as
`vtop whatif URL` knows the server: what it reports and what vtop infers) and its replay of the
current config printed next to the measurement. Where the primary finding proposes a change
the model knows, the model predicts it; then the server is restarted with that change (as
`vtop tune` does: same flags but the one changed) and the same load is measured for a window.
Prints one Markdown table per part for docs/whatif.md.

Run: python -m benchmarks.bench_whatif_real   (needs VTOP_VLLM_PYTHON or .venv-vllm; with
VTOP_BENCH_SAVE=DIR every window is also written there as a recording)
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tests.support.incidents import (
    BUDGET,
    HEALTHY,
    OVER_ADMITTED,
    SEQ_CAP,
    WINDOW_S,
    Incident,
    LoadProcess,
    both_modes,
    calibrated,
    provoke,
    remembered,
    watch,
    window_figures,
)
from tests.support.vllm_harness.server import CACHE, ServerPool, VllmServer
from vtop.core.frame import Frame
from vtop.core.ingest.recorder import RecordingWriter
from vtop.core.rules.engine import ProposedChange
from vtop.core.rules.loader import load_rules
from vtop.core.whatif.calibrate import UNBOUNDED_BUDGET, UNBOUNDED_SEQS, CannotModelError
from vtop.core.whatif.predict import FLAGS, Calibration, predict
from vtop.core.whatif.profile import StepProfiles

STEADY_S = 45.0
"""The load runs this long on the changed server before the window: the model predicts the
steady state, and a closed loop's queue takes a round of requests to fill (a storm fixed by one
sequence at a time: 24 requests of 300 tokens, about 40 s)."""
FIGURES = ("generation_tokens_per_s", "ttft_p50_s", "preemptions_per_s", "waiting", "running")
SPEC_FLAGS = ("--max-num-seqs", "--max-num-batched-tokens", "--num-gpu-blocks-override")
"""The flags a test server's spec can change."""


def proposal(server: VllmServer, frames: list[Frame]) -> ProposedChange | None:
    """The primary finding's first change the model and a test server can both make."""
    diagnosis = both_modes(server, frames, load_rules())["with log"]
    if diagnosis.triage is None or diagnosis.triage.primary is None:
        return None
    return next(
        (
            c
            for c in diagnosis.triage.primary.changes
            if c.flag in FLAGS and c.flag in SPEC_FLAGS and isinstance(c.proposed, float)
        ),
        None,
    )


def cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def row(name: str, figures: Mapping[str, Mapping[str, float | None]]) -> str:
    """One incident's figures, each as a / b / c."""
    cells = [" / ".join(cell(part.get(f)) for part in figures.values()) for f in FIGURES]
    return f"| {name} | " + " | ".join(cells) + " |"


def after_change(pool: ServerPool, incident: Incident, change: ProposedChange) -> VllmServer:
    """A server with the incident's flags but the one changed."""
    assert isinstance(change.proposed, float)
    value, spec = int(change.proposed), incident.spec
    if change.flag == "--max-num-seqs":
        spec = dataclasses.replace(spec, max_num_seqs=value)
    elif change.flag == "--max-num-batched-tokens":
        spec = dataclasses.replace(spec, max_num_batched_tokens=value)
    else:
        spec = dataclasses.replace(spec, num_gpu_blocks_override=value)
    return pool.get(spec)


async def same_load(server: VllmServer, incident: Incident, load_clients: int) -> list[Frame]:
    """The incident's (possibly grown) load on another server, one window recorded."""
    load = dataclasses.replace(incident.load, clients=load_clients)
    process = LoadProcess(load, server.url, STEADY_S + WINDOW_S + 15)
    try:
        await asyncio.sleep(STEADY_S)
        return await watch(server.url, WINDOW_S)
    finally:
        process.stop()


async def main() -> None:
    """Every incident's window first (as vtop would have watched this model on this host under
    those loads), then each proposed change predicted from the window alone and with the step
    profile of the other windows, and measured after a restart."""
    profiles = StepProfiles.read(Path(tempfile.mkdtemp()) / "step-profiles.json")
    pool = ServerPool(CACHE / "logs", keep=1)
    calibration_rows, prediction_rows, url_rows = [], [], []
    watched: list[tuple[Incident, VllmServer, list[Frame], int]] = []
    try:
        for incident in (OVER_ADMITTED, SEQ_CAP, BUDGET, HEALTHY):
            server = pool.get(incident.spec)
            recorded = await provoke(server, incident)
            frames = recorded.windows[0]
            saved(incident.name, frames)
            url_rows.append(url_only_row(incident.name, server, frames, copy.deepcopy(profiles)))
            print(url_rows[-1], flush=True)
            try:
                model = calibrated(server, frames, profiles)
            except CannotModelError as refused:
                calibration_rows.append(f"| {incident.name} | refused: {refused} |")
                continue
            parts = {"measured": model.measured, "replay": model.replay}
            misses = "; ".join(model.misses) or "none"
            calibration_rows.append(row(incident.name, parts) + f" {step_cell(model)} | {misses} |")
            print(calibration_rows[-1], flush=True)
            watched.append((incident, server, frames, recorded.load.clients))
        for incident, server, frames, clients in watched:
            prediction_rows += await check_prediction(
                pool, profiles, incident, server, frames, clients
            )
    finally:
        pool.stop_all()
    print("\nmeasured / replay of the current config (with the windows watched before it)")
    print(header("incident", [*FIGURES, "step time", "misses"]))
    print("\n".join(calibration_rows))
    print("\nwith the URL alone: measured / replay, the settings used, misses or the refusal")
    print(header("incident", [*FIGURES, "settings", "misses"]))
    print("\n".join(url_rows))
    print(
        "\nbefore / predicted from the window alone / with the profile / with the URL alone "
        "(and the profile) / measured after"
    )
    print(header("incident: change", list(FIGURES)))
    print("\n".join(prediction_rows))


def url_only_row(name: str, server: VllmServer, frames: list[Frame], profiles: StepProfiles) -> str:
    """The window calibrated as `vtop whatif URL` would: replay, settings, misses or refusal
    (on a copy of the profile, so the window is not remembered twice)."""
    try:
        model = calibrated(server, frames, profiles, url_only=True)
    except CannotModelError as refused:
        return f"| {name} | refused: {refused} |"
    parts = {"measured": model.measured, "replay": model.replay}
    return row(name, parts) + f" {settings_cell(model)} | {'; '.join(model.misses) or 'none'} |"


def settings_cell(model: Calibration) -> str:
    """The scheduler settings the model used, the inferred ones marked."""
    config, inferred = model.fit.config, model.fit.inferred

    def shown(name: str, value: int, unbounded: int) -> str:
        if value >= unbounded:
            return f"{name} unknown (not binding)"
        return f"{name} {value}" + (" (inferred)" if name in inferred else "")

    return ", ".join(
        (
            shown("max_num_seqs", config.max_num_seqs, UNBOUNDED_SEQS),
            shown("max_num_batched_tokens", config.max_num_batched_tokens, UNBOUNDED_BUDGET),
        )
    )


def saved(name: str, frames: list[Frame]) -> None:
    """The window as a recording in $VTOP_BENCH_SAVE (for `vtop whatif` on it later)."""
    directory = os.environ.get("VTOP_BENCH_SAVE")
    if not directory:
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    stem = "".join(c if c.isalnum() else "-" for c in name).strip("-")
    with RecordingWriter(Path(directory) / f"{stem}.vtoprec") as writer:
        for frame in frames:
            writer.write(frame)


def step_cell(model: Calibration) -> str:
    """The fitted step time in one cell."""
    cost, step = model.fit.step.cost, model.fit.step
    return (
        f"{cost.fixed_s * 1000:.2f} ms + {cost.per_sequence_s * 1000:.2f} ms/request + "
        f"{cost.per_token_s * 1e6:.0f} us/token + "
        f"{cost.per_context_token_s * 1e6:.2f} us/token of context "
        f"({', '.join(step.terms) or 'constant'})"
    )


async def check_prediction(
    pool: ServerPool,
    profiles: StepProfiles,
    incident: Incident,
    server: VllmServer,
    frames: list[Frame],
    clients: int,
) -> list[str]:
    """The primary change predicted two ways and measured (its window kept in the profile); a
    way whose replay misses the window predicts nothing, as `vtop whatif` refuses to."""
    alone = calibrated(server, frames)
    try:
        url_only: Calibration | None = calibrated(
            server, frames, copy.deepcopy(profiles), url_only=True
        )
    except CannotModelError:
        url_only = None
    with_profile = calibrated(server, frames, profiles)
    change = proposal(server, frames)
    if change is None or (alone.misses and with_profile.misses):
        return []
    flags = {change.flag: float(change.proposed or 0)}
    changed = after_change(pool, incident, change)
    after_frames = await same_load(changed, incident, clients)
    saved(f"{incident.name} after {change.as_flag()}", after_frames)
    remembered(changed, after_frames, profiles)
    parts = {
        "before": alone.measured,
        "alone": predict(alone, flags) if not alone.misses else {},
        "profile": predict(with_profile, flags) if not with_profile.misses else {},
        "url only": predict(url_only, flags) if url_only and not url_only.misses else {},
        "measured": window_figures(changed, after_frames),
    }
    line = row(f"{incident.name}: `{change.as_flag()}`", parts)
    refused = f"; alone refused: {'; '.join(alone.misses)}" if alone.misses else ""
    print(line, f"profile step: {step_cell(with_profile)}{refused}", flush=True)
    return [line]


def header(first: str, columns: list[str]) -> str:
    """A Markdown table header."""
    return f"| {first} | " + " | ".join(columns) + " |\n" + "|---" * (len(columns) + 1) + "|"


if __name__ == "__main__":
    asyncio.run(main())
