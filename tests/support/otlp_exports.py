"""OTLP trace exports as vLLM's exporter builds them (vllm/tracing/utils.py's attribute names),
for the receiver's and the feeds' tests."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

TRACE_ID = bytes(range(16))


def attribute(key: str, value: str | int | float) -> KeyValue:
    if isinstance(value, str):
        return KeyValue(key=key, value=AnyValue(string_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(double_value=value))


def export(*requests: tuple[str, float, float, float, float], other: int = 0) -> bytes:
    """An export as vLLM's exporter builds it: one `llm_request` span per (id, queue, prefill,
    decode, e2e), vLLM's attribute names (vllm/tracing/utils.py), and `other` foreign spans."""
    message = ExportTraceServiceRequest()
    resource = message.resource_spans.add()
    resource.resource.attributes.append(attribute("service.name", "vllm-a"))
    scope = resource.scope_spans.add()
    for request_id, queue, prefill, decode, e2e in requests:
        span = scope.spans.add()
        span.name = "llm_request"
        span.trace_id = TRACE_ID
        span.span_id = bytes(8)
        span.start_time_unix_nano = 1_700_000_000_000_000_000
        span.end_time_unix_nano = span.start_time_unix_nano + int(e2e * 1e9)
        span.attributes.extend(
            [
                attribute("gen_ai.request.id", request_id),
                attribute("gen_ai.latency.time_in_queue", queue),
                attribute("gen_ai.latency.time_in_model_prefill", prefill),
                attribute("gen_ai.latency.time_in_model_decode", decode),
                attribute("gen_ai.latency.time_to_first_token", queue + prefill),
                attribute("gen_ai.latency.e2e", e2e),
                attribute("gen_ai.usage.prompt_tokens", 800),
                attribute("gen_ai.usage.completion_tokens", 33),
                attribute("gen_ai.request.max_tokens", 64),
            ]
        )
    for _ in range(other):
        scope.spans.add().name = "something_else"
    return message.SerializeToString()
