"""Flight recorder: frames to an append-only, compressed, crash-safe file, and back.

Layout: one header line (`VTOPREC <schema>\\n`), then records of
`[4-byte big-endian length][4-byte CRC32][zlib(JSON frame)]`. Each record is complete on its own,
so a file cut off mid-write (power loss, SIGKILL) reads back up to its last complete frame.
A scrape's raw text is stored as a line diff against the previous scrape of the same target,
with a full keyframe every KEYFRAME_EVERY frames: /metrics text mostly repeats between ticks.
Samples are not stored; they are parsed again from the text on read, exactly as live.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, BinaryIO

from vtop.core.frame import (
    Event,
    EventKind,
    Frame,
    GpuReading,
    GpuSnapshot,
    GpuStatus,
    ProbeResult,
    ProcessInfo,
    RequestSpan,
    ScrapeStatus,
    TargetScrape,
)
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.ingest.exposition_writer import exposition_text
from vtop.core.redact import Redactor, redactor

MAGIC = b"VTOPREC"
EVENT_KINDS = frozenset(kind.value for kind in EventKind)
"""Event kinds this vtop knows (a newer recording's others are left out)."""
SCHEMA = 1
KEYFRAME_EVERY = 60
RECORD_HEAD = struct.Struct(">II")
MAX_RECORD = 256 * 1024 * 1024


class RecordingError(ValueError):
    """A file that is not a readable vtop recording."""


def _diff(previous: list[str] | None, current: list[str]) -> dict[str, Any]:
    """Changed lines by index when the line count is unchanged, else the whole text."""
    if previous is None or len(previous) != len(current):
        return {"full": "\n".join(current)}
    changed = [
        [i, line]
        for i, (old, line) in enumerate(zip(previous, current, strict=True))
        if old != line
    ]
    return {"changed": changed}


def _undiff(previous: list[str] | None, stored: dict[str, Any]) -> list[str]:
    """Rebuild a scrape's lines from a stored diff."""
    if "full" in stored:
        return str(stored["full"]).split("\n")
    if previous is None:
        raise RecordingError("a diff record without its keyframe")
    lines = list(previous)
    for index, line in stored["changed"]:
        lines[index] = line
    return lines


class RecordingWriter:
    """Appends frames to a recording file."""

    def __init__(self, path: Path, keyframe_every: int = KEYFRAME_EVERY) -> None:
        self.path = path
        self.keyframe_every = keyframe_every
        self._previous: dict[str, list[str]] = {}
        self._frames = 0
        fresh = not path.exists() or path.stat().st_size == 0
        self._file: BinaryIO = os.fdopen(
            os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab"
        )
        if fresh:
            self._file.write(MAGIC + b" " + str(SCHEMA).encode() + b"\n")
        self._keyframe_next = True

    def write(self, frame: Frame) -> None:
        """Append one frame and flush it to the OS."""
        keyframe = self._keyframe_next or self._frames % self.keyframe_every == 0
        payload = json.dumps(self._encode(frame, keyframe), separators=(",", ":")).encode()
        data = zlib.compress(payload, 6)
        self._file.write(RECORD_HEAD.pack(len(data), zlib.crc32(data)) + data)
        self._file.flush()
        self._frames += 1
        self._keyframe_next = False

    def _encode(self, frame: Frame, keyframe: bool) -> dict[str, Any]:
        """A frame as JSON-ready data, texts as diffs (secrets in errors and log lines
        replaced)."""
        hide = redactor()
        scrapes = []
        for scrape in frame.scrapes:
            text = exposition_text(scrape)
            lines = text.split("\n")
            previous = None if keyframe else self._previous.get(scrape.target)
            self._previous[scrape.target] = lines
            scrapes.append(
                {
                    "target": scrape.target,
                    "status": scrape.status.value,
                    "error": hide.text(scrape.error),
                    "http_status": scrape.http_status,
                    "duration_s": scrape.duration_s,
                    "openmetrics": text.rstrip().endswith("# EOF"),
                    "text": _diff(previous, lines) if text else {"full": ""},
                    **({"version": scrape.server_version} if scrape.server_version else {}),
                    **(
                        {"settings": [list(f) for f in scrape.server_settings]}
                        if scrape.server_settings
                        else {}
                    ),
                }
            )
        return {
            "t": frame.timestamp,
            "scrapes": scrapes,
            "gpu": None
            if frame.gpu is None
            else {**asdict(frame.gpu), "state": frame.gpu.state.value},
            "log": [hide.text(line) for line in frame.log_lines],
            "events": [asdict(event) for event in frame.events],
            **({"probes": [_probe_data(p, hide) for p in frame.probes]} if frame.probes else {}),
            **({"spans": [_span_data(s, hide) for s in frame.spans]} if frame.spans else {}),
        }

    def close(self) -> None:
        """Close the file."""
        self._file.close()

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class RecordingReader:
    """Reads frames back; a truncated tail is reported in `problem`, not raised."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problem: str | None = None
        self.frames_read = 0
        self._parsers: dict[str, ExpositionParser] = {}
        self._previous: dict[str, list[str]] = {}

    def __iter__(self) -> Iterator[Frame]:
        with self.path.open("rb") as file:
            _read_header(file, self.path)
            for offset, payload in self._records(file):
                try:
                    frame = self._decode(json.loads(zlib.decompress(payload)))
                except (zlib.error, ValueError, KeyError, TypeError, AttributeError):
                    self.problem = _damage(self.path, "damaged record (not a frame)", offset)
                    return
                self.frames_read += 1
                yield frame

    def _records(self, file: BinaryIO) -> Iterator[tuple[int, bytes]]:
        """Complete, intact records; stop at the first incomplete or damaged one."""
        while True:
            offset = file.tell()
            head = file.read(RECORD_HEAD.size)
            if not head:
                return
            if len(head) < RECORD_HEAD.size:
                self.problem = _damage(self.path, "truncated record header", offset)
                return
            length, crc = RECORD_HEAD.unpack(head)
            if length > MAX_RECORD:
                self.problem = _damage(self.path, "damaged record (impossible length)", offset)
                return
            data = file.read(length)
            if len(data) < length:
                self.problem = _damage(self.path, "truncated record", offset)
                return
            if zlib.crc32(data) != crc:
                self.problem = _damage(self.path, "damaged record (CRC mismatch)", offset)
                return
            yield offset, data

    def _decode(self, data: dict[str, Any]) -> Frame:
        """A stored frame back to a Frame, samples parsed again from the text."""
        scrapes = tuple(self._scrape(item) for item in data["scrapes"])
        gpu = _gpu(data["gpu"]) if data.get("gpu") else None
        events = tuple(
            Event(event["timestamp"], EventKind(event["kind"]), event["target"], event["message"])
            for event in data.get("events", [])
            if event.get("kind") in EVENT_KINDS
        )
        probes = tuple(_probe(item) for item in data.get("probes", []))
        spans = tuple(_span(item) for item in data.get("spans", []))
        log = tuple(data.get("log", []))
        return Frame(float(data["t"]), scrapes, gpu, log, events, probes, spans)

    def _scrape(self, item: dict[str, Any]) -> TargetScrape:
        """One target's scrape, parsed as it was live."""
        target = str(item["target"])
        lines = _undiff(self._previous.get(target), item["text"])
        self._previous[target] = lines
        text = "\n".join(lines)
        status = ScrapeStatus(item["status"])
        parser = self._parsers.setdefault(target, ExpositionParser())
        parsed = parser.parse(text, bool(item.get("openmetrics"))) if text else None
        return TargetScrape(
            target,
            status,
            text,
            parsed.frozen_samples() if parsed else (),
            parsed.types if parsed else {},
            tuple(parsed.errors) if parsed else (),
            str(item.get("error", "")),
            item.get("http_status"),
            float(item.get("duration_s", 0.0)),
            item.get("version"),
            _settings(item.get("settings")),
            parsed.skipped if parsed else 0,
        )


def _probe_data(probe: ProbeResult, hide: Redactor) -> dict[str, Any]:
    """A canary as JSON-ready data (its URL and failure text without secrets)."""
    data = asdict(probe)
    data["url"], data["error"] = hide.text(probe.url), hide.text(probe.error)
    return data


def _probe(item: dict[str, Any]) -> ProbeResult:
    """A canary read back."""
    fields = dict(item)
    fields["reads"] = tuple((float(at), int(size)) for at, size in fields.get("reads", ()))
    fields["headers"] = tuple((str(k), str(v)) for k, v in fields.get("headers", ()))
    return ProbeResult(**fields)


def _span_data(span: RequestSpan, hide: Redactor) -> dict[str, Any]:
    """A request span as JSON-ready data (its ids without secrets a client put in them)."""
    data = asdict(span)
    data["request_id"], data["server"] = hide.text(span.request_id), hide.text(span.server)
    return data


def _span(item: dict[str, Any]) -> RequestSpan:
    """A request span read back (a ValueError or TypeError for one that is not)."""

    def number(name: str) -> float | None:
        value = item.get(name)
        return None if value is None else float(value)

    def count(name: str) -> int | None:
        value = item.get(name)
        return None if value is None else int(value)

    return RequestSpan(
        request_id=str(item["request_id"]),
        trace_id=str(item["trace_id"]),
        server=str(item.get("server", "")),
        arrival_s=float(item["arrival_s"]),
        end_s=float(item["end_s"]),
        queue_s=number("queue_s"),
        ttft_s=number("ttft_s"),
        prefill_s=number("prefill_s"),
        decode_s=number("decode_s"),
        inference_s=number("inference_s"),
        e2e_s=number("e2e_s"),
        prompt_tokens=count("prompt_tokens"),
        output_tokens=count("output_tokens"),
        max_tokens=count("max_tokens"),
    )


def _damage(path: Path, what: str, offset: int) -> str:
    """The message for a recording that ends in an unreadable record."""
    return f"{path}: {what} at byte {offset}; the frames before it are intact"


def _read_header(file: BinaryIO, path: Path) -> None:
    """Check the magic and schema version."""
    header = file.readline(64)
    if not header.startswith(MAGIC):
        raise RecordingError(f"{path}: not a vtop recording (no {MAGIC.decode()} header)")
    try:
        schema = int(header[len(MAGIC) :].strip())
    except ValueError:
        raise RecordingError(f"{path}: damaged recording header") from None
    if schema > SCHEMA:
        raise RecordingError(
            f"{path}: recording schema {schema} is newer than this vtop ({SCHEMA})"
        )


def _gpu(data: dict[str, Any]) -> GpuSnapshot:
    """A stored GPU snapshot back to dataclasses."""
    gpus = []
    for reading in data.get("gpus", []):
        fields = dict(reading)
        fields["processes"] = tuple(ProcessInfo(**p) for p in fields.get("processes", []))
        fields["throttle_reasons"] = tuple(fields.get("throttle_reasons", ()))
        fields["errors"] = tuple(fields.get("errors", ()))
        gpus.append(GpuReading(**fields))
    return GpuSnapshot(
        GpuStatus(data["state"]), tuple(gpus), data.get("driver_version"), data.get("message", "")
    )


def _settings(stored: Any) -> tuple[tuple[str, float | str | bool, str], ...]:
    """A scrape's stored server settings; anything malformed is dropped."""
    if not isinstance(stored, list):
        return ()
    return tuple(
        (item[0], item[1], item[2])
        for item in stored
        if isinstance(item, list)
        and len(item) == 3
        and isinstance(item[0], str)
        and isinstance(item[1], str | float | int | bool)
        and isinstance(item[2], str)
    )


def is_recording(path: str) -> bool:
    """True when `path` names an existing file that starts like a recording."""
    candidate = Path(path)
    if not candidate.is_file():
        return False
    with candidate.open("rb") as file:
        return file.read(len(MAGIC)) == MAGIC
