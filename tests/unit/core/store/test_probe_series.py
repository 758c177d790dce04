"""The canaries as `probe:*` series: the figures the path's rules read, and failure counters
that show the first failure to `increase()`."""

from __future__ import annotations

from vtop.core.frame import ProbeResult
from vtop.core.store.probe_series import BORN_AT_ZERO, ProbeCounters, figures


def canary(status: int | None, **fields: object) -> ProbeResult:
    return ProbeResult("http://proxy", "completions", 0.0, status=status, **fields)  # type: ignore[arg-type]


def failed(counters: ProbeCounters) -> dict[str, float]:
    return {
        dict(s.series.labels)["status"]: s.value
        for s in counters.samples()
        if s.series.name == "probe:failed_total"
    }


def test_a_lumped_canary_reads_as_lumped() -> None:
    lump = canary(
        200, first_byte_s=0.3, duration_s=0.31, reads=((0.3, 9000),), tokens=40, finished=True
    )
    seen = figures(lump)
    assert seen["reads_per_token"] == 1 / 40
    assert seen["first_byte_share"] is not None and seen["first_byte_share"] > 0.96
    assert seen["spread_seconds"] is not None and abs(seen["spread_seconds"] - 0.01) < 1e-9
    assert figures(canary(None, error="no answer"))["reads_per_token"] is None


def test_every_failure_counter_is_born_at_zero_so_the_first_failure_is_an_increase() -> None:
    counters = ProbeCounters()
    counters.add([canary(200, finished=True, tokens=3, reads=((0.1, 10),))])
    assert failed(counters) == dict.fromkeys(BORN_AT_ZERO, 0)
    counters.add([canary(504, error="HTTP 504: gateway timeout")])
    assert failed(counters)["504"] == 1 and failed(counters)["cut"] == 0
    counters.add([canary(429, error="HTTP 429: slow down")])
    assert failed(counters)["429"] == 1


def test_a_cut_canary_was_silent_until_the_cut() -> None:
    nothing = canary(200, duration_s=1.01, error="the stream ended without data: [DONE] (cut)")
    assert figures(nothing)["max_gap_seconds"] == 1.01
    head_then_cut = canary(200, duration_s=1.5, reads=((0.2, 120), (0.25, 300)), tokens=1)
    assert figures(head_then_cut)["max_gap_seconds"] == 1.25
    streamed = canary(200, duration_s=0.5, reads=((0.1, 10), (0.3, 10), (0.5, 10)), tokens=3)
    assert figures(streamed)["max_gap_seconds"] == 0.2
