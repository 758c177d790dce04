"""Reading a recording or bundle named on the command line: refused at once when it is not one."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from vtop.cli.errors import CliError
from vtop.core.frame import Frame
from vtop.core.ingest.bundle import extract_recording, is_bundle, not_a_recording
from vtop.core.ingest.excerpt import excerpt
from vtop.core.ingest.recorder import RecordingError, RecordingReader

RECORDING_SUFFIXES = (".vtoprec", ".tar.gz", ".tgz")
EXIT_NO_DATA = 3


def file_argument(text: str) -> Path | None:
    """The path a URL-or-recording argument names, None when it is a URL: an existing path, or
    one that looks like a file (a recording's suffix, or starting with / ./ ../ ~)."""
    if "://" in text:
        return None
    path = Path(text).expanduser()
    looks_like_file = text.endswith(RECORDING_SUFFIXES) or text.startswith(("/", "./", "../", "~"))
    return path if path.exists() or looks_like_file else None


def read_frames(path: Path) -> list[Frame]:
    """Every complete frame of a recording or bundle (a damaged tail is said on stderr)."""
    problem = not_a_recording(path)
    if problem is not None:
        raise CliError(problem, EXIT_NO_DATA)
    if is_bundle(path):
        with tempfile.TemporaryDirectory() as scratch:
            return read_frames(extract_recording(path, Path(scratch)))
    reader = RecordingReader(path)
    try:
        frames = list(reader)
    except (RecordingError, OSError) as error:
        raise CliError(str(error), EXIT_NO_DATA) from None
    if reader.problem:
        print(f"vtop: {reader.problem} (using every complete frame)", file=sys.stderr)
    if not frames:
        raise CliError(f"{path} holds no complete frame", EXIT_NO_DATA)
    return frames


def never_answered(frames: list[Frame]) -> str | None:
    """Why no server answered in any of the frames (the last failure of each), None when one
    did."""
    if any(scrape.ok for frame in frames for scrape in frame.scrapes):
        return None
    last = {s.target: f"{s.target} {s.status.value}: {s.error}" for f in frames for s in f.scrapes}
    return "; ".join(last.values()) or "no scrape was taken"


def between(frames: list[Frame], start_s: float | None, end_s: float | None) -> list[Frame]:
    """The frames from `start_s` to `end_s` seconds after the recording's first frame, the
    first of them carrying the server's log and facts from before (its flags stay known)."""
    first = frames[0].timestamp
    inside = [
        index
        for index, frame in enumerate(frames)
        if (start_s is None or frame.timestamp - first >= start_s)
        and (end_s is None or frame.timestamp - first <= end_s)
    ]
    chosen = excerpt(frames, inside[0], inside[-1] + 1) if inside else []
    if len(chosen) < 2:
        span = frames[-1].timestamp - first
        raise CliError(
            f"the window --from {start_s} --to {end_s} holds {len(chosen)} frame(s) of a "
            f"{span:.0f} s recording (two are needed)",
            EXIT_NO_DATA,
        )
    return chosen
