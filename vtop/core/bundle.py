"""Incident bundles: one tarball with the recording, findings, log tail, argv, versions, GPUs."""

from __future__ import annotations

import io
import json
import platform
import tarfile
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vtop import __version__
from vtop.core.frame import Frame, GpuSnapshot
from vtop.core.recorder import RecordingWriter
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


def is_bundle(path: Path) -> bool:
    """True for a tarball that holds a vtop recording."""
    if not path.is_file() or not tarfile.is_tarfile(path):
        return False
    with tarfile.open(path) as tar:
        return RECORDING in tar.getnames()


def write_bundle(path: Path, frames: Iterable[Frame], contents: BundleContents) -> Path:
    """Write the bundle under a temporary name, then rename it (readers never see half)."""
    frames = list(frames)
    with tempfile.TemporaryDirectory() as scratch:
        recording = Path(scratch) / RECORDING
        with RecordingWriter(recording) as writer:
            for frame in frames:
                writer.write(frame)
        partial = path.with_name(path.name + ".partial")
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
    texts = {
        "findings.json": strict_json(contents.findings),
        "versions.json": json.dumps(_versions(contents, gpu), indent=2),
        "gpus.json": json.dumps(_gpus(gpu), indent=2),
        "README.txt": _readme(frames),
    }
    if log_lines:
        texts["server.log"] = "\n".join(log_lines[-LOG_TAIL_LINES:]) + "\n"
    if contents.argv:
        texts["argv.txt"] = contents.argv + "\n"
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
