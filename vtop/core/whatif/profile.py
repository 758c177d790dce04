"""What earlier windows showed of a model's step time on a host: the busy slices of every
window vtop calibrated on, kept per (host, model, tensor parallel size) in a private JSON file,
so a window of one batch size and one context can still say how the step time grows with the
batch and the context (a light load's slices are the small batch and the short context a fix to
fewer sequences moves toward)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from vtop.core.config.server_config import ServerConfig
from vtop.core.managed_server import private_directory, state_dir, write_private
from vtop.core.store.store import Store
from vtop.core.whatif.step_time import StepPoint

FILE_NAME = "step-profiles.json"
PROFILE_DIR = "profiles"
KEPT_WINDOWS = 32
"""Windows kept per profile, the newest."""
KEPT_PROFILES = 64
MAX_AGE_S = 30 * 86400.0
"""Older windows are dropped: drivers, vLLM versions and hardware change."""
MAX_BYTES = 4 << 20


@dataclass(frozen=True)
class Window:
    """One calibrated window's busy slices."""

    time: float
    points: tuple[StepPoint, ...]

    def plain(self) -> dict[str, object]:
        return {
            "time": self.time,
            "points": [_plain_point(p) for p in self.points],
        }


def _plain_point(point: StepPoint) -> list[float]:
    """[requests, tokens, seconds], and the context where the slice said it."""
    plain = [point.requests, point.tokens, point.seconds]
    return plain if point.context is None else [*plain, point.context]


class ProfileError(ValueError):
    """The profile file is damaged; names the file and line."""


def profile_key(store: Store, target: str, server: ServerConfig) -> str:
    """The host, the served model and the tensor parallel size: what a step's time depends on
    (not the port: replicas of one model on one host share a profile)."""
    host = urlsplit(target if "//" in target else f"//{target}").hostname or target
    models = sorted(
        {
            s.label("model_name") or ""
            for s in store.select("vllm:num_requests_running", {"instance": target})
        }
    )
    tp = int(server.number("tensor_parallel_size") or 1)
    return f"{host} {','.join(models) or '?'} tp={tp}"


@dataclass
class StepProfiles:
    """The profile file: key -> windows, each a time and its points."""

    path: Path
    profiles: dict[str, list[Window]] = field(default_factory=dict)
    write_error: str | None = None
    """Why the last window could not be kept (learning is best effort: a read-only state
    directory does not stop a diagnosis)."""

    @classmethod
    def default(cls) -> StepProfiles:
        """The file in vtop's state directory, beside the servers' state files but not among
        them (read now; missing is empty)."""
        return cls.read(state_dir() / PROFILE_DIR / FILE_NAME)

    @classmethod
    def read(cls, path: Path) -> StepProfiles:
        """The file's profiles; ProfileError names the file and line when it is damaged."""
        try:
            with path.open("rb") as stream:
                raw = stream.read(MAX_BYTES + 1)
        except FileNotFoundError:
            return cls(path)
        except OSError as error:
            raise ProfileError(f"{path}: cannot read: {error.strerror}") from None
        if len(raw) > MAX_BYTES:
            raise ProfileError(f"{path}: over {MAX_BYTES >> 20} MB, not a step profile file")
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise ProfileError(f"{path}: not UTF-8 text") from None
        except json.JSONDecodeError as error:
            raise ProfileError(f"{path}:{error.lineno}: not JSON: {error.msg}") from None
        return cls(path, _checked(path, data))

    def earlier(self, key: str, now: float, window_s: float) -> list[tuple[StepPoint, ...]]:
        """The profile's recent windows, each its points, but not the window ending at `now`
        (its slices are the ones being fitted)."""
        return [
            window.points
            for window in self.profiles.get(key, [])
            if now - MAX_AGE_S <= window.time <= now - window_s or window.time > now
        ]

    def add(self, key: str, now: float, window_s: float, points: list[StepPoint]) -> None:
        """Keep a window's busy slices (replacing windows it overlaps: the same slices
        calibrated again) and write the file (0600, in a 0700 directory, replaced whole)."""
        if not points:
            return
        windows = [w for w in self.profiles.get(key, []) if not now - window_s < w.time <= now]
        windows.append(Window(now, tuple(points)))
        self.profiles.pop(key, None)
        self.profiles[key] = windows[-KEPT_WINDOWS:]
        while len(self.profiles) > KEPT_PROFILES:
            self.profiles.pop(next(iter(self.profiles)))
        try:
            self._write()
        except OSError as error:
            self.write_error = f"{self.path}: cannot write the step profile: {error.strerror}"

    def _write(self) -> None:
        private_directory(self.path.parent)
        plain = {k: [w.plain() for w in ws] for k, ws in self.profiles.items()}
        write_private(self.path, json.dumps(plain))


def _checked(path: Path, data: object) -> dict[str, list[Window]]:
    """The profiles when the JSON has their shape, else ProfileError."""
    if not isinstance(data, dict):
        raise ProfileError(f"{path}:1: not a step profile file (expected an object)")
    profiles = {}
    for key, windows in data.items():
        if not isinstance(windows, list) or not all(_is_window(w) for w in windows):
            raise ProfileError(f"{path}: profile {key!r} is not a list of {{time, points}} windows")
        profiles[str(key)] = [
            Window(float(w["time"]), tuple(StepPoint(*map(float, p)) for p in w["points"]))
            for w in windows
        ]
    return profiles


def _is_window(window: object) -> bool:
    if not isinstance(window, dict) or not isinstance(window.get("time"), int | float):
        return False
    points = window.get("points")
    return isinstance(points, list) and all(_is_point(p) for p in points)


def _is_point(point: object) -> bool:
    """Three positive figures, and optionally the context (0 or more)."""
    if not isinstance(point, list) or len(point) not in (3, 4):
        return False
    if not all(isinstance(v, int | float) and 0 <= v < 1e9 for v in point):
        return False
    return all(v > 0 for v in point[:3])
