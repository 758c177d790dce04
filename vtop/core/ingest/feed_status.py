"""A feed's state as one value, and its controls as one vocabulary (no I/O here)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from vtop.core.frame import Frame

INTERVAL_STEPS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
SPEED_STEPS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 100.0)


class Mode(enum.Enum):
    """What a feed reads."""

    LIVE = "live"
    REPLAY = "replay"
    PROMETHEUS = "prometheus"
    PROMETHEUS_ALERTS = "prometheus alerts"
    """Prometheus's firing alerts and headline series (`--alerts`)."""
    PROMETHEUS_JUDGED = "judged in prometheus"
    """The rules' conditions evaluated by Prometheus, and the headline series (`--judge`)."""


class Control(enum.Enum):
    """What a user can ask of a feed."""

    PAUSE = "pause"
    FASTER = "faster"
    SLOWER = "slower"
    STEP = "step"
    JUMP = "jump"
    SPEED = "speed"


@dataclass(frozen=True)
class FeedStatus:
    """A feed's state, for the header, the footer and the poll timer."""

    mode: Mode
    interval_s: float
    """How often to ask for frames."""
    paused: bool = False
    speed: float = 1.0
    """Replay: times real time (0: as fast as possible)."""
    position: int = 0
    total: int = 0
    finished: bool = False
    retry_in_s: float = 0.0
    """Live: seconds until the next try while every endpoint fails."""
    recording_to: str | None = None


@dataclass(frozen=True)
class Moved:
    """What a control did: a message, and frames to ingest (into a fresh session when
    `fresh`: a replay jumped back, or far ahead)."""

    message: str
    frames: list[Frame] = field(default_factory=list)
    fresh: bool = False
    changed: bool = True


UNAVAILABLE = "only when replaying a recording"


def next_step(steps: Sequence[float], value: float, up: bool) -> float:
    """The next larger (or smaller) value of a ladder, staying at its ends."""
    if up:
        return min((s for s in steps if s > value), default=steps[-1])
    return max((s for s in steps if s < value), default=steps[0])
