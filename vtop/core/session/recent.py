"""The recent frames an incident bundle writes, held compactly.

A bundle re-parses the frames' /metrics text as a replay does, so the text is what is kept: ten
minutes of one server's payloads are 30 MB as text. A payload read through the previous one's
layout (the usual scrape: only values moved) is kept as its values' text, compressed against
the values' text of the first payload of that layout held (zlib's preset dictionary: the same
series keep most of their digits from one scrape to the next), and that layout and dictionary,
shared by every frame of that shape: 0.6 KB for a vLLM 0.32 payload of 50 KB (its values' text
is 3.6 KB, cut out by the parser already; 0.8 KB compressed alone; 20 us to compress). Any
other payload is compressed whole (zlib level 1: 6.8 KB, 0.16 ms to compress, 0.07 ms to
expand). Neither is a delta against the previous frame, so that dropping the oldest frame never
orphans the next.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections import deque

from vtop.core.frame import Frame, PayloadLayout, SampleColumns, TargetScrape
from vtop.core.ingest.exposition_writer import exposition_text, parsed_text

FRAMES_KEPT = 600
"""Recent frames kept for an incident bundle (10 minutes at 1 s)..."""
BYTES_KEPT = 32 * 1024 * 1024
"""...or fewer, so their compressed text stays under this many bytes (large fleets)."""
LAYOUT_BYTES_PER_CHARACTER = 2
"""A layout is counted as twice its payload: what its lines and heads take when they are its
own (107 KB for the 51 KB vLLM 0.32 capture, measured with tracemalloc). The servers of a fleet
share them (interned), so for a fleet the count errs high."""
LEVEL = 1
"""zlib's fastest level: consecutive payloads differ in their numbers, and a higher level
saves a sixth more for two and a half times the CPU."""


@dataclasses.dataclass(frozen=True)
class KeptValues:
    """A payload as its values' text (compressed) and the layout (shared) that rebuilds it."""

    layout: PayloadLayout
    values: bytes
    """The values' text, zlib-compressed against `dictionary`."""
    layout_bytes: int
    """What the layout and the dictionary hold: counted against the bound once while any frame
    uses them."""
    dictionary: bytes
    """The values' text of the first payload of this layout held (shared by the later ones)."""

    def __len__(self) -> int:
        return len(self.values)

    def text(self) -> str:
        """The payload, byte for byte as received."""
        expander = zlib.decompressobj(zdict=self.dictionary)
        values = expander.decompress(self.values) + expander.flush()
        return self.layout.text(values.decode())


KeptText = bytes | KeptValues
"""A scrape's text as held: compressed, or its values beside its layout."""


@dataclasses.dataclass(frozen=True)
class PackedFrame:
    """A frame without its scrapes' text, and that text held compactly, scrape by scrape."""

    frame: Frame
    texts: tuple[KeptText, ...]

    @property
    def size(self) -> int:
        """Bytes of the texts held (the layouts they share are counted apart, once each)."""
        return sum(map(len, self.texts))


class RecentFrames:
    """The newest frames, their text held compactly and without parsed samples, within both
    bounds."""

    def __init__(self, max_frames: int = FRAMES_KEPT, max_bytes: int = BYTES_KEPT) -> None:
        self.max_frames = max_frames
        self.max_bytes = max_bytes
        self._packed: deque[PackedFrame] = deque()
        self._bytes = 0
        self._layout_uses: dict[int, tuple[PayloadLayout, int, bytes]] = {}
        """How many kept scrapes use each layout, by identity, and the dictionary their values
        are compressed against (the layout is kept beside its count, so its id is never reused
        while counted)."""

    def __len__(self) -> int:
        return len(self._packed)

    def add(self, frame: Frame) -> None:
        """Keep a frame without its parsed samples (tens of bytes each, and the garbage
        collector walks every one of them): its scrapes' text, held compactly. Drop the oldest
        beyond the bounds, never the newest."""
        texts = tuple(map(self._packed_text, frame.scrapes))
        bare = tuple(scrape.bare() for scrape in frame.scrapes)
        packed = PackedFrame(dataclasses.replace(frame, scrapes=bare), texts)
        self._packed.append(packed)
        self._bytes += packed.size + self._count_layouts(packed, 1)
        while len(self._packed) > 1 and (
            len(self._packed) > self.max_frames or self._bytes > self.max_bytes
        ):
            oldest = self._packed.popleft()
            self._bytes += self._count_layouts(oldest, -1) - oldest.size

    @property
    def counted_bytes(self) -> int:
        """Bytes counted against the bound: the texts held, and each layout in use once."""
        return self._bytes

    def _count_layouts(self, packed: PackedFrame, step: int) -> int:
        """Count a frame's layouts in (`step` 1) or out (-1); the change in bytes counted: a
        layout's bytes when its first user comes in, minus them when its last one goes."""
        change = 0
        for kept in packed.texts:
            if not isinstance(kept, KeptValues):
                continue
            key = id(kept.layout)
            uses = self._layout_uses.get(key, (kept.layout, 0, b""))[1] + step
            if uses == 0:
                del self._layout_uses[key]
                change -= kept.layout_bytes
                continue
            if uses == 1 and step == 1:
                change += kept.layout_bytes
            self._layout_uses[key] = (kept.layout, uses, kept.dictionary)
        return change

    def _packed_text(self, scrape: TargetScrape) -> KeptText:
        """A scrape's text as held: its values compressed beside its layout when it was read
        through one, else the whole text compressed."""
        samples = scrape.samples
        if not isinstance(samples, SampleColumns) or samples.layout is None:
            return zlib.compress(_kept_text(scrape).encode(), LEVEL)
        value_text = samples.value_text.encode()
        held = self._layout_uses.get(id(samples.layout))
        dictionary = value_text if held is None else held[2]
        compressor = zlib.compressobj(LEVEL, zdict=dictionary)
        values = compressor.compress(value_text) + compressor.flush()
        layout_bytes = LAYOUT_BYTES_PER_CHARACTER * len(scrape.raw_text) + len(dictionary)
        return KeptValues(samples.layout, values, layout_bytes, dictionary)

    def snapshot(self) -> list[PackedFrame]:
        """The frames held now, still packed (cheap: expand them with `expand`)."""
        return list(self._packed)

    def frames(self) -> list[Frame]:
        """The frames held now, oldest first, with their text."""
        return expand(self.snapshot())


def _unpacked_text(kept: KeptText) -> str:
    """A scrape's text back from how it is held."""
    return kept.text() if isinstance(kept, KeptValues) else zlib.decompress(kept).decode()


def _kept_text(scrape: TargetScrape) -> str:
    """The text a bundle keeps of a scrape: as received, only as far as it was parsed
    (`parsed_text`), written from its samples when it came without text (from Prometheus)."""
    return exposition_text(parsed_text(scrape))


def expand(packed: list[PackedFrame]) -> list[Frame]:
    """Frames with their text back."""
    return [
        dataclasses.replace(
            p.frame,
            scrapes=tuple(
                dataclasses.replace(s, raw_text=_unpacked_text(text))
                for s, text in zip(p.frame.scrapes, p.texts, strict=True)
            ),
        )
        for p in packed
    ]
