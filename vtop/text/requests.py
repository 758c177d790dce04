"""`vtop requests` as text (80 columns first) and JSON."""

from __future__ import annotations

from typing import Any

from vtop.core.ingest.sources.otlp import RequestSpan
from vtop.core.session.request_view import TimeSplit

BAR_WIDTH = 16
"""Columns of the queue | prefill | decode bar."""
BAR_MARKS = (("queue", "#"), ("prefill", "="), ("decode", "-"))
"""The bar's characters, legible without colour: # queue, = prefill, - decode."""
ID_WIDTH = 22


def time_bar(span: RequestSpan, width: int = BAR_WIDTH) -> str:
    """The request's end-to-end time as a bar: # queue, = prefill, - decode, . the rest."""
    if not span.e2e_s:
        return "?".ljust(width)
    parts = {"queue": span.queue_s, "prefill": span.prefill_s, "decode": span.decode_s}
    bar = ""
    for name, mark in BAR_MARKS:
        share = max(0.0, parts[name] or 0.0) / span.e2e_s
        bar += mark * round(share * width)
    return bar[:width].ljust(width, ".")


def _s(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.1f}s"


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def requests_lines(spans: list[RequestSpan], splits: list[TimeSplit], received: str) -> list[str]:
    """The ranked requests, then where the tail's time went."""
    lines = [received, ""]
    if not spans:
        return lines
    lines.append(
        f"{'REQUEST':<{ID_WIDTH}} {'E2E':>6} {'TTFT':>6} {'#queue=prefill-decode':<{BAR_WIDTH}}"
        f" {'IN':>5} {'OUT':>5} {'MAX':>5}"
    )
    for span in spans:
        request = span.request_id
        if len(request) > ID_WIDTH:
            request = request[: ID_WIDTH - 1] + "…"
        lines.append(
            f"{request:<{ID_WIDTH}} {_s(span.e2e_s):>6} {_s(span.ttft_s):>6} {time_bar(span)}"
            f" {_n(span.prompt_tokens):>5} {_n(span.output_tokens):>5} {_n(span.max_tokens):>5}"
        )
    if splits:
        lines += ["", "WHERE THE TIME WENT (shares of end-to-end)"]
        for split in splits:
            lines.append(
                f"  {split.band} ({split.requests} request(s), mean {_s(split.e2e_s)}):"
                f" queue {split.queue:.0%}, prefill {split.prefill:.0%},"
                f" decode {split.decode:.0%}, other {split.other:.0%}"
            )
        tail = splits[0]
        lines.append(f"  the tail is {tail.phase}-bound")
    return lines


def span_json(span: RequestSpan) -> dict[str, Any]:
    """One request as JSON (seconds; null where vLLM did not send the attribute)."""
    return {
        "request_id": span.request_id,
        "trace_id": span.trace_id,
        "server": span.server,
        "arrival": span.arrival_s,
        "e2e_s": span.e2e_s,
        "ttft_s": span.ttft_s,
        "queue_s": span.queue_s,
        "prefill_s": span.prefill_s,
        "decode_s": span.decode_s,
        "inference_s": span.inference_s,
        "tpot_s": span.tpot_s,
        "prompt_tokens": span.prompt_tokens,
        "output_tokens": span.output_tokens,
        "max_tokens": span.max_tokens,
    }


def split_json(split: TimeSplit) -> dict[str, Any]:
    return {
        "band": split.band,
        "requests": split.requests,
        "mean_e2e_s": split.e2e_s,
        "queue": split.queue,
        "prefill": split.prefill,
        "decode": split.decode,
        "other": split.other,
        "phase": split.phase,
    }
