"""`vtop requests` as text (80 columns first) and JSON."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from vtop.core.frame import RequestSpan
from vtop.core.session.request_findings import (
    RequestEvidence,
    RequestFinding,
    timeline,
    waited_behind,
)
from vtop.core.session.request_view import TimeSplit
from vtop.text.fold import cut

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
        request, e2e, ttft, bar, prompt, output, most = row_cells(span)
        lines.append(
            f"{request:<{ID_WIDTH}} {e2e:>6} {ttft:>6} {bar} {prompt:>5} {output:>5} {most:>5}"
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


def row_cells(span: RequestSpan) -> list[str]:
    """One request's cells: id (cut to ID_WIDTH), e2e, TTFT, the time bar, prompt, output and
    max tokens."""
    return [
        cut(span.request_id, ID_WIDTH),
        _s(span.e2e_s),
        _s(span.ttft_s),
        time_bar(span),
        _n(span.prompt_tokens),
        _n(span.output_tokens),
        _n(span.max_tokens),
    ]


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
    """One band of the time split as JSON."""
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


TURN_ON = (
    "no request span arrived: start vLLM with --otlp-traces-endpoint pointed here "
    "(gRPC: --otlp-traces-endpoint HOST:PORT; HTTP: "
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf and http://HOST:PORT/v1/traces); "
    "its exporter sends every 5 s, so give a window longer than that"
)
"""What to do when no span arrived (the flag and the variable that turn them on)."""


def _named(span: RequestSpan, what: str) -> str:
    """`cmpl-7 (812 tokens, prefill 1.2s)`."""
    return f"{span.request_id} ({what})"


def finding_lines(finding: RequestFinding) -> list[str]:
    """One request finding: what, the culprits and the victims by id, the fix, why."""
    lines = [f"  [{finding.severity.upper()}] {finding.kind}: {finding.title}"]
    if finding.kind == "head-of-line":
        culprits = [
            _named(s, f"{_n(s.prompt_tokens)} tokens, prefill {_s(s.prefill_s)}")
            for s in finding.culprits
        ]
        lines.append(f"    long prompts: {', '.join(culprits)}")
    else:
        culprits = [
            _named(s, f"{_n(s.output_tokens)}/{_n(s.max_tokens)} tokens, {_s(s.e2e_s)}")
            for s in finding.culprits
        ]
        lines.append(f"    held the slots: {', '.join(culprits)}")
    victims = [_named(s, f"queued {_s(s.queue_s)}") for s in finding.victims]
    lines.append(f"    waited behind them: {', '.join(victims)}")
    lines.append(f"    their wait covered by it: {finding.covered:.0%}")
    lines += [f"    suggest: {change}" for change in finding.changes]
    lines.append(f"    why: {finding.why}")
    return lines


def evidence_lines(evidence: RequestEvidence) -> list[str]:
    """The REQUESTS section of a diagnosis: what the spans show, or how to turn them on."""
    where = ", ".join(evidence.listening)
    if not evidence.received:
        return ["", f"REQUESTS (vLLM's spans, on {where})", f"  {TURN_ON}"]
    lines = ["", f"REQUESTS ({evidence.received} finished in the window; vLLM's spans on {where})"]
    for split in evidence.splits:
        lines.append(
            f"  {split.band} ({split.requests}, mean {_s(split.e2e_s)}): queue {split.queue:.0%},"
            f" prefill {split.prefill:.0%}, decode {split.decode:.0%}"
        )
    return lines + held_up_lines(evidence)


def held_up_lines(evidence: RequestEvidence) -> list[str]:
    """The request findings, the outliers no finding explains, or that no request held up
    another."""
    lines: list[str] = []
    for finding in evidence.triage.findings:
        lines += finding_lines(finding)
    if evidence.triage.outliers:
        slow = [_named(s, f"e2e {_s(s.e2e_s)}") for s in evidence.triage.outliers]
        lines.append(f"  slow, matching no known cause: {', '.join(slow)}")
    if not evidence.triage.findings:
        lines.append("  no request held up others (no head-of-line blocking, no slot hog)")
    return lines


REQUESTS_WINDOW_S = 300.0
"""The dashboard's requests view: the requests that finished in the last five minutes."""
NOT_LISTENING = (
    "vtop is not receiving vLLM's request spans: start it with --otlp grpc://127.0.0.1:4317 "
    "(or otlp in the settings) and vLLM with --otlp-traces-endpoint 127.0.0.1:4317"
)


def finding_json(finding: RequestFinding) -> dict[str, Any]:
    """One request finding as JSON."""
    return {
        "kind": finding.kind,
        "severity": finding.severity,
        "title": finding.title,
        "culprits": [span_json(span) for span in finding.culprits],
        "victims": [span_json(span) for span in finding.victims],
        "covered": finding.covered,
        "changes": list(finding.changes),
        "why": finding.why,
    }


def evidence_json(evidence: RequestEvidence) -> dict[str, Any]:
    """The `requests` section of a diagnosis's JSON."""
    return {
        "listening": list(evidence.listening),
        "received": evidence.received,
        "dropped": evidence.dropped,
        "refused": evidence.refused,
        "time_split": [split_json(split) for split in evidence.splits],
        "findings": [finding_json(finding) for finding in evidence.triage.findings],
        "outliers": [span_json(span) for span in evidence.triage.outliers],
        "slowest": [span_json(span) for span in evidence.slowest],
    }


def timeline_lines(span: RequestSpan, spans: Sequence[RequestSpan]) -> list[str]:
    """One request's story: when it arrived, waited, was scheduled, produced its first token
    and ended (seconds from its arrival), and the requests that ran while it waited."""
    lines = [
        f"{span.request_id}",
        f"  prompt {_n(span.prompt_tokens)} tokens, output {_n(span.output_tokens)} of "
        f"max {_n(span.max_tokens)}; server {span.server or '?'}",
        f"  +0.00s   arrived ({time.strftime('%H:%M:%S', time.gmtime(span.arrival_s))}Z)",
    ]
    moment = timeline(span)
    if moment is None:
        return [*lines, "  (vLLM did not send its queue, prefill and first-token times)"]
    start = span.arrival_s

    def at(when: float) -> str:
        return f"  +{when - start:.2f}s".ljust(11)

    lines += [
        f"{at(moment.queued)}queued in the engine",
        f"{at(moment.scheduled)}scheduled, after {_s(span.queue_s)} in the queue",
        f"{at(moment.first_token)}first token, after {_s(span.prefill_s)} of prefill "
        f"(TTFT {_s(span.ttft_s)})",
        f"{at(moment.ended)}ended, after {_s(span.decode_s)} of decode (e2e {_s(span.e2e_s)})",
    ]
    behind = waited_behind(span, spans)
    if not behind:
        return [*lines, "", "  it waited behind no request the spans show"]
    lines += ["", f"  while it waited, {len(behind)} request(s) ran (longest overlap first):"]
    for other, overlap in behind[:WAITED_BEHIND_LISTED]:
        lines.append(
            f"    {other.request_id}: {_s(overlap)} of its wait; prompt "
            f"{_n(other.prompt_tokens)}, output {_n(other.output_tokens)}/{_n(other.max_tokens)}"
        )
    return lines


WAITED_BEHIND_LISTED = 10
