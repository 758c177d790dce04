"""A stand-in server process for the dashboard's apply flow: /health and a storm's /metrics.

Run as `python tests/metrics_process.py --port N [--frozen] [any vLLM flags]`; counters grow
continuously with time, so a rate measured over any window is the same; `--frozen` holds them
still with requests running (a stalled engine). Restarted with `--max-num-seqs 1` (M1's fix of
the storm it serves) it preempts a third more, not less: a change that made things worse,
which no jitter of a loaded host's scrape times (a few percent on a 4 s window) can read as
an improvement.
"""

from __future__ import annotations

import sys
import time
from http.server import ThreadingHTTPServer

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])

from tests.support.http_server import QuietHandler
from tests.support.storm import CACHE_LABELS, STORM_TICK

STARTED = time.time()
FROZEN = "--frozen" in sys.argv
WORSE = "--max-num-seqs" in sys.argv and sys.argv[sys.argv.index("--max-num-seqs") + 1] == "1"
PREEMPTIONS_PER_S = 4.0 if WORSE else 3.0


class Handler(QuietHandler):
    """Serves the storm exposition at the current second."""

    def do_GET(self) -> None:
        t = 1.0 if FROZEN else time.time() - STARTED + 1
        body = STORM_TICK.format(
            p=PREEMPTIONS_PER_S * t,
            g=300 * t,
            n=t,
            ps=96 * t,
            gs=300 * t,
            cache_labels=CACHE_LABELS,
        )
        if FROZEN:  # the stall rule reads prompt tokens too (every real vLLM exports them)
            body += "# TYPE vllm:prompt_tokens_total counter\n"
            body += f'vllm:prompt_tokens_total{{engine="0",model_name="m"}} {96 * t}\n'
        self.reply(200, (body if self.path == "/metrics" else "ok").encode())


def main() -> None:
    """Serve on --port until stopped."""
    port = int(sys.argv[sys.argv.index("--port") + 1])
    print(f"serving storm metrics on {port}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
