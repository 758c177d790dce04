"""vtop bench against a small real HTTP server that streams, stalls, or fails on purpose."""

from __future__ import annotations

import json
import random
import time
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler

import pytest

from tests.support.http_server import serving_handler
from vtop.cli.bench import bench_main
from vtop.core.manage.bench import (
    Bench,
    BenchConfig,
    Lengths,
    PromptMaker,
)
from vtop.core.manage.bench_report import Percentiles, RequestResult, summarize


def sse(payload: dict[str, object]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


class Behaviour:
    """What the fake OpenAI server does per request."""

    def __init__(self, mode: str, tokens: int = 4, gap_s: float = 0.01) -> None:
        self.mode, self.tokens, self.gap_s = mode, tokens, gap_s
        self.bodies: list[dict[str, object]] = []


def handler_for(behaviour: Behaviour) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            body = json.dumps({"data": [{"id": "fake-model"}]}).encode()
            self._send(200, "application/json", body)

        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            request = json.loads(self.rfile.read(length))
            behaviour.bodies.append(request)
            if behaviour.mode == "error":
                self._send(503, "application/json", b"{}")
            elif request.get("stream"):
                self._stream()
            else:
                usage = {"completion_tokens": behaviour.tokens, "prompt_tokens": 3}
                self._send(200, "application/json", json.dumps({"usage": usage}).encode())

        def _send(self, status: int, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _stream(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for index in range(behaviour.tokens):
                if behaviour.mode == "stall" and index == 2:
                    time.sleep(1.5)
                    return
                if behaviour.mode == "unicode":
                    self._write_bytewise(index)
                else:
                    self.wfile.write(sse({"choices": [{"text": f"t{index}"}]}))
                self.wfile.flush()
                time.sleep(behaviour.gap_s)
            usage = {"completion_tokens": behaviour.tokens, "prompt_tokens": 3}
            self.wfile.write(sse({"choices": [], "usage": usage}) + b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def _write_bytewise(self, index: int) -> None:
            """An event whose JSON holds raw line and paragraph separators (as a model's text
            may), ended by CRLF, sent a byte at a time (multi-byte characters split)."""
            text = f"t{index}\u2028\u2029\x85\x1c\x0b€"
            event = "data: " + json.dumps({"choices": [{"text": text}]}, ensure_ascii=False)
            for byte in (event + "\r\n\r\n").encode():
                self.wfile.write(bytes([byte]))
                self.wfile.flush()

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


def fake_openai(behaviour: Behaviour) -> AbstractContextManager[str]:
    """A local OpenAI-like server with the given behaviour."""
    return serving_handler(handler_for(behaviour))


async def test_streaming_run_measures_ttft_itl_and_tokens() -> None:
    behaviour = Behaviour("ok", tokens=5, gap_s=0.02)
    with fake_openai(behaviour) as url:
        config = BenchConfig(url=url, concurrency=3, num_requests=6)
        report = await Bench(config).run()
    assert report.completed == 6 and report.failed == 0
    assert report.total_output_tokens == 30
    assert report.ttft.p50 is not None and report.itl.p50 is not None
    assert report.itl.p50 >= 0.015
    assert report.tpot.p50 is not None and report.tpot.p50 > 0
    assert behaviour.bodies[0]["model"] == "fake-model"
    assert behaviour.bodies[0]["ignore_eos"] is True


async def test_text_with_unicode_line_separators_is_one_event_line() -> None:
    behaviour = Behaviour("unicode", tokens=3, gap_s=0.0)
    with fake_openai(behaviour) as url:
        report = await Bench(BenchConfig(url=url, concurrency=2, num_requests=4)).run()
    assert report.failed == 0 and report.completed == 4, report.errors
    assert report.total_output_tokens == 12 and report.itl.p50 is not None


async def test_stalled_stream_is_reported_as_such() -> None:
    with fake_openai(Behaviour("stall")) as url:
        config = BenchConfig(url=url, concurrency=2, num_requests=2, stall_timeout_s=0.3)
        report = await Bench(config).run()
    assert report.stalls == 2 and report.completed == 0
    assert report.errors == {"stalled stream": 2}


async def test_overall_timeout_is_a_timeout() -> None:
    with fake_openai(Behaviour("stall")) as url:
        config = BenchConfig(
            url=url, concurrency=1, num_requests=1, stall_timeout_s=10, request_timeout_s=0.3
        )
        report = await Bench(config).run()
    assert report.timeouts == 1


async def test_http_errors_are_counted_not_raised() -> None:
    with fake_openai(Behaviour("error")) as url:
        report = await Bench(BenchConfig(url=url, model="m", num_requests=3)).run()
    assert report.failed == 3 and report.errors == {"HTTP 503": 3}


async def test_open_loop_rate_mode_non_streaming_chat() -> None:
    behaviour = Behaviour("ok", tokens=7)
    with fake_openai(behaviour) as url:
        config = BenchConfig(
            url=url, endpoint="chat", stream=False, request_rate=50.0, num_requests=10
        )
        report = await Bench(config).run()
    assert report.completed == 10 and report.total_output_tokens == 70
    assert "messages" in behaviour.bodies[0]


def test_qps_is_wall_clock_not_summed_latency() -> None:
    results = [RequestResult(ok=True, e2e_s=10.0, output_tokens=5) for _ in range(10)]
    report = summarize(results, duration_s=10.0)
    assert report.qps == 1.0
    assert report.output_tokens_per_s == 5.0


def test_percentiles_and_lengths() -> None:
    p = Percentiles.of([float(v) for v in range(1, 101)])
    assert p.p50 == pytest.approx(50.5) and p.p99 == pytest.approx(99.01)
    assert Lengths.parse("64:128") == Lengths(64, 128)
    with pytest.raises(ValueError):
        Lengths.parse("9:3")
    rng = random.Random(1)
    assert all(64 <= Lengths(64, 128).draw(rng) <= 128 for _ in range(50))


def test_shared_prefix_prompts_share_exactly_the_prefix() -> None:
    maker = PromptMaker(
        BenchConfig(url="x", prompt_tokens=Lengths(40, 40), shared_prefix_tokens=32)
    )
    first, second = maker.token_ids(), maker.token_ids()
    assert len(first) == len(second) == 40
    assert first[:32] == second[:32] and first[32:] != second[32:]


def test_cli_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    with fake_openai(Behaviour("ok")) as url:
        code = bench_main([url, "-n", "2", "-c", "1", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["completed"] == 2 and "p99" in report["ttft"]


def test_cli_unreachable_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = bench_main(["http://127.0.0.1:9", "-n", "1"])
    assert code == 3
    assert "cannot run against" in capsys.readouterr().err
