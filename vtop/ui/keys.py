"""The dashboard's keys and palette: feed controls, panels, screens and the fleet table."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import OptionList

from vtop.core.config.settings import PANELS
from vtop.core.ingest.feed_status import Control, Mode
from vtop.ui.drawing import Drawing
from vtop.ui.explain import HELP, diagnosis_text
from vtop.ui.screens.fleet import FleetScreen
from vtop.ui.screens.text_screen import TextScreen

FLEET_SCREEN = "fleet"
REPLAY_ONLY = frozenset({"step", "jump", "speed"})
SERVER_ONLY = frozenset({"apply", "restart"})


class Keys(Drawing):
    """What each key and palette command does (VtopApp's base; `control` is VtopApp's)."""

    fleet_mode: bool
    control: Callable[[Control, float], None]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("p", "pause", "pause"),
        Binding("plus,equals_sign", "faster", "faster", key_display="+"),
        Binding("minus", "slower", "slower", key_display="-"),
        Binding("left_square_bracket", "step(-1)", "back", key_display="["),
        Binding("right_square_bracket", "step(1)", "step", key_display="]"),
        Binding("left_curly_bracket", "jump(-60)", "-60s", show=False),
        Binding("right_curly_bracket", "jump(60)", "+60s", show=False),
        Binding("s", "speed", "speed", show=False),
        Binding("e", "explain", "why"),
        Binding("d", "diagnosis", "diagnosis"),
        Binding("f", "fleet", "fleet", show=False),
        Binding("escape", "fleet(True)", "fleet", show=False),
        Binding("t", "next_target", "endpoint", show=False),
        Binding("b", "bundle", "bundle", show=False),
        Binding("a", "apply", "apply"),
        Binding("r", "restart", "restart", show=False),
        Binding("question_mark", "help", "help", key_display="?"),
        *[
            Binding(str(i + 1), f"toggle_panel('{panel}')", panel, show=False)
            for i, panel in enumerate(PANELS)
        ],
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay keys in the footer only during a replay; server keys only for a server vtop
        started."""
        replaying = self.feed.status(self.clock()).mode is Mode.REPLAY
        if action in REPLAY_ONLY and not replaying:
            return False
        return not (action in SERVER_ONLY and self.server is None)

    def action_pause(self) -> None:
        """Freeze the display (live) or the playback (replay)."""
        self.control(Control.PAUSE, 0.0)

    def action_faster(self) -> None:
        """Poll more often (live) or play faster (replay)."""
        self.control(Control.FASTER, 0.0)

    def action_slower(self) -> None:
        """Poll less often (live) or play slower (replay)."""
        self.control(Control.SLOWER, 0.0)

    def action_step(self, frames: int) -> None:
        """Replay: pause and move frames forward or back."""
        self.control(Control.STEP, frames)

    def action_jump(self, seconds: float) -> None:
        """Replay: move by seconds of recorded time."""
        self.control(Control.JUMP, seconds)

    def action_speed(self) -> None:
        """Replay speed: x1, x10, as fast as possible."""
        self.control(Control.SPEED, 0.0)

    def action_toggle_panel(self, panel: str) -> None:
        """Show or hide a panel; the findings take the rows freed."""
        widget = self.query_one("#gpu" if panel == "gpu" else f"#chart-{panel}")
        widget.display = not widget.display
        charts = [w for w in self.query("#chart-grid > *") if w.display]
        self.screen.set_class(not charts, "-no-charts")

    def action_help(self) -> None:
        """Keys and what the screen shows."""
        self.push_screen(TextScreen("vtop help", HELP))

    def action_diagnosis(self) -> None:
        """The full `vtop diagnose` report for the endpoint on screen."""
        target = self.target
        if target is None:
            self.notify("no data yet", timeout=2)
            return
        events = [m for m in self.session.marks if m.target == target.target]
        text = diagnosis_text(target, self.settings.window_s, events)
        self.push_screen(TextScreen(f"diagnosis of {target.target}", text))

    @on(OptionList.OptionSelected, "#findings")
    def explain_selected(self) -> None:
        """Enter on a finding explains it."""
        self.action_explain()

    def action_fleet(self, back: bool = False) -> None:
        """The fleet table; `f` there (or Esc here, with several servers) toggles back."""
        if isinstance(self.screen, FleetScreen):
            if not back:
                self.pop_screen()
                self.refresh_views(even_paused=True)
            return
        if back and not (self.fleet_mode or len(self.session.targets) > 1):
            return
        if not self.is_screen_installed(FLEET_SCREEN):
            self.install_screen(FleetScreen(), name=FLEET_SCREEN)
        if len(self.screen_stack) == 1:
            self.push_screen(FLEET_SCREEN)
            self.refresh_views(even_paused=True)

    @on(FleetScreen.Open)
    def open_server(self, message: FleetScreen.Open) -> None:
        """Drill from the fleet table into one server's dashboard."""
        names = list(self.session.targets)
        if message.target in names:
            self.target_index = names.index(message.target)
        self.pop_screen()
        self.refresh_views(even_paused=True)

    @on(FleetScreen.Changed)
    def fleet_changed(self) -> None:
        """The fleet table's sort or filter changed."""
        self.refresh_views(even_paused=True)

    def action_next_target(self) -> None:
        """Show the next endpoint."""
        self.target_index += 1
        self.refresh_views()

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """A screenshot in the bundle directory (default: here), never a Downloads folder."""
        where = self.deliver_screenshot(filename, path or str(Path(self.settings.bundle_dir)))
        self.notify(f"screenshot: {where or 'not written'}", timeout=4)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Pause / resume", "p: freeze the display or the replay", self.action_pause
        )
        yield SystemCommand("Diagnosis", "d: the full triage report", self.action_diagnosis)
        yield SystemCommand("Explain finding", "e: the highlighted finding", self.action_explain)
        yield SystemCommand(
            "Incident bundle", "b: recording, findings, log tail", self.action_bundle
        )
        yield SystemCommand("Fleet table", "f: every server at a glance", self.action_fleet)
        if self.feed.status(self.clock()).mode is Mode.REPLAY:
            yield SystemCommand(
                "Replay speed", "s: x1, x10, as fast as possible", self.action_speed
            )
            yield SystemCommand("Step forward", "]: one frame", lambda: self.action_step(1))
            yield SystemCommand("Step back", "[: one frame", lambda: self.action_step(-1))
        for index, panel in enumerate(PANELS):
            yield SystemCommand(f"Toggle {panel} panel", f"key {index + 1}", _toggler(self, panel))


def _toggler(app: Keys, panel: str) -> Callable[[], None]:
    """A callback that toggles one panel."""
    return lambda: app.action_toggle_panel(panel)
