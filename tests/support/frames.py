"""Build frames from plain numbers for store and rule tests."""

from __future__ import annotations

from collections.abc import Mapping

from vtop.core.frame import Frame, ScrapeStatus, TargetScrape
from vtop.core.ingest.exposition import ExpositionParser

TARGET = "http://127.0.0.1:8000"


def exposition(types: Mapping[str, str], values: Mapping[str, float]) -> str:
    """Exposition text from {'name{labels}': value} and {'family': type}."""
    lines = [f"# TYPE {family} {kind}" for family, kind in types.items()]
    lines += [f"{head} {value!r}" for head, value in values.items()]
    return "\n".join(lines) + "\n"


def frame_from_text(
    when: float, text: str, target: str = TARGET, openmetrics: bool = False
) -> Frame:
    """A frame holding one successful scrape of `text` (read as OpenMetrics with `openmetrics`)."""
    parsed = ExpositionParser().parse(text, openmetrics)
    scrape = TargetScrape(
        target,
        ScrapeStatus.OK,
        text,
        tuple(parsed.samples),
        parsed.types,
        tuple(parsed.errors),
        skipped_series=parsed.skipped,
    )
    return Frame(when, (scrape,))


def frame(when: float, types: Mapping[str, str], values: Mapping[str, float]) -> Frame:
    """A frame from plain numbers."""
    return frame_from_text(when, exposition(types, values))


def down_frame(when: float, target: str = TARGET) -> Frame:
    """A frame in which the target was unreachable."""
    return Frame(when, (TargetScrape(target, ScrapeStatus.UNREACHABLE, error="refused"),))


def frame_from_texts(when: float, texts: Mapping[str, str]) -> Frame:
    """A frame with one successful scrape per target, from {target: exposition text}."""
    scrapes = tuple(
        frame_from_text(when, text, target).scrapes[0] for target, text in texts.items()
    )
    return Frame(when, scrapes)


STEADY_TYPES = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:generation_tokens_total": "counter",
}


def steady(seconds: int, waiting: float, kv: float = 0.5) -> list[Frame]:
    """A server with two requests running and tokens flowing, `waiting` requests queued and the
    KV cache at `kv`, one frame a second."""
    return [
        frame(
            t,
            STEADY_TYPES,
            {
                "vllm:num_requests_running": 2,
                "vllm:num_requests_waiting": waiting,
                "vllm:kv_cache_usage_perc": kv,
                "vllm:generation_tokens_total": 40 * t,
            },
        )
        for t in range(seconds)
    ]
