"""Recordings: round trip, diagnosis equal to live, truncation and corruption."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.frames import TARGET, down_frame, frame_from_text
from tests.support.payloads import fixture
from tests.support.storm import storm_frames
from vtop.core.frame import (
    Event,
    EventKind,
    Frame,
    GpuReading,
    GpuSnapshot,
    GpuStatus,
    ProcessInfo,
)
from vtop.core.ingest.recorder import RecordingError, RecordingReader, RecordingWriter
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions, diagnose_frames
from vtop.text.report import json_report


def write(path: Path, frames: list[Frame], keyframe_every: int = 60) -> None:
    with RecordingWriter(path, keyframe_every) as writer:
        for frame in frames:
            writer.write(frame)


def mixed_frames() -> list[Frame]:
    gpu = GpuSnapshot(
        GpuStatus.OK,
        (
            GpuReading(
                0,
                "H200",
                utilization_pct=50.0,
                throttle_reasons=("idle",),
                processes=(ProcessInfo(7, 10),),
            ),
        ),
        "580",
    )
    texts = [fixture("idle"), fixture("underload"), fixture("after")]
    frames = [frame_from_text(float(i), texts[i % 3]) for i in range(7)]
    versioned = dataclasses.replace(frames[1].scrapes[0], server_version="0.32.0")
    frames[1] = Frame(1.0, (versioned,))
    frames[2] = down_frame(2.0)
    frames[3] = Frame(
        3.0,
        frames[3].scrapes,
        gpu,
        ("INFO started",),
        (Event(3.0, EventKind.RESTART, TARGET, "x"),),
    )
    return frames


def test_round_trip_keeps_text_samples_gpu_log_and_events(tmp_path: Path) -> None:
    frames = mixed_frames()
    path = tmp_path / "r.vtoprec"
    write(path, frames, keyframe_every=3)
    back = list(RecordingReader(path))
    assert len(back) == len(frames)
    for original, copy in zip(frames, back, strict=True):
        assert copy.timestamp == original.timestamp
        assert [s.raw_text for s in copy.scrapes] == [s.raw_text for s in original.scrapes]
        assert [s.status for s in copy.scrapes] == [s.status for s in original.scrapes]
        assert [s.server_version for s in copy.scrapes] == [
            s.server_version for s in original.scrapes
        ]
        assert [len(s.samples) for s in copy.scrapes] == [len(s.samples) for s in original.scrapes]
        assert copy.gpu == original.gpu and copy.log_lines == original.log_lines
        assert copy.events == original.events


def test_diagnosis_of_a_recording_equals_the_live_one(tmp_path: Path) -> None:
    frames = storm_frames()
    path = tmp_path / "storm.vtoprec"
    write(path, frames)
    options = DiagnoseOptions(vllm_args="--max-num-seqs 16")
    live = json_report(diagnose_frames(TARGET, frames, load_rules(), options))
    replayed = json_report(
        diagnose_frames(TARGET, list(RecordingReader(path)), load_rules(), options)
    )
    assert replayed == live and live["primary"]["id"] == "M1"


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 1.0))
def test_truncated_file_reads_up_to_the_last_complete_frame(
    tmp_path_factory: pytest.TempPathFactory, cut: float
) -> None:
    path = tmp_path_factory.mktemp("cut") / "r.vtoprec"
    frames = mixed_frames()
    write(path, frames, keyframe_every=3)
    data = path.read_bytes()
    offsets = [0]
    with RecordingWriter(tmp_path_factory.mktemp("sizes") / "s.vtoprec", 3) as sizer:
        for frame in frames:
            sizer.write(frame)
            sizer._file.flush()
            offsets.append(sizer.path.stat().st_size)
    size = max(len(b"VTOPREC 1\n"), int(len(data) * cut))
    path.write_bytes(data[:size])
    reader = RecordingReader(path)
    back = list(reader)
    complete = sum(1 for end in offsets[1:] if end <= size)
    assert len(back) == complete
    assert [f.timestamp for f in back] == [f.timestamp for f in frames[:complete]]
    boundaries = {len(b"VTOPREC 1\n"), *offsets[1:]}
    assert (reader.problem is None) == (size in boundaries)


def test_corrupt_record_is_reported_and_earlier_frames_kept(tmp_path: Path) -> None:
    path = tmp_path / "r.vtoprec"
    write(path, mixed_frames())
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF
    path.write_bytes(bytes(data))
    reader = RecordingReader(path)
    back = list(reader)
    assert len(back) == len(mixed_frames()) - 1
    assert reader.problem is not None and "CRC mismatch" in reader.problem


def test_not_a_recording(tmp_path: Path) -> None:
    path = tmp_path / "x"
    path.write_text("hello")
    with pytest.raises(RecordingError, match="not a vtop recording"):
        list(RecordingReader(path))


def test_appending_to_an_existing_recording(tmp_path: Path) -> None:
    path = tmp_path / "r.vtoprec"
    frames = mixed_frames()
    write(path, frames[:3])
    write(path, frames[3:])
    assert [f.timestamp for f in RecordingReader(path)] == [f.timestamp for f in frames]


def test_cli_diagnoses_a_recording(tmp_path: Path) -> None:
    path = tmp_path / "storm.vtoprec"
    write(path, storm_frames())
    out = subprocess.run(
        [sys.executable, "-m", "vtop", "diagnose", str(path), "--vllm-args", "--max-num-seqs 16"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert "M1 preemption storm" in out.stdout and "+ --max-num-seqs 1" in out.stdout
