"""Messages from workers to the app (frames are never coalesced: each one is data)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from vtop.core.frame import Frame


@dataclass
class FramesReady(Message):
    """Frames polled or read from a recording, in time order."""

    frames: list[Frame]
