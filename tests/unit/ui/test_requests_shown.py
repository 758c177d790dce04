"""The requests view's value (`vtop/ui/requests_shown.py`, no app): the spans of the server on
screen when they name it, the requests it has in flight, and why nothing shows when nothing
can."""

from __future__ import annotations

from vtop.core.config.server_config import ServerConfig
from vtop.core.frame import InFlightRequest, RequestSpan
from vtop.ui.requests_shown import NOT_LISTENING, RequestsShown, build_requests

HERE, THERE = "http://10.0.0.1:8000", "http://10.0.0.2:8000"
LISTENING = ("grpc://127.0.0.1:4317",)
HOG = InFlightRequest("cmpl-hog-0", "/v1/completions", 312.0, True, 4096, 2918, 120)


def span(name: str, server: str, end: float = 100.0) -> RequestSpan:
    return RequestSpan(
        name, name, server, end - 1.0, end, 0.1, 0.2, 0.1, 0.8, 0.9, 1.0, 40, 16, 16,
    )  # fmt: skip


def shown(
    spans: list[RequestSpan], in_flight: tuple[InFlightRequest, ...] | None = None
) -> RequestsShown:
    value = build_requests(spans, ServerConfig(), LISTENING, 120.0, HERE, in_flight)
    assert isinstance(value, RequestsShown), value
    return value


def test_a_server_sees_its_own_spans_when_they_name_it() -> None:
    spans = [span("a", "10.0.0.1:8000"), span("b", "10.0.0.2:8000"), span("c", HERE)]
    assert [s.request_id for s in shown(spans).spans] == ["a", "c"]
    assert shown(spans).title.startswith("2 request(s) finished")


def test_spans_that_name_no_server_are_all_shown() -> None:
    spans = [span("a", ""), span("b", "unknown_service")]
    assert [s.request_id for s in shown(spans).spans] == ["a", "b"]


def test_only_the_last_five_minutes() -> None:
    spans = [span("old", HERE, end=-200.0), span("new", HERE)]
    assert [s.request_id for s in shown(spans).spans] == ["new"]


def test_the_requests_in_flight_show_above_the_finished_ones() -> None:
    value = shown([span("a", HERE)], in_flight=(HOG,))
    assert value.in_flight[0] == "IN FLIGHT (1 running, the oldest first)"
    assert "cmpl-hog-0" in value.in_flight[2] and "5m12s" in value.in_flight[2]
    assert "2918" in value.in_flight[2] and "4096" in value.in_flight[2]
    empty = shown([span("a", HERE)], in_flight=())
    assert empty.in_flight == ("IN FLIGHT (0 running, the oldest first)",)


def test_without_spans_the_requests_in_flight_still_show() -> None:
    value = build_requests([], ServerConfig(), (), 120.0, HERE, (HOG,))
    assert isinstance(value, RequestsShown) and value.title == NOT_LISTENING
    assert not value.spans and "cmpl-hog-0" in value.in_flight[2]


def test_with_neither_the_view_says_what_turns_each_on() -> None:
    value = build_requests([], ServerConfig(), (), 120.0, HERE, None)
    assert isinstance(value, str)
    assert "--otlp grpc://127.0.0.1:4317" in value and "vtop serve loads" in value
