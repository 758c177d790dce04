"""`vtop requests` as a script runs it: a server's requests in flight (vtop's middleware lists
them; served here by a real HTTP server answering as vLLM with the list), what it says where
the list is not served, and the spans a real recording holds."""

from __future__ import annotations

import json

from tests.support.demo import SLOT_HOGS_RECORDING
from tests.support.http_server import Canned, serving
from tests.support.payloads import fixture
from tests.support.vtop_cli import vtop
from vtop.text.in_flight import NOT_LISTED

LISTED = json.dumps(
    {
        "schema": "vtop.inflight/1",
        "now": 1.0,
        "in_flight": 2,
        "requests": [
            {"request_id": "batch-job-7", "path": "/v1/chat/completions", "age_s": 312.4,
             "stream": True, "max_tokens": 4096, "events": 2918, "body_bytes": 900},
            {"request_id": "chat-19", "path": "/v1/completions", "age_s": 41.2,
             "stream": False, "max_tokens": None, "events": 0, "body_bytes": 300},
        ],
    }
)  # fmt: skip


def test_a_servers_requests_in_flight_oldest_first() -> None:
    canned = Canned(body=fixture("underload"), others={"/vtop/inflight": LISTED})
    with serving(canned) as url:
        text = vtop("requests", url)
        as_json = vtop("requests", url, "--json")
    assert text.code == 0, text.text
    lines = text.out.splitlines()
    assert lines[0] == "IN FLIGHT (2 running, the oldest first)", text.out
    assert lines[2].split() == ["batch-job-7", "5m12s", "2918", "4096", "/v1/chat/completions"]
    assert lines[3].split() == ["chat-19", "41s", "-", "?", "/v1/completions"]
    assert all(len(line) <= 80 for line in lines), text.out
    listed = json.loads(as_json.out)["in_flight"]
    assert [r["request_id"] for r in listed] == ["batch-job-7", "chat-19"], listed


def test_a_server_without_the_list_says_how_to_get_it_and_exits_3() -> None:
    with serving(Canned(body=fixture("underload"))) as url:
        ran = vtop("requests", url)
    assert ran.code == 3, ran.text
    assert " ".join(ran.out.split()) == NOT_LISTED, ran.out


def test_a_recordings_spans_ranked_by_any_figure() -> None:
    ran = vtop("requests", str(SLOT_HOGS_RECORDING), "--sort", "ttft", "--limit", "3", "--json")
    assert ran.code == 0, ran.text
    report = json.loads(ran.out)
    assert report["received"] == 16 and report["in_flight"] is None
    ids = [r["request_id"] for r in report["requests"]]
    assert len(ids) == 3 and all(i.startswith("cmpl-chat-") for i in ids), ids
    assert [s["band"] for s in report["time_split"]][:1] == ["slowest 1%"], report["time_split"]
