"""Impossible values on the wire are flagged with their line, never crash, never invent."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support.http_server import QuietHandler, serving_handler
from tests.support.payloads import fixture
from tests.support.vtop_cli import Ran, vtop

BASE = fixture("underload")
CUMULATIVE = re.compile(r"^(vllm:\S+?_(?:total|sum|count|bucket)(?:\{[^}]*\})?) (\S+)$", re.M)


def grown(tick: int) -> str:
    """The real capture with every counter, sum, count and bucket grown by 10% per tick."""
    return CUMULATIVE.sub(lambda m: f"{m[1]} {float(m[2]) * (1 + 0.1 * tick)!r}", BASE)


def with_line(text: str, head: str, value: str) -> str:
    """The payload with the sample whose line starts with `head` set to `value`."""
    changed, count = re.subn(rf"^({re.escape(head)}\S*) \S+$", rf"\g<1> {value}", text, flags=re.M)
    assert count, head
    return changed


Payloads = Callable[[int], str]


@contextmanager
def serving_payloads(payloads: Payloads) -> Iterator[str]:
    """A server answering scrape N with payloads(N) (other paths: 404)."""
    ticks = itertools.count()

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            if self.path != "/metrics":
                self.reply(404, b"not found")
                return
            self.reply(200, payloads(next(ticks)).encode(), "text/plain; version=0.0.4")

    with serving_handler(Handler) as url:
        yield url


def diagnosed(payloads: Payloads) -> tuple[Ran, dict[str, Any]]:
    """`vtop diagnose URL --json` over a few scrapes, parsed by a strict JSON parser."""
    with serving_payloads(payloads) as url:
        ran = vtop("diagnose", url, "--window", "3", "--interval", "0.5", "--json", "--no-gpu")
    assert "Traceback" not in ran.text, ran.text

    def refuse(token: str) -> None:
        raise AssertionError(f"non-strict JSON token {token}")

    return ran, json.loads(ran.out, parse_constant=refuse)


RUNNING = 'vllm:num_requests_running{engine="0"'
WAITING = 'vllm:num_requests_waiting{engine="0"'
KV = 'vllm:kv_cache_usage_perc{engine="0"'
PROMPT_SUM = 'vllm:request_prompt_tokens_sum{engine="0"'
TTFT_2_5 = 'vllm:time_to_first_token_seconds_bucket{engine="0",le="2.5"'

CASES: dict[str, tuple[Payloads, str]] = {
    "+Inf gauge": (lambda t: with_line(grown(t), RUNNING, "+Inf"), "impossible value"),
    "NaN gauge": (lambda t: with_line(grown(t), KV, "NaN"), "impossible value"),
    "negative gauge": (lambda t: with_line(grown(t), WAITING, "-3"), "impossible value"),
    "KV above 100%": (lambda t: with_line(grown(t), KV, "1.7"), "impossible value"),
    "negative prompt sum": (
        lambda t: with_line(grown(t), PROMPT_SUM, repr(-13.0 * 100 * (1 + t))),
        "impossible value",
    ),
    "duplicate series": (
        lambda t: grown(t) + 'vllm:generation_tokens_total{engine="0",model_name="./model"} 5.0\n',
        "duplicate series",
    ),
    "unordered buckets": (
        lambda t: with_line(grown(t), TTFT_2_5, "5.0"),
        "histogram buckets not monotonic",
    ),
    "a bucket going back": (
        lambda t: with_line(grown(t), TTFT_2_5, "31.0" if t % 2 else "40.0"),
        "counter went backwards",
    ),
    "malformed lines": (lambda t: grown(t) + "vllm:broken{engine=0 1\n", "malformed line"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_value_is_a_data_quality_finding_with_its_line(case: str) -> None:
    payloads, kind = CASES[case]
    ran, report = diagnosed(payloads)
    found = [d for d in report["data_quality"] if d["kind"] == kind]
    assert found, (case, report["data_quality"], ran.err)
    if kind != "counter went backwards" or found[0]["line"] is not None:
        assert found[0]["line"] is not None and found[0]["text"], found
    assert report["verdict"] != "ok" and ran.code in (1, 2, 3), (report["verdict"], ran.code)
    assert "-13 tokens" not in ran.out
    if case == "unordered buckets":  # the figure is unknown, never a confident wrong number
        ttft = {k: v for k, v in report["statistics"].items() if k.startswith("ttft")}
        assert set(ttft.values()) == {None}, ttft


def test_a_bucket_going_back_is_not_a_restart_every_scrape() -> None:
    _, report = diagnosed(CASES["a bucket going back"][0])
    messages = [event["message"] for event in report["events"]]
    assert not any("counters reset" in message for message in messages), messages
    p99 = report["statistics"]["ttft_p99_s"]
    assert p99 is None or p99 < 10, p99  # the real capture's TTFT is under 5 s


def two_replicas(tick: int) -> str:
    """One URL, two vLLM processes answering in turn (a load balancer): different start times,
    counters far apart."""
    if tick % 2:
        other = with_line(grown(tick), "process_start_time_seconds", "1.7e+09")
        return CUMULATIVE.sub(lambda m: f"{m[1]} {float(m[2]) * 30!r}", other)
    return grown(tick)


def test_one_url_behind_a_load_balancer_is_said_not_diagnosed_as_a_restart_storm() -> None:
    ran, report = diagnosed(two_replicas)
    assert ran.code == 3, ran.text
    assert "alternates between 2 vLLM processes" in report["reason"], report["reason"]
    assert report["primary"] is None and report["verdict"] == "unknown"
