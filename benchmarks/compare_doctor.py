"""vtop diagnose next to vllm-doctor (PyPI) on the same live vLLM, scenario by scenario.

Run: python -m benchmarks.compare_doctor   (needs VTOP_VLLM_PYTHON or .venv-vllm, and vllm-doctor
on PATH or VLLM_DOCTOR=/path/to/vllm-doctor). Prints a Markdown table for the README.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from typing import Any

from tests.support.incidents import (
    INCIDENTS,
    SETTLE_S,
    WINDOW_S,
    Incident,
    both_modes,
    provoke,
)
from tests.support.vllm_harness.server import CACHE, ServerPool, VllmServer
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import Diagnosis


def doctor_command() -> str:
    """The vllm-doctor executable."""
    found = os.environ.get("VLLM_DOCTOR") or shutil.which("vllm-doctor")
    if not found:
        raise SystemExit("vllm-doctor not found: pip install vllm-doctor, or set VLLM_DOCTOR")
    return found


async def run_doctor(url: str) -> dict[str, Any]:
    """vllm-doctor's JSON verdict for the server right now."""
    process = await asyncio.create_subprocess_exec(
        doctor_command(),
        "diagnose",
        url + "/metrics",
        "-o",
        "json",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await process.communicate()
    try:
        return dict(json.loads(out))
    except json.JSONDecodeError:
        return {"error": (err or out).decode(errors="replace")[-200:]}


def vtop_cell(diagnosis: Diagnosis) -> str:
    """vtop's verdict, primary finding and first computed flag (marked when inferred)."""
    triage = diagnosis.triage
    if triage is None or triage.primary is None:
        return f"{diagnosis.verdict}" + (f" ({diagnosis.reason})" if diagnosis.reason else "")
    primary = triage.primary
    flags = [c.as_flag() for c in primary.changes if c.as_flag()]
    others = [f.rule.id for f in triage.findings[1:]]
    suffix = f"; also {', '.join(others)}" if others else ""
    return (
        f"{diagnosis.verdict}: {primary.rule.id} {primary.rule.title}"
        + (f" -> `{flags[0]}`" if flags else "")
        + suffix
    )


def doctor_cell(report: dict[str, Any]) -> str:
    """vllm-doctor's health, the checks that found something, and its first advice."""
    if "error" in report:
        return f"error: {report['error']}"
    checks = [c for c in report.get("checks", []) if c.get("finding")]
    names = [f"{c['id']} ({c['finding'].get('severity')})" for c in checks]
    advice = checks[0]["finding"].get("recommendations", [""])[0] if checks else ""
    suffix = f"; first advice: {advice}" if advice else ""
    return f"{report.get('health', '-')}: {', '.join(names) or 'no finding'}{suffix}"


async def compare(server: VllmServer, incident: Incident) -> tuple[str, str, str]:
    """Provoke the incident, run vllm-doctor inside the window vtop judges, and
    diagnose that window with the URL alone and with the flags and the log."""
    doctor = asyncio.create_task(_doctor_later(server.url, SETTLE_S + WINDOW_S / 2))
    recorded = await provoke(server, incident)
    diagnoses = both_modes(server, recorded.windows[0], load_rules())
    return (
        vtop_cell(diagnoses["url only"]),
        vtop_cell(diagnoses["with log"]),
        doctor_cell(await doctor),
    )


async def _doctor_later(url: str, delay_s: float) -> dict[str, Any]:
    """vllm-doctor's verdict `delay_s` from now (inside the judged window)."""
    await asyncio.sleep(delay_s)
    return await run_doctor(url)


async def main() -> None:
    """All incidents, one server at a time."""
    pool = ServerPool(CACHE / "logs")
    rows = []
    try:
        for incident, expected in INCIDENTS:
            server = pool.get(incident.spec)
            url_only, with_log, doctor = await compare(server, incident)
            rows.append(f"| {incident.name} | {expected} | {url_only} | {with_log} | {doctor} |")
            print(rows[-1], flush=True)
    finally:
        pool.stop_all()
    print(
        "\n| incident | expected | vtop diagnose URL | vtop diagnose URL + flags + log "
        "| vllm-doctor 0.6.0 |\n|---|---|---|---|---|"
    )
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
