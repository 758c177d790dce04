"""The requests a vLLM has in flight, from vtop's middleware in its API server
(GET /vtop/inflight, `vtop.core.manage.vtop_inflight`): asked beside each scrape, bounded in
time and bytes; a server that does not list them is asked again only after it restarts."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import httpx

from vtop.core.frame import InFlightRequest
from vtop.core.ingest.sources.bounded_http import BodyError, DeadlineError, bounded_get

IN_FLIGHT_PATH = "/vtop/inflight"
SCHEMA = "vtop.inflight/1"
MAX_IN_FLIGHT_BYTES = 1024 * 1024
"""The middleware lists at most 1,000 requests of a few hundred bytes each."""
IN_FLIGHT_TIMEOUT_S = 2.0


class NotListed(enum.Enum):
    """The server answered, but not with vtop's list: it does not load the middleware."""

    NOT_LISTED = "not listed"


Listing = tuple[InFlightRequest, ...] | NotListed | None
"""The requests in flight; NOT_LISTED; or None when the ask failed (asked again next time)."""


async def ask_in_flight(
    client: httpx.AsyncClient, base_url: str, headers: dict[str, str], timeout_s: float
) -> Listing:
    """The server's requests in flight, oldest first."""
    try:
        response = await bounded_get(
            client,
            base_url + IN_FLIGHT_PATH,
            headers,
            min(timeout_s, IN_FLIGHT_TIMEOUT_S),
            MAX_IN_FLIGHT_BYTES,
        )
    except (httpx.HTTPError, DeadlineError, BodyError):
        return None
    if response.status_code != 200:
        return NotListed.NOT_LISTED if response.status_code in (404, 405) else None
    try:
        return read_in_flight(json.loads(response.content))
    except ValueError:
        return NotListed.NOT_LISTED


def read_in_flight(document: Any) -> tuple[InFlightRequest, ...]:
    """The list's requests (ValueError: not vtop's list, or a field of the wrong type)."""
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise ValueError("not vtop's in-flight list")
    requests = document.get("requests")
    if not isinstance(requests, list):
        raise ValueError("requests is not a list")
    return tuple(_request(item) for item in requests)


def _request(item: Any) -> InFlightRequest:
    if not isinstance(item, dict):
        raise ValueError("a request is not an object")
    max_tokens = item.get("max_tokens")
    return InFlightRequest(
        request_id=_text(item.get("request_id")),
        path=_text(item.get("path")),
        age_s=_number(item.get("age_s")),
        stream=item.get("stream") is True,
        max_tokens=None if max_tokens is None else int(_number(max_tokens)),
        events=int(_number(item.get("events"))),
        body_bytes=int(_number(item.get("body_bytes"))),
    )


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("a text field is not a string")
    return value[:200]


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError("a figure is not a finite number")
    if value < 0:
        raise ValueError("a figure is negative")
    return float(value)
