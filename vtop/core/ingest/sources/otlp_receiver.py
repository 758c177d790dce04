"""An OTLP trace receiver embedded in vtop: OTLP/HTTP (`/v1/traces`, protobuf or JSON) on the
standard library's threaded HTTP server, OTLP/gRPC on grpcio with opentelemetry-proto's service.

Both keep what they decode in one bounded store (the newest spans; the count of those dropped
kept), refuse an export over the size limit or of the wrong type with the protocol's own
error, cut a sender that stalls, and answer a token-less request with 401 (Unauthenticated)
when a token is set. They bind loopback unless given another host.
"""

from __future__ import annotations

import hmac
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import grpc
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from vtop.core.config.otlp_address import TRACES_PATH, OtlpAddress, OtlpAddressError
from vtop.core.frame import RequestSpan
from vtop.core.ingest.sources.otlp import (
    MAX_EXPORT_BYTES,
    Decoded,
    SpanDecodeError,
    decode_export,
    spans_of,
)

MAX_SPANS = 100_000
"""Spans kept (the newest): about 40 MB at most."""
READ_TIMEOUT_S = 10.0
"""A sender that sends nothing for this long is cut (a slow or stalled client)."""
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class SpanStore:
    """The spans received so far, the newest MAX_SPANS kept (thread-safe)."""

    def __init__(self, capacity: int = MAX_SPANS) -> None:
        self._spans: deque[RequestSpan] = deque(maxlen=capacity)
        self._fresh: deque[RequestSpan] = deque(maxlen=capacity)
        """Received since the last `drain` (a feed's next frame carries them)."""
        self._lock = threading.Lock()
        self.dropped = 0
        """Spans pushed out by newer ones."""
        self.other_spans = 0
        """Spans that were not vLLM's request spans."""
        self.refused = 0
        """Exports refused (too large, not OTLP, wrong type, no token)."""
        self.exports = 0

    def add(self, decoded: Decoded) -> None:
        with self._lock:
            overflow = len(self._spans) + len(decoded.spans) - (self._spans.maxlen or 0)
            self.dropped += max(0, overflow)
            self._spans.extend(decoded.spans)
            self._fresh.extend(decoded.spans)
            self.other_spans += decoded.other_spans
            self.exports += 1

    def refuse(self) -> None:
        with self._lock:
            self.refused += 1

    def spans(self) -> list[RequestSpan]:
        """Every span kept, oldest first."""
        with self._lock:
            return list(self._spans)

    def drain(self) -> tuple[RequestSpan, ...]:
        """The spans received since the last drain, oldest first."""
        with self._lock:
            fresh = tuple(self._fresh)
            self._fresh.clear()
            return fresh


class SpanReceiver:
    """The receivers of a feed: open from `start` until `close`, their spans drained into
    each frame (so a recording keeps them beside the scrapes of the same moments)."""

    def __init__(self, addresses: list[OtlpAddress], token: str | None = None) -> None:
        self.addresses = addresses
        self.token = token
        self.store = SpanStore()
        self.bound: list[str] = []
        self._stack = ExitStack()

    def start(self) -> list[str]:
        """Listen on every address (an OtlpAddressError when one cannot be bound)."""
        try:
            self.bound = self._stack.enter_context(
                receiving(self.addresses, self.store, self.token)
            )
        except BaseException:
            self._stack.close()
            raise
        return self.bound

    def new_spans(self) -> tuple[RequestSpan, ...]:
        """The spans received since the last call."""
        return self.store.drain()

    def close(self) -> None:
        """Stop listening."""
        self._stack.close()


def _authorised(header: str | None, token: str | None) -> bool:
    """No token set, or `Bearer <token>` (compared in constant time)."""
    if token is None:
        return True
    return header is not None and hmac.compare_digest(header, f"Bearer {token}")


