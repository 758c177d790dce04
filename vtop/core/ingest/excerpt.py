"""A part of a recording judged as the whole would judge it: what the frames before the part
said once and never again (the server's startup log, which names its flags; each server's
version and HTTP answers, asked once per process start) is carried into its first frame."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from vtop.core.frame import Frame, TargetScrape

STARTUP_LINE = re.compile(r"non-default args:")
"""vLLM's line at the start of a server's startup log."""
LOG_LINES_CARRIED = 5000


def excerpt(frames: Sequence[Frame], start: int, end: int | None = None) -> list[Frame]:
    """frames[start:end], its first frame carrying what the frames before `start` told: the
    log since the last startup and each target's latest server facts."""
    window = list(frames[start:end])
    earlier = frames[:start]
    if not earlier or not window:
        return window
    first = window[0]
    facts = _latest_facts(earlier)
    scrapes = tuple(_with_facts(scrape, facts.get(scrape.target)) for scrape in first.scrapes)
    log = (*_since_startup(earlier), *first.log_lines)
    return [dataclasses.replace(first, log_lines=log, scrapes=scrapes), *window[1:]]


def _since_startup(frames: Sequence[Frame]) -> tuple[str, ...]:
    """The log lines of the frames from the last startup line on (at most the newest 5000)."""
    lines = [line for frame in frames for line in frame.log_lines]
    starts = [index for index, line in enumerate(lines) if STARTUP_LINE.search(line)]
    kept = lines[starts[-1] :] if starts else lines
    return tuple(kept[-LOG_LINES_CARRIED:])


def _latest_facts(frames: Sequence[Frame]) -> dict[str, TargetScrape]:
    """Each target's last scrape that carried its version or HTTP settings."""
    latest: dict[str, TargetScrape] = {}
    for frame in frames:
        for scrape in frame.scrapes:
            if scrape.server_version or scrape.server_settings:
                latest[scrape.target] = scrape
    return latest


def _with_facts(scrape: TargetScrape, told: TargetScrape | None) -> TargetScrape:
    """A scrape with the facts an earlier one of its target carried, where it has none."""
    if told is None or scrape.server_version or scrape.server_settings:
        return scrape
    return dataclasses.replace(
        scrape, server_version=told.server_version, server_settings=told.server_settings
    )
