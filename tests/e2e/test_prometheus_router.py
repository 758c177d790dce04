"""A production-stack router scraped by a real Prometheus beside its backends: `vtop diagnose
--prometheus` does not count it as a server and shows its view of each backend, the one slow
at the router but not in its engine flagged as slow on the path."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.support.http_server import QuietHandler, serving_handler
from tests.support.prometheus_harness import prometheus, wait_for_samples
from tests.support.router import EngineMetrics, RouterMetrics
from vtop.cli import main

SLOW_AT_ROUTER_S = 12.0
IN_ENGINE_S = 2.0


def metrics_handler(text: Callable[[], str]) -> type[BaseHTTPRequestHandler]:
    """/metrics answering `text()` (which advances the series at each scrape)."""
    lock = threading.Lock()

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            with lock:
                body = text().encode()
            self.reply(200, body, "text/plain; version=0.0.4; charset=utf-8")

    return Handler


def engine_text(engine: EngineMetrics) -> Callable[[], str]:
    def text() -> str:
        engine.served(2, IN_ENGINE_S, running=4)
        return engine.text()

    return text


def test_the_router_is_its_view_of_each_backend_not_a_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    router = RouterMetrics()
    with ExitStack() as stack:
        slow = stack.enter_context(serving_handler(metrics_handler(engine_text(EngineMetrics()))))
        fine = stack.enter_context(serving_handler(metrics_handler(engine_text(EngineMetrics()))))

        def router_text() -> str:
            router.served(slow, 2, SLOW_AT_ROUTER_S, running=4)
            router.served(fine, 2, IN_ENGINE_S + 0.2, running=4)
            return router.text()

        front = stack.enter_context(serving_handler(metrics_handler(router_text)))
        names = [url.removeprefix("http://") for url in (slow, fine, front)]
        url = stack.enter_context(prometheus(names, tmp_path / "prometheus"))
        wait_for_samples(url, "vllm:num_requests_running", 4)  # two engines, two router rows
        time.sleep(12)
        argv = ["diagnose", "--prometheus", url, "--since", "15s", "--step", "1s", "--json"]
        code = main(argv)
    report = json.loads(capsys.readouterr().out)
    assert sorted(s["target"] for s in report["servers"]) == sorted(names[:2])
    [seen] = report["routers"]
    assert seen["target"] == names[2]
    backends = {b["backend"]: b for b in seen["backends"]}
    assert sorted(backends) == sorted([slow, fine])
    assert backends[slow]["server"] == names[0] and backends[fine]["server"] == names[1]
    assert backends[slow]["slow_on_the_path"], backends[slow]
    assert not backends[fine]["slow_on_the_path"], backends[fine]
    assert backends[slow]["engine_p99_s"] <= IN_ENGINE_S < 10 <= backends[slow]["router_p99_s"]
    assert code == report["exit_code"] and code >= 1
