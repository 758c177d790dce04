"""Receiving vLLM's request spans beside a command (`--otlp`, or `otlp` in the settings): the
receivers open for the command's window, then a wait for the spans of its last requests."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from vtop.cli.errors import CliError
from vtop.core.config.otlp_address import OtlpAddressError, parse_address
from vtop.core.config.settings import Settings
from vtop.core.ingest.sources.otlp_receiver import SpanStore, receiving

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
