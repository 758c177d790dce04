"""vtop's dashboard next to vllmstat (PyPI), both in tmux at 80x24 and 1 s, on one real vLLM.

Both run side by side for the same 60 s while a light load keeps the metrics moving; the script
prints each one's CPU seconds (process tree, after a 10 s start-up allowance) and RSS, and the
last screen of each pane. Run: python -m benchmarks.bench_dashboard_cpu
(needs tmux, VTOP_VLLM_PYTHON or .venv-vllm, and vllmstat on PATH or VLLMSTAT=/path/to/vllmstat;
VTOP=/path/to/vtop measures an installed vtop instead of this checkout's).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.scenarios import warm_up
from tests.support.vllm_harness.server import CACHE, ServerSpec, VllmServer
from vtop.core.manage.bench import Bench, BenchConfig, Lengths

MEASURE_S = 60.0
STARTUP_S = 10.0
TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Usage:
    """CPU seconds and resident memory of a process tree."""

    cpu_s: float
    rss_mib: float


def children(pid: int) -> list[int]:
    """pid and all its descendants."""
    found, frontier = [pid], [pid]
    while frontier:
        parent = frontier.pop()
        for status in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = status.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                child = int(status.parent.name)
                found.append(child)
                frontier.append(child)
    return found


def usage(pid: int) -> Usage:
    """CPU (user + system) and RSS summed over the tree."""
    cpu, rss = 0.0, 0.0
    for member in children(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue
        cpu += (int(fields[11]) + int(fields[12])) / TICK
        rss += next(
            int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")
        )
    return Usage(cpu, rss / 1024)


_TMUX_SERVERS = itertools.count()


class Tmux:
    """A private tmux server (its own socket), one 80x24 session per tool."""

    def __init__(self) -> None:
        # one socket per instance: a server just killed may still hold its socket's name
        self.socket = f"vtop-bench-{os.getpid()}-{next(_TMUX_SERVERS)}"

    def run(self, *args: str) -> str:
        """A tmux command on the private server."""
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True
        )
        return done.stdout

    def start(self, name: str, command: list[str]) -> int:
        """A detached 80x24 session running `command`; returns its pane's pid."""
        line = " ".join(command)
        self.run("new-session", "-d", "-s", name, "-x", "80", "-y", "24", f"exec {line}")
        return int(self.run("list-panes", "-t", name, "-F", "#{pane_pid}").strip())

    def screen(self, name: str) -> str:
        """What the pane shows now."""
        return self.run("capture-pane", "-p", "-t", name)

    def stop(self) -> None:
        """Kill this private server only (never by process name)."""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


def vtop_command() -> list[str]:
    """The vtop to measure: VTOP=/path/to/vtop (an installed one, e.g. the wheel in a fresh
    environment, what a user runs), else this checkout's."""
    installed = os.environ.get("VTOP")
    return [installed] if installed else [sys.executable, "-m", "vtop"]


def vllmstat_command() -> str:
    """The vllmstat executable."""
    found = os.environ.get("VLLMSTAT") or shutil.which("vllmstat")
    if not found:
        raise SystemExit("vllmstat not found: pip install vllmstat, or set VLLMSTAT")
    return found


def light_load(url: str) -> BenchConfig:
    """Four closed-loop clients for the whole measurement."""
    return BenchConfig(
        url=url,
        concurrency=4,
        num_requests=None,
        duration_s=STARTUP_S + MEASURE_S + 5,
        prompt_tokens=Lengths(64, 64),
        output_tokens=Lengths(64, 64),
    )


async def measure(url: str) -> None:
    """Run both tools in tmux under load and print the comparison."""
    tmux = Tmux()
    tools = {
        "vtop": [*vtop_command(), url, "--interval", "1"],
        "vllmstat": [vllmstat_command(), "-u", url, "-i", "1"],
    }
    load = asyncio.ensure_future(Bench(light_load(url)).run())
    try:
        pids = {name: tmux.start(name, command) for name, command in tools.items()}
        await asyncio.sleep(STARTUP_S)
        before = {name: usage(pid) for name, pid in pids.items()}
        await asyncio.sleep(MEASURE_S)
        after = {name: usage(pid) for name, pid in pids.items()}
        screens = {name: tmux.screen(name) for name in tools}
    finally:
        tmux.stop()
        await load
    report(before, after, screens)


def report(before: dict[str, Usage], after: dict[str, Usage], screens: dict[str, str]) -> None:
    """The table, the ratio, and the screens."""
    print(f"{'tool':10} {'CPU s / 60 s':>13} {'% of a core':>12} {'RSS MiB':>8}")
    spent = {name: after[name].cpu_s - before[name].cpu_s for name in after}
    for name in after:
        share = 100 * spent[name] / MEASURE_S
        print(f"{name:10} {spent[name]:13.2f} {share:11.1f}% {after[name].rss_mib:8.0f}")
    ratio = spent["vtop"] / spent["vllmstat"] if spent["vllmstat"] else float("inf")
    print(f"vtop / vllmstat CPU: {ratio:.2f}x (vtop also runs the rule engine every tick)")
    for name, text in screens.items():
        print(f"\n--- {name} at 80x24 in tmux ---\n{text.rstrip()}")


def main() -> None:
    """Start a real vLLM, warm it up, compare."""
    if not shutil.which("tmux"):
        raise SystemExit("tmux is needed")
    spec = ServerSpec(max_num_seqs=16)
    server = VllmServer(spec, CACHE / "logs" / f"bench-dashboard-{time.time():.0f}.log")
    server.start()
    try:
        asyncio.run(Bench(warm_up(server.url, spec.max_num_seqs)).run())
        asyncio.run(measure(server.url))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
