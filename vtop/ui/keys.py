"""The dashboard's keys and palette commands (what each does is the app's `action_*`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from textual.app import SystemCommand
from textual.binding import Binding, BindingType

from vtop.core.config.panels import PANELS

REPLAY_ONLY = frozenset({"step", "jump", "speed"})
SERVER_ONLY = frozenset({"apply", "restart"})
LIVE_ONLY = frozenset({"stacks"})

BINDINGS: list[BindingType] = [
    Binding("question_mark", "help", "help", key_display="?"),
    Binding("q", "quit", "quit"),
    Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    Binding("h,f1", "help", "help", show=False),
    Binding("enter", "explain", "why", show=False),
    Binding("e", "explain", "why"),
    Binding("d", "diagnosis", "report"),
    Binding("p", "pause", "pause"),
    Binding("left_square_bracket", "step(-1)", "back", key_display="["),
    Binding("right_square_bracket", "step(1)", "step", key_display="]"),
    Binding("a", "apply", "apply"),
    Binding("plus,equals_sign", "faster", "fast", key_display="+"),
    Binding("minus", "slower", "slow", key_display="-"),
    Binding("left_curly_bracket", "jump(-60)", "-60s", show=False),
    Binding("right_curly_bracket", "jump(60)", "+60s", show=False),
    Binding("s", "speed", "speed", show=False),
    Binding("f", "fleet", "fleet", show=False),
    Binding("escape", "fleet(True)", "fleet", show=False),
    Binding("t", "next_target", "endpoint", show=False),
    Binding("b", "bundle", "bundle", show=False),
    Binding("w", "stacks", "stacks", show=False),
    Binding("R", "requests", "requests", show=False),
    Binding("r", "restart", "restart", show=False),
    *[
        Binding(panel.key, f"toggle_panel('{panel.name}')", panel.name, show=False)
        for panel in PANELS
    ],
    # Where the binding above is not allowed (check_action), Textual tries the next one for
    # the key: these say why instead of doing nothing.
    Binding("a", "unavailable('a')", show=False),
    Binding("r", "unavailable('r')", show=False),
    Binding("w", "unavailable('w')", show=False),
    *[
        Binding(key, f"unavailable('{shown}')", show=False)
        for key, shown in (
            ("left_square_bracket", "["),
            ("right_square_bracket", "]"),
            ("left_curly_bracket", "{"),
            ("right_curly_bracket", "}"),
            ("s", "s"),
        )
    ],
]
"""`?` first, so the footer shows it whatever the width cuts off; then what the mode needs most
(a replay's steps, a managed server's apply)."""


MANAGED_ONLY = "only on a server vtop started (vtop serve -- MODEL, or vtop attach)"
REPLAYING_ONLY = "only in a replay (vtop demo, vtop replay FILE)"
UNAVAILABLE = {
    "a": f"a (apply the finding's change): {MANAGED_ONLY}",
    "r": f"r (restart vLLM): {MANAGED_ONLY}",
    "t": "t (next endpoint): this dashboard watches one server; give more URLs to cycle",
    **{key: f"{key} (step or seek): {REPLAYING_ONLY}" for key in "[]{}"},
    "s": f"s (replay speed): {REPLAYING_ONLY}",
    "w": "w (where the engine is: its stacks): only on a live server on this host",
}
"""What a key says where its action does not apply."""


class Commanded(Protocol):
    """The actions the palette's commands call (the dashboard app has them all)."""

    def action_pause(self) -> None: ...
    def action_diagnosis(self) -> None: ...
    def action_explain(self) -> None: ...
    def action_bundle(self) -> None: ...
    def action_fleet(self, back: bool = False) -> None: ...
    def action_speed(self) -> None: ...
    def action_step(self, frames: int) -> None: ...
    def action_requests(self) -> None: ...
    def action_toggle_panel(self, panel: str) -> None: ...


def system_commands(app: Commanded, replaying: bool) -> Iterator[SystemCommand]:
    """The palette's vtop commands (after Textual's own)."""
    yield SystemCommand("Pause / resume", "p: freeze the display or the replay", app.action_pause)
    yield SystemCommand("Diagnosis", "d: the full triage report", app.action_diagnosis)
    yield SystemCommand("Explain finding", "e: the highlighted finding", app.action_explain)
    yield SystemCommand("Incident bundle", "b: recording, findings, log tail", app.action_bundle)
    yield SystemCommand("Fleet table", "f: every server at a glance", app.action_fleet)
    yield SystemCommand(
        "Requests", "R: the slowest, and who held up whom (vLLM's spans)", app.action_requests
    )
    if replaying:
        yield SystemCommand("Replay speed", "s: x1, x10, as fast as possible", app.action_speed)
        yield SystemCommand("Step forward", "]: one frame", lambda: app.action_step(1))
        yield SystemCommand("Step back", "[: one frame", lambda: app.action_step(-1))
    for panel in PANELS:
        yield SystemCommand(
            f"Toggle {panel.label} panel", f"key {panel.key}", _toggler(app, panel.name)
        )


def _toggler(app: Commanded, panel: str) -> Callable[[], None]:
    """A callback that toggles one panel."""
    return lambda: app.action_toggle_panel(panel)
