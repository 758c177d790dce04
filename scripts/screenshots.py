"""Regenerate screenshots/*.svg from the real app on the shipped recording of a real vLLM storm
(and the requests view on a real recording of slot hogs with vLLM's spans).

Run: python -m scripts.screenshots
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from tests.support.demo import (
    APPLIED,
    FRAMES,
    STORM,
    app_on,
    fleet_app,
    fleet_frames,
    slot_hog_frames,
)
from vtop.core.frame import Frame
from vtop.ui.app import VtopApp

OUT = Path(__file__).resolve().parents[1] / "screenshots"
SHOTS: list[tuple[str, list[Frame], tuple[int, int], tuple[str, ...]]] = [
    ("storm", STORM, (160, 48), ()),
    ("storm-80x24", STORM, (80, 24), ()),
    ("explain", STORM, (120, 40), ("e",)),
    ("diagnosis", STORM, (120, 40), ("d",)),
    ("after-fix", FRAMES, (160, 48), ()),
    ("restart", FRAMES[: APPLIED + 4], (160, 48), ()),
    ("help", STORM, (100, 32), ("question_mark",)),
    ("requests-80x24", slot_hog_frames(), (80, 24), ("R",)),
]


async def shoot(
    name: str, frames: list[Frame], size: tuple[int, int], keys: tuple[str, ...]
) -> None:
    """Run the dashboard on `frames`, press `keys`, save an SVG."""
    await shoot_app(name, app_on(frames), frames[-1].timestamp, size, keys)


async def shoot_app(
    name: str, app: VtopApp, last: float, size: tuple[int, int], keys: tuple[str, ...]
) -> None:
    """Run an app until it has shown the frame at `last`, press `keys`, save an SVG."""
    async with app.run_test(size=size) as pilot:
        for _ in range(100):
            await pilot.pause(0.02)
            if app.session.now == last:
                break
        await pilot.pause(0.3)
        await pilot.press(*keys)
        await pilot.pause(0.3)
        app.save_screenshot(f"{name}.svg", str(OUT))
    print(f"screenshots/{name}.svg")


def main() -> None:
    """All screenshots, clock times in UTC."""
    os.environ["TZ"] = "UTC"
    time.tzset()
    OUT.mkdir(exist_ok=True)
    for shot in SHOTS:
        asyncio.run(shoot(*shot))
    fleet_last = fleet_frames()[-1].timestamp
    asyncio.run(shoot_app("fleet", fleet_app(), fleet_last, (120, 36), ()))


if __name__ == "__main__":
    main()
