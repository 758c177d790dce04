"""Which requests were slow, and where their time went: vLLM's request spans ranked, and the
tail decomposed into queue, prefill and decode from the requests themselves."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from vtop.core.frame import RequestSpan

SORTS: dict[str, Callable[[RequestSpan], float | None]] = {
    "e2e": lambda s: s.e2e_s,
    "ttft": lambda s: s.ttft_s,
    "queue": lambda s: s.queue_s,
    "prefill": lambda s: s.prefill_s,
    "decode": lambda s: s.decode_s,
    "tpot": lambda s: s.tpot_s,
    "prompt": lambda s: None if s.prompt_tokens is None else float(s.prompt_tokens),
    "output": lambda s: None if s.output_tokens is None else float(s.output_tokens),
}
"""What `--sort` ranks by, largest first (unknown last)."""


def names_server(server: str, target: str) -> bool:
    """True when a span's server name (its `vtop.server`, `service.instance.id` or
    `service.name` resource attribute) is this target: its label, or its HOST:PORT."""
    return bool(server) and server in (target, urlsplit(target).netloc.rpartition("@")[2])


def spans_of_server(spans: list[RequestSpan], target: str) -> list[RequestSpan]:
    """The spans this target exported, when any names it; else all of them (spans from
    servers that set no name of theirs cannot be told apart)."""
    own = [span for span in spans if names_server(span.server, target)]
    return own or spans


def ranked(
    spans: list[RequestSpan], sort: str = "e2e", limit: int | None = 20
) -> list[RequestSpan]:
    """The requests, the largest `sort` first (those without it last), at most `limit`."""
    key = SORTS[sort]
    known = sorted((s for s in spans if key(s) is not None), key=lambda s: -(key(s) or 0.0))
    unknown = [s for s in spans if key(s) is None]
    every = known + unknown
    return every if limit is None else every[:limit]


@dataclass(frozen=True)
class TimeSplit:
    """Where a band of requests spent their end-to-end time (shares of its sum)."""

    band: str
    """`slowest 1%` or `middle 10%`."""
    requests: int
    e2e_s: float
    """The band's mean end-to-end latency."""
    queue: float
    prefill: float
    decode: float

    @property
    def other(self) -> float:
        """The rest: the API server's work before and after the engine (tokenising, the
        stream), never negative."""
        return max(0.0, 1.0 - self.queue - self.prefill - self.decode)

    @property
    def phase(self) -> str:
        """The phase that takes the largest share."""
        shares = {"queue": self.queue, "prefill": self.prefill, "decode": self.decode}
        return max(shares, key=lambda name: shares[name])


def time_split(spans: list[RequestSpan]) -> list[TimeSplit]:
    """The slowest 1% and the middle 10% of requests by end-to-end latency (at least one
    each), split into queue, prefill and decode: where the tail's time goes, beside where a
    typical request's does."""
    timed = sorted(
        (s for s in spans if s.e2e_s is not None and s.e2e_s > 0), key=lambda s: s.e2e_s or 0.0
    )
    if not timed:
        return []
    tail = max(1, math.ceil(len(timed) / 100))
    middle = max(1, math.ceil(len(timed) / 10))
    start = max(0, len(timed) // 2 - middle // 2)
    return [
        _split("slowest 1%", timed[-tail:]),
        _split("middle 10%", timed[start : start + middle]),
    ]


def _split(band: str, spans: list[RequestSpan]) -> TimeSplit:
    total = math.fsum(s.e2e_s or 0.0 for s in spans)

    def share(part: Callable[[RequestSpan], float | None]) -> float:
        return math.fsum(max(0.0, part(s) or 0.0) for s in spans) / total if total else 0.0

    return TimeSplit(
        band,
        len(spans),
        total / len(spans),
        share(lambda s: s.queue_s),
        share(lambda s: s.prefill_s),
        share(lambda s: s.decode_s),
    )
