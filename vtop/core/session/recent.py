"""The recent frames an incident bundle writes, held compressed.

A bundle re-parses the frames' /metrics text as a replay does, so the text is what is kept: ten
minutes of one server's payloads are 30 MB as text, 4 MB compressed (one vLLM 0.32 payload of
50 KB is 6.7 KB at zlib's level 1, 0.16 ms to compress, 0.07 ms to expand). zlib, not a delta
against the previous payload, so that dropping the oldest frame never orphans the next.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections import deque

from vtop.core.frame import Frame, TargetScrape
from vtop.core.ingest.exposition_writer import exposition_text, parsed_text

FRAMES_KEPT = 600
"""Recent frames kept for an incident bundle (10 minutes at 1 s)..."""
BYTES_KEPT = 32 * 1024 * 1024
"""...or fewer, so their compressed text stays under this many bytes (large fleets)."""
LEVEL = 1
"""zlib's fastest level: consecutive payloads differ in their numbers, and a higher level
saves a sixth more for two and a half times the CPU."""


@dataclasses.dataclass(frozen=True)
class PackedFrame:
    """A frame without its scrapes' text, and that text compressed, scrape by scrape."""

    frame: Frame
    texts: tuple[bytes, ...]

    @property
    def size(self) -> int:
        return sum(map(len, self.texts))


class RecentFrames:
    """The newest frames, their text compressed and without parsed samples, within both
    bounds."""

    def __init__(self, max_frames: int = FRAMES_KEPT, max_bytes: int = BYTES_KEPT) -> None:
        self.max_frames = max_frames
        self.max_bytes = max_bytes
        self._packed: deque[PackedFrame] = deque()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._packed)

    def add(self, frame: Frame) -> None:
        """Keep a frame without its parsed samples (tens of bytes each, and the garbage
        collector walks every one of them): its scrapes' text, compressed. Drop the oldest
        beyond the bounds, never the newest."""
        texts = tuple(zlib.compress(_kept_text(s).encode(), LEVEL) for s in frame.scrapes)
        bare = tuple(dataclasses.replace(s, samples=(), raw_text="") for s in frame.scrapes)
        packed = PackedFrame(dataclasses.replace(frame, scrapes=bare), texts)
        self._packed.append(packed)
        self._bytes += packed.size
        while len(self._packed) > 1 and (
            len(self._packed) > self.max_frames or self._bytes > self.max_bytes
        ):
            self._bytes -= self._packed.popleft().size

    def snapshot(self) -> list[PackedFrame]:
        """The frames held now, still compressed (cheap: expand them with `expand`)."""
        return list(self._packed)

    def frames(self) -> list[Frame]:
        """The frames held now, oldest first, with their text."""
        return expand(self.snapshot())


def _kept_text(scrape: TargetScrape) -> str:
    """The text a bundle keeps of a scrape: as received, only as far as it was parsed
    (`parsed_text`), written from its samples when it came without text (from Prometheus)."""
    return exposition_text(parsed_text(scrape)) if scrape.samples else scrape.raw_text


def expand(packed: list[PackedFrame]) -> list[Frame]:
    """Frames with their text back."""
    return [
        dataclasses.replace(
            p.frame,
            scrapes=tuple(
                dataclasses.replace(s, raw_text=zlib.decompress(text).decode())
                for s, text in zip(p.frame.scrapes, p.texts, strict=True)
            ),
        )
        for p in packed
    ]
