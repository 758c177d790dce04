"""Recording size per hour at 1 s for one endpoint, against raw text and per-frame gzip.

Run: python -m benchmarks.bench_recording
The payload is the real vLLM 0.32 /metrics under load, with every counter and histogram line
growing each tick and the gauges moving, as under steady traffic (the worst case for diffs).
"""

from __future__ import annotations

import re
import tempfile
import zlib
from pathlib import Path

from tests.support.frames import frame_from_text
from tests.support.payloads import fixture
from vtop.core.ingest.recorder import RecordingReader, RecordingWriter

FRAMES = 600
NUMBER = re.compile(r" ([0-9.e+]+)$")


def tick_text(base: list[str], tick: int) -> str:
    """The payload at one tick: cumulative lines grow, gauges wobble."""
    out = []
    for line in base:
        match = NUMBER.search(line)
        if line.startswith("#") or match is None or "_created" in line:
            out.append(line)
            continue
        value = float(match.group(1))
        head = line[: match.start()]
        if head.split("{")[0].endswith(("_total", "_bucket", "_sum", "_count")):
            value += tick * (1 + value * 0.001)
        elif head.startswith("vllm:"):
            value = (value + tick) % 17
        out.append(f"{head} {value!r}")
    return "\n".join(out)


def main() -> None:
    """Write FRAMES frames, then print sizes scaled to one hour."""
    base = fixture("underload").splitlines()
    texts = [tick_text(base, tick) for tick in range(FRAMES)]
    path = Path(tempfile.mkdtemp()) / "bench.vtoprec"
    with RecordingWriter(path) as writer:
        for tick, text in enumerate(texts):
            writer.write(frame_from_text(float(tick), text))
    per_hour = 3600 / FRAMES
    recorded = path.stat().st_size * per_hour
    raw = sum(len(text) for text in texts) * per_hour
    gzip_each = sum(len(zlib.compress(text.encode(), 6)) for text in texts) * per_hour
    assert sum(1 for _ in RecordingReader(path)) == FRAMES
    print(f"one endpoint, 1 s interval, {len(base)} lines per scrape:")
    print(f"raw /metrics text      {raw / 2**20:8.1f} MiB per hour")
    print(f"gzip of each scrape    {gzip_each / 2**20:8.1f} MiB per hour ({raw / gzip_each:.1f}x)")
    print(f"vtop recording         {recorded / 2**20:8.1f} MiB per hour ({raw / recorded:.1f}x)")


if __name__ == "__main__":
    main()
