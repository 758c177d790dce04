"""Soak: the dashboard for 10 minutes at 1 s against a server whose payload changes series on
every scrape (new label values each time, as a misbehaving exporter's would), RSS per minute.

The payload is the real vLLM 0.32 capture with growing counters plus 2,000 series whose label
values are new on every scrape. vtop runs as a user runs it (tmux, 80x24). The figures must be
flat after the first minutes: every store, cache and history in vtop is bounded.
Run: python -m benchmarks.soak [minutes]
"""

from __future__ import annotations

import itertools
import re
import sys
import time
from http.server import BaseHTTPRequestHandler

from benchmarks.bench_dashboard_cpu import Tmux, usage
from tests.support.http_server import QuietHandler, serving_handler
from tests.support.payloads import fixture

BASE = fixture("underload")
CUMULATIVE = re.compile(r"^(vllm:\S+?_(?:total|sum|count|bucket)(?:\{[^}]*\})?) (\S+)$", re.M)
CHURN = 2_000


def payload(tick: int) -> str:
    """The capture grown by `tick` plus CHURN series never seen before."""
    grown = CUMULATIVE.sub(lambda m: f"{m[1]} {float(m[2]) * (1 + 0.01 * tick)!r}", BASE)
    churn = "".join(f'exporter_churn{{scrape="{tick}",n="{n}"}} 1\n' for n in range(CHURN))
    return grown + churn


def handler() -> type[BaseHTTPRequestHandler]:
    ticks = itertools.count()

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            if self.path != "/metrics":
                self.reply(404, b"")
                return
            self.reply(200, payload(next(ticks)).encode(), "text/plain; version=0.0.4")

    return Handler


def main(minutes: int) -> None:
    tmux = Tmux()
    with serving_handler(handler()) as url:
        try:
            pid = tmux.start("soak", [sys.executable, "-m", "vtop", url, "--interval", "1"])
            print("minute  RSS MiB  CPU s")
            for minute in range(minutes + 1):
                if minute:
                    time.sleep(60)
                now = usage(pid)
                print(f"{minute:6d}  {now.rss_mib:7.0f}  {now.cpu_s:5.0f}", flush=True)
            print(tmux.screen("soak"))
        finally:
            tmux.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
