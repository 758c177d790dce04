"""One window of a feed: sample it, then close it (diagnose, bundle and tune all read a window
this way). Below the session: the session judges the frames, this reads them."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable

from vtop.core.frame import Frame
from vtop.core.ingest.exposition_writer import parsed_text
from vtop.core.ingest.feeds import Feed, sample
from vtop.core.ingest.sources.vllm_http import never_vllm


async def window_frames(
    feed: Feed,
    window_s: float,
    lengthen: Callable[[Frame], float] | None = None,
    decided: Callable[[list[Frame]], bool] | None = None,
    progress: Callable[[float, float], None] | None = None,
) -> list[Frame]:
    """The feed's frames for the window (the feed closed after): the one "sample a window,
    then close" of diagnose, bundle and tune. A first frame in which no server is a vLLM to
    judge (nothing listens, an HTML page, a 4xx) ends it at once: that is not worth a window
    of waiting. With `lengthen`, the first frame decides the window (what its series need to
    be judged); with `decided`, the window ends as soon as the frames so far are decisive;
    `progress` hears (seconds sampled, window) after each frame. A payload's junk past the
    series cap is not held for the window (`parsed_text`)."""
    frames: list[Frame] = []
    window = window_s
    try:
        async with contextlib.aclosing(sample(feed)) as sampled:
            async for whole in sampled:
                frame = dataclasses.replace(whole, scrapes=tuple(map(parsed_text, whole.scrapes)))
                del whole
                frames.append(frame)
                if len(frames) == 1 and frame.scrapes and all(map(never_vllm, frame.scrapes)):
                    break
                if len(frames) == 1 and lengthen is not None:
                    window = max(window, lengthen(frame))
                if len(frames) >= 2 and frame.timestamp - frames[0].timestamp >= window:
                    break
                if decided is not None and decided(frames):
                    break
                if progress is not None:
                    progress(frame.timestamp - frames[0].timestamp, window)
    finally:
        await feed.close()
    return frames
