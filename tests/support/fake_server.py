"""A stand-in for `vllm serve` in process-management faults (nothing real can misbehave this way
on demand): it logs like vLLM, answers /health and /metrics, and can leave its session or its
parent as real servers' workers do.

Usage: fake_server.py --port P [--mode normal|setsid-child|parent-exits|never-listens] [vLLM args]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

METRICS = (Path(__file__).parents[1] / "data" / "vllm-0.32-cpu-metrics-idle.txt").read_bytes()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = METRICS if self.path == "/metrics" else b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


def serve(port: int) -> None:
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", default="normal")
    parser.add_argument("--api-key")
    parser.add_argument("--listener", action="store_true", help=argparse.SUPPRESS)
    args, _ = parser.parse_known_args()
    given = {"api_key": [args.api_key]} if args.api_key else {}
    print(f"INFO non-default args: {given}", flush=True)
    if args.listener:
        if args.mode == "setsid-child":
            os.setsid()
        serve(args.port)
        return
    if args.mode == "never-listens":
        time.sleep(3600)
        return
    if args.mode == "normal":
        serve(args.port)
        return
    subprocess.Popen([sys.executable, __file__, *sys.argv[1:], "--listener"])
    if args.mode == "parent-exits":
        time.sleep(1)
        return
    time.sleep(3600)


if __name__ == "__main__":
    main()
