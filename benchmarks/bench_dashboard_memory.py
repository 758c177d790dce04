"""vtop's dashboard next to vllmstat (PyPI) for minutes: resident memory as it settles.

Both run in tmux at 80x24 and 1 s on the same local endpoint (benchmarks.endpoint_farm: the real
vLLM 0.32 capture taken under load, its counters grown at every scrape), with GPUs off; every
minute the script prints each one's RSS (process tree), so what grows with the session (chart
history, the rings, the frames kept for a bundle) shows beside what is paid at start.
Run: python -m benchmarks.bench_dashboard_memory [--minutes 10]
(needs tmux and vllmstat on PATH or VLLMSTAT=/path; VTOP=/path/to/vtop measures an installed
vtop, e.g. the wheel in a fresh environment, instead of this checkout's).
"""

from __future__ import annotations

import argparse
import time

from benchmarks.bench_dashboard_cpu import Tmux, usage, vllmstat_command, vtop_command
from benchmarks.bench_fleet import endpoints


def main() -> None:
    """RSS of both dashboards each minute."""
    parser = argparse.ArgumentParser(prog="bench_dashboard_memory")
    parser.add_argument("--minutes", type=int, default=10)
    args = parser.parse_args()
    with endpoints(1) as [url]:
        tools = {
            "vtop": [*vtop_command(), url, "--interval", "1", "--no-gpu"],
            "vllmstat": [vllmstat_command(), "-u", url, "-i", "1", "--no-gpu"],
        }
        tmux = Tmux()
        try:
            pids = {name: tmux.start(name, command) for name, command in tools.items()}
            print(f"{'minute':>6} " + " ".join(f"{name + ' MiB':>13}" for name in tools))
            for minute in range(1, args.minutes + 1):
                time.sleep(60)
                rss = {name: usage(pid).rss_mib for name, pid in pids.items()}
                shown = " ".join(f"{rss[name]:13.1f}" for name in tools)
                print(f"{minute:6d} {shown}   vtop/vllmstat {rss['vtop'] / rss['vllmstat']:.2f}x")
        finally:
            tmux.stop()


if __name__ == "__main__":
    main()
