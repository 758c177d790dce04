"""Receiving vLLM's request spans beside a command (`--otlp`, or `otlp` in the settings): a
feed that carries them in its frames (the dashboard, `record`, `serve`), or receivers open for
a one-shot command's window and a wait for its last requests' spans (`diagnose`, `probe`); and
the flags that point a vLLM vtop starts at them."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vtop.cli.errors import CliError
from vtop.core.config.otlp_address import TRACES_PATH, OtlpAddressError, parse_address
from vtop.core.config.settings import Settings
from vtop.core.ingest.feeds import Feed
from vtop.core.ingest.open_feed import open_feed

if TYPE_CHECKING:
    from vtop.core.ingest.sources.otlp_receiver import SpanStore

SPANS_AFTER_S = 5.5
"""How long a diagnosis that receives spans waits after its window: vLLM's batch exporter
sends every 5 s (OpenTelemetry's default schedule), so the last requests' spans come later."""


@contextlib.contextmanager
def listening_for_spans(
    command: str, settings: Settings, path: Path | None, spans: SpanStore
) -> Iterator[list[str]]:
    """The OTLP receivers of the settings' `otlp` addresses, open for the window (none when
    there are none); a recording holds no spans, so it is refused with them."""
    if not settings.otlp:
        yield []
        return
    if path is not None:
        raise CliError("--otlp receives vLLM's spans live: a recording holds none")
    from vtop.core.ingest.sources.otlp_receiver import receiving  # grpcio: only when listening

    try:
        addresses = [parse_address(text) for text in settings.otlp]
        with receiving(addresses, spans, settings.otlp_token) as bound:
            yield bound
    except OtlpAddressError as error:
        raise CliError(f"{command}: --otlp {error}") from error


def wait_for_last_spans(command: str, what: str) -> None:
    """Wait SPANS_AFTER_S for the spans of `what`, said on stderr."""
    print(
        f"{command}: waiting {SPANS_AFTER_S:g} s for the spans of {what} "
        "(vLLM exports them in batches)",
        file=sys.stderr,
        flush=True,
    )
    time.sleep(SPANS_AFTER_S)


def open_feed_with_spans(settings: Settings, **kwargs: Any) -> Feed:
    """`open_feed`, listening for vLLM's spans on the settings' `otlp` addresses (a port that
    cannot be bound is a usage error, said in one line)."""
    try:
        return open_feed(settings, spans=True, **kwargs)
    except OtlpAddressError as error:
        raise CliError(f"--otlp {error}") from error


def vllm_tracing(
    settings: Settings, server: str, environ: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The `vllm serve` flags and environment that point vLLM's span exporter at the first of
    the settings' receivers (gRPC: HOST:PORT; HTTP: its /v1/traces URL and the protocol), its
    spans named by `server` (HOST:PORT, the resource attribute vtop attributes spans by,
    after any the environment already sets)."""
    if not settings.otlp:
        return [], {}
    from vtop.core.ingest.sources.otlp import SERVER_KEYS  # protobuf: only with spans

    address = parse_address(settings.otlp[0])
    host = "127.0.0.1" if address.host in ("0.0.0.0", "::") else address.host
    named = ",".join(
        part for part in (environ.get(RESOURCE_ENV, ""), f"{SERVER_KEYS[0]}={server}") if part
    )
    if address.protocol == "http":
        endpoint = f"http://{host}:{address.port}{TRACES_PATH}"
        env = {HTTP_PROTOCOL_ENV: "http/protobuf", RESOURCE_ENV: named}
        return ["--otlp-traces-endpoint", endpoint], env
    return ["--otlp-traces-endpoint", f"{host}:{address.port}"], {RESOURCE_ENV: named}


HTTP_PROTOCOL_ENV = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
RESOURCE_ENV = "OTEL_RESOURCE_ATTRIBUTES"
