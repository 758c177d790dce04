"""`vtop probe` as text (for people and tickets) or JSON (schema `vtop.probe/1`)."""

from __future__ import annotations

from typing import Any

from vtop.core.frame import ProbeResult
from vtop.core.ops.front_door import FrontDoor, path_time_s
from vtop.text.report import finding_lines
from vtop.text.requests import TURN_ON, span_json

SCHEMA = "vtop.probe/1"


def _s(value: float | None) -> str:
    """Seconds, compact; '-' when unknown."""
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def tokens_in_reads(probe: ProbeResult) -> str:
    """`16 tokens in 18 reads`: how the answer arrived on the socket."""
    reads = len(probe.reads)
    return f"{probe.tokens} tokens in {reads} read{'' if reads == 1 else 's'}"


def canary_line(probe: ProbeResult) -> str:
    """`completions: HTTP 200, first byte 31 ms, first token 31 ms, 16 tokens in 18 reads ...`"""
    if probe.status is None:
        return f"{probe.endpoint}: no answer ({probe.error})"
    parts = [f"{probe.endpoint}: HTTP {probe.status}"]
    if probe.status == 200:
        reads = len(probe.reads)
        tokens = max(probe.tokens, 1)
        per_token = f"{reads / tokens:.2f} reads and {probe.body_bytes / tokens:.0f} B per token"
        parts += [
            f"first byte {_s(probe.first_byte_s)}",
            f"first token {_s(probe.first_token_s)}",
            f"{tokens_in_reads(probe)} ({per_token})",
            f"longest silence {_s(probe.max_gap_s)}",
            f"done {_s(probe.duration_s)}",
        ]
        if probe.usage_in_stream is not None:
            parts.append(f"usage {'in the stream' if probe.usage_in_stream else 'MISSING'}")
    if probe.error:
        parts.append(probe.error)
    return ", ".join(parts)


def text_probe(door: FrontDoor) -> str:
    """The report."""
    lines = [f"vtop probe {door.url}", f"VERDICT: {door.verdict.upper()}", "", "CANARIES"]
    lines += [f"  {canary_line(probe)}" for probe in door.canaries]
    headers = {k: v for probe in door.canaries for k, v in probe.headers}
    if headers:
        lines.append("  headers: " + ", ".join(f"{k}: {v}" for k, v in sorted(headers.items())))
    engine = door.engine
    lines += ["", "ENGINE (vLLM's own metrics over the same window, every request in it)"]
    if engine.target is None:
        lines.append("  no vLLM metrics at the URL: give the engine's own with --engine URL")
    else:
        lines.append(
            f"  {engine.target}: mean time to first token {_s(engine.ttft_mean_s)}, "
            f"mean inter-token latency {_s(engine.itl_mean_s)}, "
            f"{engine.requests or 0:.0f} first tokens"
            + (f", {engine.rejected:.0f} rejected at admission" if engine.rejected else "")
        )
        client = [p.first_token_s for p in door.canaries if p.first_token_s is not None]
        if client and engine.ttft_mean_s:
            ratio = (sum(client) / len(client)) / engine.ttft_mean_s
            lines.append(f"  the user's first token came {ratio:.1f}x later than the engine's")
    lines += canary_span_lines(door)
    if door.unanswered is not None:
        lines += ["", f"PATH: not judged: no canary got a streamed answer: {door.unanswered}"]
    else:
        lines += [
            "",
            "PATH FINDINGS"
            if door.findings
            else "PATH: no finding (the stream reaches the client as vLLM sends it)",
        ]
    for finding in door.findings:
        lines += [f"  {line}" for line in finding_lines(finding)]
    return "\n".join(lines)


def canary_span_lines(door: FrontDoor) -> list[str]:
    """Each canary's time in the engine (vLLM's span of it) beside the client's: what the path
    added to its first token. Nothing when vtop did not listen for spans."""
    if not door.listening:
        return []
    lines = ["", f"ENGINE, CANARY BY CANARY (vLLM's spans on {', '.join(door.listening)})"]
    if not door.spans:
        return [*lines, f"  {TURN_ON}"]
    for canary in door.canaries:
        span = door.span_of(canary)
        head = f"  {canary.endpoint} {canary.request_id}: "
        if span is None:
            lines.append(head + "no span arrived for it")
            continue
        engine = (
            f"first token {_s(span.ttft_s)} in the engine (queue {_s(span.queue_s)}, "
            f"prefill {_s(span.prefill_s)})"
        )
        path = path_time_s(canary, span)
        client = f"; the client's {_s(canary.first_token_s)}: {_s(path)} on the path"
        lines.append(head + engine + (client if path is not None else ""))
    return lines


def json_probe(door: FrontDoor) -> dict[str, Any]:
    """The report as data."""
    return {
        "schema": SCHEMA,
        "url": door.url,
        "verdict": door.verdict,
        "exit_code": door.exit_code,
        "canaries": [canary_json(probe, door) for probe in door.canaries],
        "listening": list(door.listening),
        "engine": {
            "target": door.engine.target,
            "ttft_mean_s": door.engine.ttft_mean_s,
            "itl_mean_s": door.engine.itl_mean_s,
            "first_tokens": door.engine.requests,
            "rejected": door.engine.rejected,
        },
        "findings": [
            {
                "id": f.rule.id,
                "title": f.rule.title,
                "severity": f.rule.severity,
                "diagnosis": f.diagnosis,
                "evidence": f.evidence,
                "changes": [
                    {"flag": c.flag, "current": c.current, "proposed": c.proposed, "why": c.why}
                    for c in f.changes
                ],
            }
            for f in door.findings
        ],
    }


def canary_json(probe: ProbeResult, door: FrontDoor | None = None) -> dict[str, Any]:
    """One canary as data (with the engine's span of it, when one arrived)."""
    span = door.span_of(probe) if door is not None else None
    return {
        "endpoint": probe.endpoint,
        "request_id": probe.request_id or None,
        "trace_id": probe.trace_id or None,
        "engine_span": None
        if span is None
        else {**span_json(span), "path_s": path_time_s(probe, span)},
        "status": probe.status,
        "ok": probe.ok,
        "error": probe.error or None,
        "first_byte_s": probe.first_byte_s,
        "first_token_s": probe.first_token_s,
        "duration_s": probe.duration_s,
        "tokens": probe.tokens,
        "reads": len(probe.reads),
        "bytes": probe.body_bytes,
        "reads_per_token": len(probe.reads) / probe.tokens if probe.tokens else None,
        "max_silence_s": probe.max_gap_s,
        "usage_in_stream": probe.usage_in_stream,
        "read_gap_s": probe.mean_read_gap_s,
        "headers": dict(probe.headers),
        "read_times_s": [at for at, _ in probe.reads],
    }
