"""Time to a verdict: `vtop diagnose URL` on live endpoints of each incident kind, with the
default window (which ends early when the evidence is decisive) against `--window 15` (the
whole window) in the same run.

Run: python -m benchmarks.bench_time_to_verdict [--repeat N]
Each endpoint is served on 127.0.0.1 by this process and replays what a real vLLM 0.32 exposed:
- storm: the shipped demo recording from 20 s in (a preemption storm), one frame a second;
- capped: the same recording from 110 s in (after the fix: a queue at what the KV cache holds);
- stalled: one storm frame repeated (requests run and wait, no counter moves: a hung engine);
- healthy: two requests running, none waiting, a third of the KV cache, tokens flowing;
- not-vllm: an HTML page; dead: a port nothing listens on.
Prints, per kind, the median wall seconds, the verdict and exit code of each mode, and the
ratio default / whole window.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from tests.support.http_server import QuietHandler, serving_handler
from vtop.core.ingest.recorder import RecordingReader

DEMO = Path(__file__).resolve().parents[1] / "vtop" / "demo" / "storm.vtoprec"
Body = Callable[[float], tuple[int, str, str]]
"""Seconds since the endpoint started -> status, content type, body."""


def recorded_texts(seek_s: float) -> list[str]:
    """The demo's /metrics texts from `seek_s` seconds in, one per recorded frame."""
    frames = list(RecordingReader(DEMO))
    first = frames[0].timestamp
    return [
        frame.scrapes[0].raw_text
        for frame in frames
        if frame.timestamp - first >= seek_s and frame.scrapes and frame.scrapes[0].raw_text
    ]


def replaying(texts: list[str]) -> Body:
    """The recorded texts in order, one a second, the last one repeated."""
    return lambda elapsed: (200, "text/plain", texts[min(int(elapsed), len(texts) - 1)])


HEALTHY = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} 2
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} 0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.3
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{{engine="0",model_name="m"}} 0
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{{engine="0",model_name="m"}} {prompt}
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{{engine="0",model_name="m"}} {generated}
# TYPE vllm:request_success counter
vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}} {finished}
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1",model_name="m"}} {finished}
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="m"}} {finished}
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="m"}} {ttft}
vllm:time_to_first_token_seconds_count{{engine="0",model_name="m"}} {finished}
"""
"""Two requests running, nothing waiting, a third of the cache: what a healthy vLLM exposes
of what the rules read (one request a second, 64 prompt and 128 generated tokens each)."""


def healthy() -> Body:
    """HEALTHY with its counters at `elapsed` seconds of steady, light traffic."""

    def body(elapsed: float) -> tuple[int, str, str]:
        done = 100 + int(elapsed)
        values = {"prompt": 64 * done, "generated": 128 * done, "finished": done}
        return 200, "text/plain", HEALTHY.format(ttft=0.05 * done, **values)

    return body


def html(_: float) -> tuple[int, str, str]:
    return 200, "text/html", "<html><body>It works!</body></html>"


@contextmanager
def serving(body: Body) -> Iterator[str]:
    """`body` at /metrics of a free loopback port (404 elsewhere), until the block ends."""
    started = time.monotonic()

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            status, kind, text = body(time.monotonic() - started)
            if self.path == "/metrics":
                self.reply(status, text.encode(), kind)
            else:
                self.reply(404, b"{}", "application/json")

    with serving_handler(Handler) as url:
        yield url


@contextmanager
def dead() -> Iterator[str]:
    with closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    yield f"http://127.0.0.1:{port}"


def diagnose(url: str, *window: str) -> tuple[float, str, int]:
    """Wall seconds, verdict and exit code of one `vtop diagnose URL --json`."""
    started = time.monotonic()
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "vtop",
            "diagnose",
            url,
            "--json",
            "--no-gpu",
            "--no-predict",
            *window,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    seconds = time.monotonic() - started
    return seconds, json.loads(ran.stdout)["verdict"], ran.returncode


KINDS: dict[str, Callable[[], object]] = {
    "storm": lambda: serving(replaying(recorded_texts(20))),
    "capped": lambda: serving(replaying(recorded_texts(110))),
    "stalled": lambda: serving(replaying(recorded_texts(30)[:1])),
    "healthy": lambda: serving(healthy()),
    "not-vllm": lambda: serving(html),
    "dead": dead,
}


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per kind and mode")
    args = parser.parse_args()
    print(
        f"{'kind':<10} {'default s':>9} {'verdict':<11} {'--window 15':>11} {'verdict':<11} ratio"
    )
    for kind, endpoint in KINDS.items():
        timed: dict[str, list[tuple[float, str, int]]] = {"default": [], "whole": []}
        for _ in range(args.repeat):
            for mode, window in (("default", ()), ("whole", ("--window", "15"))):
                with endpoint() as url:  # type: ignore[attr-defined]
                    timed[mode].append(diagnose(str(url), *window))
        medians = {mode: statistics.median(t[0] for t in runs) for mode, runs in timed.items()}
        said = {mode: f"{runs[-1][1]} ({runs[-1][2]})" for mode, runs in timed.items()}
        ratio = medians["default"] / medians["whole"]
        print(
            f"{kind:<10} {medians['default']:>9.1f} {said['default']:<13} "
            f"{medians['whole']:>11.1f} {said['whole']:<13} {ratio:.2f}x"
        )


if __name__ == "__main__":
    main()
