"""The requests still running, as vtop's middleware in vLLM lists them: text (80 columns
first) and JSON, for `vtop requests URL`, the requests view and the diagnose report."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from vtop.core.frame import InFlightRequest
from vtop.text.fold import cut

ID_WIDTH = 30
LISTED_AT_MOST = 10
"""Requests a text lists, the oldest first; the rest counted."""
NOT_LISTED = (
    "requests in flight: not listed by this server (vtop serve loads vtop's middleware into "
    "the vLLM it starts, unless --no-in-flight; a server started with --api-key lists them "
    "to the same key: VLLM_API_KEY)"
)


def age(seconds: float) -> str:
    """`850ms`, `42s`, `5m12s`, `2h03m`."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def in_flight_cells(request: InFlightRequest) -> list[str]:
    """One request's cells: id (cut to ID_WIDTH), age, events streamed (`-` when not
    streamed), max_tokens, path."""
    return [
        cut(request.request_id, ID_WIDTH),
        age(request.age_s),
        str(request.events) if request.stream else "-",
        "?" if request.max_tokens is None else str(request.max_tokens),
        request.path,
    ]


def in_flight_lines(requests: Sequence[InFlightRequest] | None) -> list[str]:
    """The requests running now, the oldest first (at most LISTED_AT_MOST), or why none are
    listed."""
    if requests is None:
        return [NOT_LISTED]
    title = f"IN FLIGHT ({len(requests)} running, the oldest first)"
    if not requests:
        return [title]
    lines = [
        title,
        f"{'REQUEST':<{ID_WIDTH}} {'AGE':>6} {'STREAMED':>8} {'MAX':>6}  PATH",
    ]
    for request in requests[:LISTED_AT_MOST]:
        request_id, running, streamed, most, path = in_flight_cells(request)
        lines.append(f"{request_id:<{ID_WIDTH}} {running:>6} {streamed:>8} {most:>6}  {path}")
    if len(requests) > LISTED_AT_MOST:
        lines.append(f"... and {len(requests) - LISTED_AT_MOST} more")
    lines.append("STREAMED: events sent so far, about a token each")
    return lines


def in_flight_json(request: InFlightRequest) -> dict[str, Any]:
    """One request in flight as JSON (its fields, by their names)."""
    return dataclasses.asdict(request)
