"""Which requests made others wait, from request spans shaped as vLLM's scheduler makes them:
head-of-line blocking by long prompts prefilled in chunks, slot hogs running to max_tokens,
and neither where the waits have another cause."""

from __future__ import annotations

from vtop.core.frame import RequestSpan
from vtop.core.session.request_findings import triage_requests
from vtop.core.status import Status

STEP = 0.02
"""A decode step of these requests (their time per output token)."""


def span(
    name: str,
    queued: float,
    scheduled: float,
    first_token: float,
    end: float,
    prompt: int = 40,
    output: int = 16,
    max_tokens: int = 16,
) -> RequestSpan:
    """A request as vLLM's span tells it, from its moments on the engine's clock."""
    decode = end - first_token
    return RequestSpan(
        request_id=name,
        trace_id=name,
        server="",
        arrival_s=queued,
        end_s=end,
        queue_s=scheduled - queued,
        ttft_s=first_token - queued,
        prefill_s=first_token - scheduled,
        decode_s=decode,
        inference_s=end - scheduled,
        e2e_s=end - queued,
        prompt_tokens=prompt,
        output_tokens=output,
        max_tokens=max_tokens,
    )


def quick(name: str, at: float) -> RequestSpan:
    """A short request nothing held up: scheduled at once, 16 tokens a step apart."""
    return span(name, at, at + 0.001, at + 0.03, at + 0.03 + 15 * STEP)


def test_short_requests_behind_chunked_long_prompts_are_head_of_line_blocked() -> None:
    # two 800-token prompts on a 64-token budget, prefilled one after the other for 1 s each;
    # six short requests arrive during the first and are scheduled in its last chunk's step
    long = [
        span("long-a", 0.0, 0.0, 1.0, 1.5, prompt=800),
        span("long-b", 0.0, 1.0, 2.0, 2.5, prompt=800),
    ]
    victims = [span(f"short-{i}", 0.1 * i, 0.98, 1.0, 1.3) for i in range(1, 7)]
    calm = [quick(f"calm-{i}", 3.0 + i) for i in range(6)]
    found = triage_requests(long + victims + calm, budget=64)
    (finding,) = found.findings
    assert finding.kind == "head-of-line" and finding.severity is Status.WARNING
    assert [s.request_id for s in finding.culprits] == ["long-a", "long-b"]
    assert {s.request_id for s in finding.victims} <= {f"short-{i}" for i in range(1, 7)}
    assert len(finding.victims) == 5 and finding.title.startswith("6 short request(s)")
    assert finding.changes[0] == "--long-prefill-token-threshold 24"  # 64 less 40 tokens
    assert finding.covered > 0.9 and not found.outliers


def test_the_threshold_is_said_to_need_the_budget_when_it_is_unknown() -> None:
    long = [span("long-a", 0.0, 0.0, 1.0, 1.5, prompt=800)]
    victims = [span(f"short-{i}", 0.1 * i, 0.98, 1.0, 1.3) for i in range(1, 7)]
    calm = [quick(f"calm-{i}", 3.0 + i) for i in range(6)]
    unknown = triage_requests(long + victims + calm).findings[0].changes
    assert unknown[0].startswith("--long-prefill-token-threshold N") and "unknown" in unknown[0]
    context = triage_requests(long + victims + calm, max_model_len=4096).findings[0].changes
    assert context[0].startswith("--long-prefill-token-threshold 163 (4% of the context")


def test_generations_to_max_tokens_holding_the_slots_are_slot_hogs() -> None:
    # two slots, both running 300-token generations for 10 s; requests queue behind them and
    # are scheduled as the first one ends
    hogs = [
        span("hog-a", 0.0, 0.0, 0.05, 10.0, output=300, max_tokens=300),
        span("hog-b", 0.0, 0.0, 0.05, 10.4, output=300, max_tokens=300),
    ]
    victims = [span(f"wait-{i}", 1.0 + i, 10.01, 10.05, 10.35) for i in range(5)]
    calm = [quick(f"calm-{i}", 11.0 + i) for i in range(8)]
    found = triage_requests(hogs + victims + calm, cap=2)
    (finding,) = found.findings
    assert finding.kind == "slot-hog" and [s.request_id for s in finding.culprits] == [
        "hog-b",
        "hog-a",
    ]
    assert len(finding.victims) == 5 and finding.covered > 0.9
    assert finding.changes[0].startswith("max_tokens <= 32 at the gateway")
    assert "max_num_seqs is 2" in finding.why


def test_a_queue_for_slots_among_equal_requests_blames_no_request() -> None:
    # every request alike (no long prompt, none run to a far longer end): waits, no culprit
    same = [span(f"r-{i}", 0.1 * i, 0.5 * i, 0.5 * i + 0.03, 0.5 * i + 0.5) for i in range(12)]
    found = triage_requests(same, budget=64, cap=1)
    assert found.findings == () and found.outliers == ()


def test_a_wait_the_long_prefills_do_not_cover_is_not_head_of_line() -> None:
    # a long prompt prefilled in one step early on; the short requests wait much later, for
    # something else (a full KV cache): no head-of-line blocking
    long = [span("long-a", 0.0, 0.0, 0.05, 0.4, prompt=800)]
    waiting = [span(f"short-{i}", 2.0 + 0.1 * i, 4.0, 4.03, 4.3) for i in range(6)]
    calm = [quick(f"calm-{i}", 5.0 + i) for i in range(6)]
    found = triage_requests(long + waiting + calm, budget=1024)
    assert all(f.kind != "head-of-line" for f in found.findings)


def test_a_slow_request_nothing_explains_is_listed_never_hidden() -> None:
    calm = [quick(f"calm-{i}", float(i)) for i in range(8)]
    odd = span("odd", 9.0, 9.001, 9.03, 14.0, output=16, max_tokens=512)
    found = triage_requests([*calm, odd])
    assert found.findings == () and [s.request_id for s in found.outliers] == ["odd"]


def test_slots_counted_from_the_spans_allow_for_the_two_clocks() -> None:
    # the cap unknown; vLLM's API server hears of a hog's end a little after the engine
    # schedules the next request, so a victim seems to start just before the slot it takes
    # frees: still two slots, never three
    hogs = [
        span("hog-a", 0.0, 0.0, 0.05, 10.0, output=300, max_tokens=300),
        span("hog-b", 0.0, 0.0, 0.05, 10.4, output=300, max_tokens=300),
    ]
    victims = [  # each takes the slot a request frees, 10 ms before that request's end
        span("wait-0", 1.0, 9.99, 10.02, 10.3),
        span("wait-1", 2.0, 10.29, 10.32, 10.6),
        span("wait-2", 3.0, 10.39, 10.42, 10.7),
    ]
    calm = [quick(f"calm-{i}", 11.0 + i) for i in range(8)]
    (finding,) = triage_requests(hogs + victims + calm).findings
    assert finding.changes[1].startswith("--max-num-seqs above 2,"), finding.changes
    assert "unknown (2 ran at once at most" in finding.why
