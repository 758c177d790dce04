"""Where vtop listens for vLLM's request spans: an OTLP address, `grpc://HOST:PORT` or
`http://HOST:PORT` (path /v1/traces), loopback unless a host is given. Parsed here so a
settings file's `otlp` is checked, with its file and line, before anything listens."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

TRACES_PATH = "/v1/traces"


class OtlpAddressError(ValueError):
    """An --otlp address vtop cannot listen on (the text says why)."""


@dataclass(frozen=True)
class OtlpAddress:
    """Where to listen: `grpc://HOST:PORT` or `http://HOST:PORT`."""

    protocol: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.protocol}://{host}:{self.port}"


def parse_address(text: str) -> OtlpAddress:
    """An --otlp value: `grpc://` or `http://`, a host (127.0.0.1 when left out), a port."""
    parts = urlsplit(text if "://" in text else f"grpc://{text}")
    if parts.scheme not in ("grpc", "http"):
        raise OtlpAddressError(f"{text}: the scheme must be grpc:// or http://")
    try:
        port = parts.port
    except ValueError as error:
        raise OtlpAddressError(f"{text}: {error}") from error
    if port is None:
        raise OtlpAddressError(f"{text}: give a port (OTLP's are 4317 for gRPC, 4318 for HTTP)")
    if parts.path not in ("", "/", TRACES_PATH):
        raise OtlpAddressError(f"{text}: the HTTP receiver's path is {TRACES_PATH}")
    return OtlpAddress(parts.scheme, parts.hostname or "127.0.0.1", port)
