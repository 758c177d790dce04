"""The flags `vtop serve --otlp ADDR` gives the vLLM it starts: its span exporter pointed at
vtop's own receiver, over gRPC or over HTTP with the protocol vLLM's exporter needs for it."""

from __future__ import annotations

from vtop.cli.spans import HTTP_PROTOCOL_ENV, vllm_tracing
from vtop.core.config.settings import Settings


def test_vllm_exports_its_spans_to_the_first_receiver() -> None:
    assert vllm_tracing(Settings()) == ([], {})
    grpc = vllm_tracing(Settings(otlp=("grpc://127.0.0.1:4317", "http://127.0.0.1:4318")))
    assert grpc == (["--otlp-traces-endpoint", "127.0.0.1:4317"], {})
    flags, env = vllm_tracing(Settings(otlp=("http://0.0.0.0:4318",)))
    assert flags == ["--otlp-traces-endpoint", "http://127.0.0.1:4318/v1/traces"]
    assert env == {HTTP_PROTOCOL_ENV: "http/protobuf"}
