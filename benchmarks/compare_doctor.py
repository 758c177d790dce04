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

from tests.scenarios import SCENARIOS, WINDOW, Scenario, warm_up
from tests.vllm_harness.server import CACHE, ServerPool, VllmServer
from vtop.core.bench import Bench
from vtop.core.diagnose import DiagnoseOptions, Diagnosis, diagnose_url
from vtop.core.rules import load_rules
from vtop.core.sources.vllm_http import ScrapeOptions


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
    """vtop's verdict, primary finding and first computed flag."""
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


async def compare(server: VllmServer, scenario: Scenario) -> tuple[str, str]:
    """Warm the server up, load it, then run both tools inside the same window."""
    await Bench(warm_up(server.url, server.spec.max_num_seqs)).run()
    bench = asyncio.create_task(Bench(scenario.load(server.url)).run())
    await asyncio.sleep(4)
    options = DiagnoseOptions(WINDOW, 1.0, " ".join(server.argv()), server.log_text())
    vtop_task = asyncio.create_task(
        diagnose_url(server.url, load_rules(), options, ScrapeOptions(timeout_s=10))
    )
    await asyncio.sleep(WINDOW - 2)
    doctor = await run_doctor(server.url)
    diagnosis = await vtop_task
    await bench
    return vtop_cell(diagnosis), doctor_cell(doctor)


async def main() -> None:
    """All scenarios, one server at a time."""
    pool = ServerPool(CACHE / "logs")
    rows = []
    try:
        for scenario in SCENARIOS:
            server = pool.get(scenario.spec)
            vtop, doctor = await compare(server, scenario)
            rows.append(f"| {scenario.name} | {scenario.expected} | {vtop} | {doctor} |")
            print(rows[-1], flush=True)
    finally:
        pool.stop_all()
    print("\n| scenario | expected | vtop diagnose | vllm-doctor 0.6.0 |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
