"""vLLM's per-request spans, decoded from an OTLP trace export (protobuf or JSON).

Started with `--otlp-traces-endpoint`, vLLM exports one `llm_request` span per finished request
(vllm/v1/engine/output_processor.py, `do_tracing`): its arrival as the span's start, and as
attributes its time in queue, time to first token, prefill, decode and inference time,
end-to-end latency, prompt and completion tokens, the request id (the client's X-Request-Id
where given) and its sampling parameters. Decoding is opentelemetry-proto's (the maintained
messages); what vtop adds is the reading of those attributes and the bounds on hostile input.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from vtop.core.frame import RequestSpan

SPAN_NAME = "llm_request"
MAX_EXPORT_BYTES = 4 * 1024 * 1024
"""The largest export accepted (gRPC's default message limit; OpenTelemetry's batch exporter
sends at most 512 spans at a time, far below it)."""
ATTRIBUTES = {
    "queue_s": "gen_ai.latency.time_in_queue",
    "ttft_s": "gen_ai.latency.time_to_first_token",
    "prefill_s": "gen_ai.latency.time_in_model_prefill",
    "decode_s": "gen_ai.latency.time_in_model_decode",
    "inference_s": "gen_ai.latency.time_in_model_inference",
    "e2e_s": "gen_ai.latency.e2e",
}
"""RequestSpan's timings by vLLM's attribute names (vllm/tracing/utils.py, SpanAttributes)."""
REQUEST_ID = "gen_ai.request.id"
PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
OUTPUT_TOKENS = "gen_ai.usage.completion_tokens"
MAX_TOKENS = "gen_ai.request.max_tokens"
SERVER_KEYS = ("vtop.server", "service.instance.id", "service.name")
"""Resource attributes naming the server a span came from, the first present wins: set
OTEL_RESOURCE_ATTRIBUTES=vtop.server=HOST:PORT on each vLLM to attribute its spans."""


class SpanDecodeError(ValueError):
    """An export that is not an OTLP trace request (the text says why)."""


@dataclass(frozen=True)
class Decoded:
    """What one export held: vLLM's request spans, and how many other spans it carried."""

    spans: list[RequestSpan]
    other_spans: int


def decode_export(body: bytes, json_body: bool = False) -> Decoded:
    """The request spans of an OTLP/HTTP or gRPC export body (JSON with `json_body`)."""
    if len(body) > MAX_EXPORT_BYTES:
        raise SpanDecodeError(f"export of {len(body):,} bytes, over {MAX_EXPORT_BYTES:,}")
    request = ExportTraceServiceRequest()
    try:
        if json_body:
            document = json.loads(body.decode("utf-8"))
            json_format.ParseDict(_ids_as_base64(document), request, ignore_unknown_fields=True)
        else:
            request.ParseFromString(body)
    except (
        DecodeError,
        json_format.ParseError,
        UnicodeDecodeError,
        RecursionError,
        ValueError,
        TypeError,
    ) as error:
        raise SpanDecodeError(f"not an OTLP trace export: {_short(error)}") from error
    return spans_of(request)


ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _ids_as_base64(document: object) -> dict[str, Any]:
    """OTLP/JSON writes trace and span ids as hex, where protobuf's JSON mapping (which
    json_format reads) has base64: the spans' and links' ids rewritten."""
    if not isinstance(document, dict):
        raise SpanDecodeError("not an OTLP trace export: not a JSON object")
    for resource in _list(document.get("resourceSpans")):
        for scope in _list(_dict(resource).get("scopeSpans")):
            for span in _list(_dict(scope).get("spans")):
                for item in (span, *_list(_dict(span).get("links"))):
                    _rewrite_ids(_dict(item))
    return document


def _rewrite_ids(item: dict[str, object]) -> None:
    for field in ID_FIELDS:
        value = item.get(field)
        if isinstance(value, str) and value:
            item[field] = base64.b64encode(bytes.fromhex(value)).decode("ascii")


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def spans_of(request: ExportTraceServiceRequest) -> Decoded:
    """vLLM's `llm_request` spans of a decoded export, with their server."""
    found: list[RequestSpan] = []
    others = 0
    for resource_spans in request.resource_spans:
        server = _server(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if span.name != SPAN_NAME:
                    others += 1
                    continue
                found.append(_request_span(span, server))
    return Decoded(found, others)


def _request_span(span: Span, server: str) -> RequestSpan:
    attributes = _values(span.attributes)
    timings = {field: _float(attributes.get(key)) for field, key in ATTRIBUTES.items()}
    trace_id = span.trace_id.hex()
    return RequestSpan(
        request_id=str(attributes.get(REQUEST_ID) or trace_id),
        trace_id=trace_id,
        server=server,
        arrival_s=span.start_time_unix_nano / 1e9,
        end_s=span.end_time_unix_nano / 1e9,
        prompt_tokens=_int(attributes.get(PROMPT_TOKENS)),
        output_tokens=_int(attributes.get(OUTPUT_TOKENS)),
        max_tokens=_int(attributes.get(MAX_TOKENS)),
        **timings,
    )


def _server(attributes: Iterable[KeyValue]) -> str:
    values = _values(attributes)
    return next((str(values[key]) for key in SERVER_KEYS if values.get(key)), "")


def _values(attributes: Iterable[KeyValue]) -> Mapping[str, object]:
    """Attribute values by key (scalars only: vLLM sends no arrays or maps)."""
    return {kv.key: _scalar(kv.value) for kv in attributes}


def _scalar(value: AnyValue) -> object:
    kind = value.WhichOneof("value")
    if kind in ("string_value", "bool_value", "int_value", "double_value"):
        return getattr(value, kind)
    return None


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    as_float = float(value)
    return as_float if as_float == as_float and abs(as_float) != float("inf") else None


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if value == value and abs(value) != float("inf") else None


def _short(error: Exception) -> str:
    text = str(error) or type(error).__name__
    return text if len(text) <= 120 else text[:119] + "…"
