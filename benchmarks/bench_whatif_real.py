"""The scheduler model against a real vLLM (CPU build): calibration, then prediction vs reality.

For the storm, the max-num-seqs cap, the token budget and a healthy load (the e2e incidents,
tests/support/incidents.py), the load is run and a window recorded; the model is calibrated on
it (with the server's flags and log, as `vtop diagnose` with them) and its replay of the current
config printed next to the measurement. Where the primary finding proposes a change the model
knows, the model predicts it; then the server is restarted with that change (as `vtop tune`
does: same flags but the one changed) and the same load is measured for a window. Prints one
Markdown table per part for the README.

Run: python -m benchmarks.bench_whatif_real   (needs VTOP_VLLM_PYTHON or .venv-vllm)
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping

from tests.support.incidents import (
    BUDGET,
    HEALTHY,
    OVER_ADMITTED,
    SEQ_CAP,
    SETTLE_S,
    WINDOW_S,
    Incident,
    LoadProcess,
    both_modes,
    calibrated,
    provoke,
    watch,
    window_figures,
)
from tests.support.vllm_harness.server import CACHE, ServerPool, VllmServer
from vtop.core.frame import Frame
from vtop.core.rules.engine import ProposedChange
from vtop.core.rules.loader import load_rules
from vtop.core.whatif.calibrate import CannotModelError
from vtop.core.whatif.predict import FLAGS, predict

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
    process = LoadProcess(load, server.url, SETTLE_S + WINDOW_S + 15)
    try:
        await asyncio.sleep(SETTLE_S)
        return await watch(server.url, WINDOW_S)
    finally:
        process.stop()


async def main() -> None:
    """Every incident in turn."""
    pool = ServerPool(CACHE / "logs", keep=1)
    calibration_rows, prediction_rows = [], []
    try:
        for incident in (OVER_ADMITTED, SEQ_CAP, BUDGET, HEALTHY):
            server = pool.get(incident.spec)
            recorded = await provoke(server, incident)
            frames = recorded.windows[0]
            try:
                model = calibrated(server, frames)
            except CannotModelError as refused:
                calibration_rows.append(f"| {incident.name} | refused: {refused} |")
                continue
            parts = {"measured": model.measured, "replay": model.replay}
            misses = "; ".join(model.misses) or "none"
            calibration_rows.append(row(incident.name, parts) + f" {misses} |")
            print(calibration_rows[-1], flush=True)
            change = proposal(server, frames)
            if change is None or model.misses:
                continue
            predicted = predict(model, {change.flag: float(change.proposed or 0)})
            changed = after_change(pool, incident, change)
            after = window_figures(
                changed, await same_load(changed, incident, recorded.load.clients)
            )
            name = f"{incident.name}: `{change.as_flag()}`"
            parts = {"before": model.measured, "predicted": predicted, "measured": after}
            prediction_rows.append(row(name, parts))
            print(prediction_rows[-1], flush=True)
    finally:
        pool.stop_all()
    print("\nmeasured / replay of the current config")
    print(header("incident", [*FIGURES, "misses"]))
    print("\n".join(calibration_rows))
    print("\nbefore / predicted / measured after the change")
    print(header("incident: change", list(FIGURES)))
    print("\n".join(prediction_rows))


def header(first: str, columns: list[str]) -> str:
    """A Markdown table header."""
    return f"| {first} | " + " | ".join(columns) + " |\n" + "|---" * (len(columns) + 1) + "|"


if __name__ == "__main__":
    asyncio.run(main())
