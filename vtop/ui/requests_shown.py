"""What the requests view (`R`) shows, built from the session's spans and the last scrape's
requests in flight when it opens (pure, beside `shown.py`): the requests running now, those
that finished in the last REQUESTS_WINDOW_S and those that held up others; or why there is
nothing to show."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vtop.core.config.server_config import ServerConfig
from vtop.core.frame import InFlightRequest, RequestSpan
from vtop.core.session.request_findings import request_evidence
from vtop.core.session.request_view import spans_of_server
from vtop.text.in_flight import in_flight_lines
from vtop.text.requests import TURN_ON, held_up_lines

REQUESTS_WINDOW_S = 300.0
"""The requests that finished in the last five minutes."""
NOT_LISTENING = (
    "vtop is not receiving vLLM's request spans: start it with --otlp grpc://127.0.0.1:4317 "
    "(or otlp in the settings) and vLLM with --otlp-traces-endpoint 127.0.0.1:4317"
)


@dataclass(frozen=True)
class RequestsShown:
    """What the view shows: the requests in flight, the spans of the window and what they
    say."""

    title: str
    """`14 request(s) finished in the last 300 s (vLLM's spans on ...)`."""
    spans: tuple[RequestSpan, ...]
    held_up: tuple[str, ...]
    """The requests that held up others (or the outliers, or that none did)."""
    in_flight: tuple[str, ...] = ()
    """The requests running now, as vtop's middleware lists them (or that it is not loaded)."""


def build_requests(
    spans: Sequence[RequestSpan],
    config: ServerConfig,
    listening: Sequence[str],
    now: float,
    target: str,
    in_flight: Sequence[InFlightRequest] | None = None,
) -> RequestsShown | str:
    """The view's value for `target` (its own spans when they name it), or a text saying why
    there is nothing to show (neither spans nor a list of the requests in flight)."""
    running = tuple(in_flight_lines(in_flight))
    if not listening:
        if in_flight is None:
            return "\n".join([NOT_LISTENING, *running])
        return RequestsShown(NOT_LISTENING, (), (), running)
    window = (now - REQUESTS_WINDOW_S, now)
    own = spans_of_server(list(spans), target)
    evidence = request_evidence(own, window, listening, config)
    if not evidence.received:
        nothing = [f"no request finished in the last {REQUESTS_WINDOW_S:g} s", TURN_ON]
        if in_flight is None:
            return "\n".join([*nothing, *running])
        return RequestsShown(nothing[0], (), (), running)
    title = (
        f"{evidence.received} request(s) finished in the last {REQUESTS_WINDOW_S:g} s "
        f"(vLLM's spans on {', '.join(listening)})"
    )
    splits = [
        f"{split.band}: queue {split.queue:.0%}, prefill {split.prefill:.0%}, "
        f"decode {split.decode:.0%}"
        for split in evidence.splits
    ]
    held_up = ("HELD UP", *held_up_lines(evidence), *splits)
    inside = tuple(s for s in own if window[0] <= s.end_s <= window[1])
    return RequestsShown(title, inside, held_up, running if in_flight is not None else ())
