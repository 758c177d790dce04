"""Incident bundles: one tarball with the recording, findings, log tail, argv, versions, GPUs."""

from __future__ import annotations

import io
import json
import os
import platform
import shlex
import tarfile
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vtop import __version__
from vtop.core.frame import Frame, GpuSnapshot
from vtop.core.ingest.recorder import RecordingWriter, is_recording
from vtop.core.redact import redactor
from vtop.core.strict_json import strict_json

RECORDING = "recording.vtoprec"
LOG_TAIL_LINES = 2000


@dataclass(frozen=True)
class BundleContents:
    """What goes into a bundle besides the frames."""

    findings: dict[str, Any]
    log_lines: tuple[str, ...] = ()
    argv: str | None = None
    vllm_version: str | None = None


GZIP_MAGIC = b"\x1f\x8b"
MEMBERS_LOOKED_AT = 64
"""A bundle holds a handful of files; a tarball without the recording among its first members
is not one (and a large file is never read through to find out)."""


def is_bundle(path: Path) -> bool:
    """True for a gzipped tarball that holds a vtop recording among its first members."""
    try:
        with path.open("rb") as file:
            if file.read(2) != GZIP_MAGIC:
                return False
        with tarfile.open(path, "r:gz") as tar:
            for _ in range(MEMBERS_LOOKED_AT):
                member = tar.next()
                if member is None:
                    return False
                if member.name == RECORDING:
                    return True
    except (OSError, tarfile.TarError, EOFError):
        return False
    return False


def not_a_recording(path: Path) -> str | None:
    """Why a path cannot be read as a recording or bundle (None when it can), found at once."""
    if not path.exists():
        return f"{path}: no such file"
    if path.is_dir():
        return f"{path}: is a directory, not a recording"
    try:
        size = path.stat().st_size
        with path.open("rb") as file:
            start = file.read(16)
    except OSError as error:
        return f"{path}: cannot read: {error.strerror or error}"
    if size == 0:
        return f"{path}: empty file, not a vtop recording"
    if is_recording(str(path)) or is_bundle(path):
        return None
    return f"{path}: not a vtop recording or bundle (it starts with {start[:12]!r})"


def write_bundle(path: Path, frames: Iterable[Frame], contents: BundleContents) -> Path:
    """Write the bundle under a temporary name, then rename it (readers never see half)."""
    frames = list(frames)
    with tempfile.TemporaryDirectory() as scratch:
        recording = Path(scratch) / RECORDING
        with RecordingWriter(recording) as writer:
            for frame in frames:
                writer.write(frame)
        partial = path.with_name(path.name + ".partial")
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        os.chmod(partial, 0o600)
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(recording, RECORDING)
            for name, text in _texts(frames, contents).items():
                _add_text(tar, name, text)
        partial.replace(path)
    return path


def _texts(frames: list[Frame], contents: BundleContents) -> dict[str, str]:
    """The small text members of a bundle."""
    gpu = next((f.gpu for f in reversed(frames) if f.gpu is not None), None)
    log_lines = [line for f in frames for line in f.log_lines] or list(contents.log_lines)
    hide = redactor()
    texts = {
        "findings.json": strict_json(hide.value(contents.findings)),
        "versions.json": json.dumps(_versions(contents, gpu), indent=2),
        "gpus.json": json.dumps(_gpus(gpu), indent=2),
        "README.txt": _readme(frames),
    }
    if log_lines:
        texts["server.log"] = hide.text("\n".join(log_lines[-LOG_TAIL_LINES:])) + "\n"
    if contents.argv:
        texts["argv.txt"] = shlex.join(hide.argv(shlex.split(contents.argv))) + "\n"
    return texts


def _versions(contents: BundleContents, gpu: GpuSnapshot | None) -> dict[str, str | None]:
    """vtop, Python, OS, vLLM and driver versions."""
    return {
        "vtop": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "vllm": contents.vllm_version,
        "nvidia_driver": gpu.driver_version if gpu is not None else None,
    }


def _gpus(gpu: GpuSnapshot | None) -> dict[str, Any]:
    """The GPU inventory of the last reading."""
    if gpu is None:
        return {"state": "not read"}
    return {**asdict(gpu), "state": gpu.state.value}


def _readme(frames: list[Frame]) -> str:
    """What the bundle covers and how to open it."""
    if not frames:
        return "empty bundle: no frame was taken\n"
    first, last = frames[0].timestamp, frames[-1].timestamp
    targets = sorted({s.target for f in frames for s in f.scrapes})
    span = f"{_utc(first)} to {_utc(last)} UTC ({last - first:.0f} s, {len(frames)} frames)"
    return (
        f"vtop incident bundle\nendpoints: {', '.join(targets)}\nspan: {span}\n"
        "open with: vtop replay THIS_FILE   |   triage: see findings.json\n"
    )


def _utc(timestamp: float) -> str:
    """A timestamp as YYYY-MM-DD HH:MM:SS in UTC."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(timestamp))


def _add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    """Add a text member."""
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), int(time.time())
    tar.addfile(info, io.BytesIO(data))


def extract_recording(path: Path, into: Path) -> Path:
    """The bundle's recording, copied into a directory."""
    with tarfile.open(path) as tar:
        member = tar.extractfile(RECORDING)
        if member is None:
            raise ValueError(f"{path}: no {RECORDING} in the bundle")
        target = into / RECORDING
        target.write_bytes(member.read())
    return target
