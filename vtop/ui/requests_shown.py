"""What the requests view (`R`) shows, built from the session's spans when it opens (pure,
beside `shown.py`): the requests that finished in the last REQUESTS_WINDOW_S and those that
held up others; or why there is nothing to show."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vtop.core.config.server_config import ServerConfig
from vtop.core.frame import RequestSpan
from vtop.core.session.request_findings import request_evidence
from vtop.text.requests import TURN_ON, held_up_lines

REQUESTS_WINDOW_S = 300.0
"""The requests that finished in the last five minutes."""
NOT_LISTENING = (
    "vtop is not receiving vLLM's request spans: start it with --otlp grpc://127.0.0.1:4317 "
    "(or otlp in the settings) and vLLM with --otlp-traces-endpoint 127.0.0.1:4317"
)


@dataclass(frozen=True)
class RequestsShown:
    """What the view shows: the spans of the window and what they say."""

    title: str
    """`14 request(s) finished in the last 300 s (vLLM's spans on ...)`."""
    spans: tuple[RequestSpan, ...]
    held_up: tuple[str, ...]
    """The requests that held up others (or the outliers, or that none did)."""


def build_requests(
    spans: Sequence[RequestSpan], config: ServerConfig, listening: Sequence[str], now: float
) -> RequestsShown | str:
    """The view's value, or a text saying why there is none (not listening, or no request
    finished in the window)."""
    if not listening:
        return NOT_LISTENING
    window = (now - REQUESTS_WINDOW_S, now)
    evidence = request_evidence(spans, window, listening, config)
    if not evidence.received:
        return "\n".join([f"no request finished in the last {REQUESTS_WINDOW_S:g} s", TURN_ON])
    inside = tuple(s for s in spans if window[0] <= s.end_s <= window[1])
    title = (
        f"{evidence.received} request(s) finished in the last {REQUESTS_WINDOW_S:g} s "
        f"(vLLM's spans on {', '.join(listening)})"
    )
    splits = [
        f"{split.band}: queue {split.queue:.0%}, prefill {split.prefill:.0%}, "
        f"decode {split.decode:.0%}"
        for split in evidence.splits
    ]
    return RequestsShown(title, inside, ("HELD UP", *held_up_lines(evidence), *splits))
