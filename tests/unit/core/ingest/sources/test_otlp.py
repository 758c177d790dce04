"""vLLM's request spans decoded from OTLP, and the embedded receiver under hostile input: over
real sockets (the standard library's HTTP server, grpcio's server and client)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support.otlp_exports import TRACE_ID, export
from vtop.core.config.otlp_address import OtlpAddressError, parse_address
from vtop.core.ingest.sources import otlp_receiver
from vtop.core.ingest.sources.otlp import MAX_EXPORT_BYTES, SpanDecodeError, decode_export
from vtop.core.ingest.sources.otlp_receiver import (
    SpanStore,
    receiving,
)
from vtop.core.session.request_view import ranked, time_split

Stub: Callable[[grpc.Channel], Any] = trace_service_pb2_grpc.TraceServiceStub
"""opentelemetry-proto's generated client (untyped), typed here once."""


def test_a_request_span_decodes_to_its_figures() -> None:
    decoded = decode_export(export(("cmpl-a-0", 2.0, 0.5, 3.2, 6.0), other=2))
    [span] = decoded.spans
    assert decoded.other_spans == 2
    assert span.request_id == "cmpl-a-0" and span.server == "vllm-a"
    assert (span.queue_s, span.prefill_s, span.decode_s, span.e2e_s) == (2.0, 0.5, 3.2, 6.0)
    assert span.ttft_s == 2.5 and span.prompt_tokens == 800 and span.output_tokens == 33
    assert span.max_tokens == 64 and span.tpot_s == pytest.approx(3.2 / 32)
    assert span.trace_id == TRACE_ID.hex()


def test_otlp_json_with_hex_ids_reads_the_same() -> None:
    message = ExportTraceServiceRequest.FromString(export(("cmpl-j-0", 1.0, 0.1, 0.4, 1.6)))
    document = json_format.MessageToDict(message)
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["traceId"], span["spanId"] = TRACE_ID.hex(), "00" * 8  # OTLP/JSON writes hex
    [decoded] = decode_export(json.dumps(document).encode(), json_body=True).spans
    assert decoded.trace_id == TRACE_ID.hex() and decoded.e2e_s == 1.6


@pytest.mark.parametrize(
    "body, json_body",
    [
        (b"\xff\xfe garbage \x00\x01", False),
        (b"not json at all", True),
        (b"[" * 100_000 + b"]" * 100_000, True),
        (
            json.dumps(
                {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}
            ).encode(),
            True,
        ),
        (b"x" * (MAX_EXPORT_BYTES + 1), False),
    ],
    ids=["garbage", "not-json", "deep", "bad-hex", "too-large"],
)
def test_hostile_exports_are_refused_with_a_reason(body: bytes, json_body: bool) -> None:
    with pytest.raises(SpanDecodeError):
        decode_export(body, json_body=json_body)


def test_addresses_default_to_loopback_and_say_what_is_wrong() -> None:
    assert str(parse_address("grpc://:4317")) == "grpc://127.0.0.1:4317"
    assert str(parse_address("http://0.0.0.0:4318/v1/traces")) == "http://0.0.0.0:4318"
    for wrong in ("ftp://x:1", "http://127.0.0.1", "http://127.0.0.1:99999", "http://h:1/other"):
        with pytest.raises(OtlpAddressError):
            parse_address(wrong)


@pytest.fixture
def http_receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, SpanStore]]:
    monkeypatch.setattr(otlp_receiver, "READ_TIMEOUT_S", 1.0)
    store = SpanStore(capacity=3)
    with receiving([parse_address("http://127.0.0.1:0")], store, token="s3cret") as [bound]:
        yield f"{bound}/v1/traces", store


def post(url: str, body: bytes, kind: str = "application/x-protobuf", token: str = "s3cret") -> int:
    headers = {"Content-Type": kind, "Authorization": f"Bearer {token}"}
    return httpx.post(url, content=body, headers=headers, timeout=5).status_code


def head(length: int) -> bytes:
    """An export's request head announcing `length` bytes of body."""
    return (
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Authorization: Bearer s3cret\r\nContent-Length: " + str(length).encode() + b"\r\n\r\n"
    )


def test_the_http_receiver_keeps_what_it_got_through_hostile_input(
    http_receiver: tuple[str, SpanStore],
) -> None:
    url, store = http_receiver
    assert post(url, export(("one", 1.0, 0.1, 0.5, 1.7))) == 200
    assert post(url, b"\x00garbage") == 400
    assert post(url, export(("two", 1.0, 0.1, 0.5, 1.7)), kind="text/plain") == 415
    assert post(url, export(("three", 1.0, 0.1, 0.5, 1.7)), token="wrong") == 401
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    # a gigabyte announced is refused before a byte of it is read
    with socket.create_connection((host, int(port)), timeout=5) as announced:
        announced.sendall(head(10**9))
        assert announced.recv(100).startswith(b"HTTP/1.0 413")
    # a sender that stalls mid-body is cut by the read timeout, and the server goes on
    with socket.create_connection((host, int(port)), timeout=5) as stalled:
        stalled.sendall(head(1000) + b"partial")
        started = time.monotonic()
        assert stalled.recv(100) == b""  # closed without an answer
        assert time.monotonic() - started < 4
    assert [s.request_id for s in store.spans()] == ["one"]
    assert store.refused == 5
    # the newest kept, the oldest dropped and counted
    for name in ("a", "b", "c"):
        assert post(url, export((name, 1.0, 0.1, 0.5, 1.7))) == 200
    assert [s.request_id for s in store.spans()] == ["a", "b", "c"] and store.dropped == 1


def test_the_grpc_receiver_takes_exports_and_refuses_without_the_token() -> None:
    store = SpanStore()
    address = [parse_address("grpc://127.0.0.1:0")]
    token = [("authorization", "Bearer s3cret")]
    with (
        receiving(address, store, token="s3cret") as [bound],
        grpc.insecure_channel(bound.removeprefix("grpc://")) as channel,
    ):
        stub = Stub(channel)
        request = ExportTraceServiceRequest.FromString(export(("g-1", 3.0, 0.2, 1.0, 4.3)))
        stub.Export(request, metadata=token, timeout=5)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(request, timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        huge = ExportTraceServiceRequest()
        huge.resource_spans.add().scope_spans.add().spans.add().name = "x" * MAX_EXPORT_BYTES
        with pytest.raises(grpc.RpcError) as too_large:
            stub.Export(huge, metadata=token, timeout=5)
        assert too_large.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert [s.request_id for s in store.spans()] == ["g-1"]


def test_a_port_already_taken_is_said() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for scheme in ("http", "grpc"):
            with (
                pytest.raises(OtlpAddressError),
                receiving([parse_address(f"{scheme}://127.0.0.1:{port}")], SpanStore()),
            ):
                pass


def test_the_tail_is_split_into_its_phases() -> None:
    fast = [(f"f{i}", 0.0, 0.1, 0.9, 1.0) for i in range(99)]
    decoded = decode_export(export(*fast, ("slow", 9.0, 0.5, 0.5, 10.0))).spans
    assert ranked(decoded, "e2e", 1)[0].request_id == "slow"
    tail, middle = time_split(decoded)
    assert tail.requests == 1 and tail.phase == "queue" and tail.queue == pytest.approx(0.9)
    assert middle.phase == "decode" and middle.decode == pytest.approx(0.9)