def http_handler(store: SpanStore, token: str | None) -> type[BaseHTTPRequestHandler]:
    """The OTLP/HTTP handler: POST /v1/traces, protobuf or JSON, answered in kind."""

    class Handler(BaseHTTPRequestHandler):
        timeout = READ_TIMEOUT_S

        def do_POST(self) -> None:
            if urlsplit(self.path).path != TRACES_PATH:
                return self._refuse(404, f"the traces path is {TRACES_PATH}")
            if not _authorised(self.headers.get("Authorization"), token):
                return self._refuse(401, "a bearer token is required")
            kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if kind not in (PROTOBUF, JSON):
                return self._refuse(415, f"send {PROTOBUF} or {JSON}")
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                return self._refuse(411, "Content-Length is required")
            if int(length) > MAX_EXPORT_BYTES:
                return self._refuse(413, f"an export may hold {MAX_EXPORT_BYTES:,} bytes")
            try:
                body = self.rfile.read(int(length))
            except OSError:  # a sender that stalls past the read timeout, or goes away
                store.refuse()
                self.close_connection = True
                return None
            try:
                decoded = decode_export(body, json_body=kind == JSON)
            except SpanDecodeError as error:
                return self._refuse(400, str(error))
            store.add(decoded)
            answer = ExportTraceServiceResponse()
            payload = (
                json_format.MessageToJson(answer).encode()
                if kind == JSON
                else answer.SerializeToString()
            )
            self._reply(200, payload, kind)

        def _refuse(self, status: int, why: str) -> None:
            store.refuse()
            self._reply(status, why.encode(), "text/plain; charset=utf-8")
            self.close_connection = True

        def _reply(self, status: int, payload: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    """The OTLP/gRPC trace service: every export into the store."""

    def __init__(self, store: SpanStore, token: str | None) -> None:
        self.store = store
        self.token = token

    def Export(  # noqa: N802 (the service's own method name)
        self, request: ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> ExportTraceServiceResponse:
        metadata = dict(context.invocation_metadata())
        header = metadata.get("authorization")
        if not _authorised(header if isinstance(header, str) else None, self.token):
            self.store.refuse()
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "a bearer token is required")
        self.store.add(spans_of(request))
        return ExportTraceServiceResponse()


register: Callable[[TraceService, grpc.Server], None] = (
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server
)
"""opentelemetry-proto's generated registration (untyped), typed here once."""


@contextmanager
def receiving(
    addresses: list[OtlpAddress], store: SpanStore, token: str | None = None
) -> Iterator[list[str]]:
    """Listen on every address until the block ends; yield the addresses as bound (a port 0
    is given one). A port already taken is an OtlpAddressError."""
    with ExitStack() as stack:
        bound = [str(stack.enter_context(_listener(a, store, token))) for a in addresses]
        yield bound


@contextmanager
def _listener(address: OtlpAddress, store: SpanStore, token: str | None) -> Iterator[OtlpAddress]:
    start = _grpc_server if address.protocol == "grpc" else _http_server
    stop, port = start(address, store, token)
    try:
        yield OtlpAddress(address.protocol, address.host, port)
    finally:
        stop()


def _http_server(
    address: OtlpAddress, store: SpanStore, token: str | None
) -> tuple[Callable[[], None], int]:
    try:
        server = ThreadingHTTPServer((address.host, address.port), http_handler(store, token))
    except OSError as error:
        raise OtlpAddressError(f"{address}: {error.strerror or error}") from error
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="otlp-http", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return stop, int(server.server_address[1])


def _grpc_server(
    address: OtlpAddress, store: SpanStore, token: str | None
) -> tuple[Callable[[], None], int]:
    options = [
        ("grpc.max_receive_message_length", MAX_EXPORT_BYTES),
        ("grpc.so_reuseport", 0),
    ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=options)
    register(TraceService(store, token), server)
    host = f"[{address.host}]" if ":" in address.host else address.host
    try:
        port = server.add_insecure_port(f"{host}:{address.port}")
    except RuntimeError as error:
        raise OtlpAddressError(f"{address}: {error}") from error
    if port == 0:
        raise OtlpAddressError(f"{address}: could not listen (the port is taken?)")
    server.start()

    def stop() -> None:
        server.stop(grace=1.0).wait(2.0)

    return stop, port
