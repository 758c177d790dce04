"""Canary requests through the front door as host-level `probe:*` series, so the path's rules
read them like metrics, beside the engine's own (the store's conversion, as for the GPUs).

Each probed URL and endpoint is one label set; the figures are the last canary's, and counters
of canaries sent and failed by status, so `increase()` over a window counts what went wrong.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from vtop.core.frame import ProbeResult, Sample, ScrapeStatus, Series, TargetScrape

PROBE_TARGET = "front-door"
"""The target the probe series are written under (read host-level, like `nvml:*`)."""
TIMEOUT_STATUSES = frozenset({"502", "504", "cut", "timeout"})
"""How a path that gives up on a silent stream ends a canary."""
BORN_AT_ZERO = ("502", "503", "504", "cut", "error", "timeout")
"""The failure counters written at 0 from a URL's first canary: a counter that appears at 1
shows no increase to `increase()`, so the first failure would go unseen."""


def failure_kind(probe: ProbeResult) -> str | None:
    """`503`, `504`, `cut` (the stream ended before [DONE]), `timeout` (no full answer in
    time), `error` (no answer at all), or None when the canary succeeded."""
    if probe.ok:
        return None
    if probe.status is not None and probe.status != 200:
        return str(probe.status)
    if probe.status == 200:
        return "cut"
    return "timeout" if probe.error.startswith("no complete answer") else "error"


class ProbeCounters:
    """Running totals of canaries per URL and endpoint (the counters are cumulative)."""

    def __init__(self) -> None:
        self.sent: Counter[tuple[str, str]] = Counter()
        self.failed: Counter[tuple[str, str, str]] = Counter()
        self.last: dict[tuple[str, str], ProbeResult] = {}

    def add(self, probes: Sequence[ProbeResult]) -> None:
        """Count the canaries that finished."""
        for probe in probes:
            key = (probe.url, probe.endpoint)
            self.sent[key] += 1
            self.last[key] = probe
            kind = failure_kind(probe)
            if kind is not None:
                self.failed[(*key, kind)] += 1

    def samples(self) -> list[Sample]:
        """Every probe series as it stands."""
        samples: list[Sample] = []
        for (url, endpoint), probe in self.last.items():
            labels = (("endpoint", endpoint), ("instance", PROBE_TARGET), ("path", url))
            samples.append(
                Sample(Series("probe:requests_total", labels), self.sent[(url, endpoint)])
            )
            for kind in sorted({kind for _, _, kind in self.failed}.union(BORN_AT_ZERO)):
                failed = tuple(sorted((*labels, ("status", kind))))
                count = self.failed[(url, endpoint, kind)]
                samples.append(Sample(Series("probe:failed_total", failed), count))
            for name, value in figures(probe).items():
                if value is not None:
                    samples.append(Sample(Series(f"probe:{name}", labels), float(value)))
        return samples

    def scrape(self) -> TargetScrape:
        """The probe series as a scrape of the front-door target, for the store."""
        types = {"probe:requests_total": "counter", "probe:failed_total": "counter"}
        return TargetScrape(
            PROBE_TARGET, ScrapeStatus.OK, samples=tuple(self.samples()), metric_types=types
        )


def figures(probe: ProbeResult) -> dict[str, float | None]:
    """The last canary's figures (seconds, counts, 0/1 flags)."""
    asked_and_missing = (
        probe.usage_asked and probe.ok and probe.tokens > 0 and probe.usage_tokens is None
    )
    return {
        "status": probe.status,
        "ok": 1.0 if probe.ok else 0.0,
        "first_byte_seconds": probe.first_byte_s,
        "first_token_seconds": probe.first_token_s,
        "duration_seconds": probe.duration_s,
        "reads": len(probe.reads),
        "tokens": probe.tokens,
        "reads_per_token": len(probe.reads) / probe.tokens if probe.tokens else None,
        "first_byte_share": _share(probe.first_byte_s, probe.duration_s),
        "spread_seconds": _spread(probe.first_byte_s, probe.duration_s),
        "bytes": probe.body_bytes,
        "max_gap_seconds": probe.max_gap_s,
        "read_gap_seconds": probe.mean_read_gap_s,
        "usage_missing": 1.0 if asked_and_missing else 0.0,
        "compressed": 1.0 if probe.header("content-encoding") else 0.0,
    }


def _share(first_byte_s: float | None, duration_s: float | None) -> float | None:
    """The part of the canary's time that passed before its first byte (held back: near 1)."""
    if first_byte_s is None or not duration_s:
        return None
    return first_byte_s / duration_s


def _spread(first_byte_s: float | None, duration_s: float | None) -> float | None:
    """Seconds from the first byte to the last (a stream in one lump: near 0)."""
    if first_byte_s is None or duration_s is None:
        return None
    return duration_s - first_byte_s
