"""GPUs from NVML: utilization, memory, power, temperature, clock, throttling, users."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from vtop.core.frame import GpuSnapshot, GpuStatus
from vtop.ui.format import gpu_row, gpu_users

COLUMNS = ("GPU", "util", "mem", "power", "temp", "SM", "throttle")


class GpuPanel(Static):
    """A table per GPU, or a clear empty state."""

    shown: reactive[tuple[GpuSnapshot | None, frozenset[int]]] = reactive((None, frozenset()))

    def __init__(self) -> None:
        super().__init__(id="gpu", classes="panel")
        self.border_title = "GPUs"

    def show(self, snapshot: GpuSnapshot | None, vllm_pids: frozenset[int] = frozenset()) -> None:
        """Render the latest snapshot."""
        self.shown = (snapshot, vllm_pids)

    def watch_shown(self, shown: tuple[GpuSnapshot | None, frozenset[int]]) -> None:
        snapshot, vllm_pids = shown
        if snapshot is None:
            self.update(Text("No GPU readings (none taken yet, or none recorded)", style="dim"))
        elif snapshot.state is GpuStatus.NO_GPU:
            self.update(Text(f"No NVIDIA GPU: {snapshot.message}", style="dim"))
        elif snapshot.state is GpuStatus.ERROR:
            self.update(Text(f"NVML error: {snapshot.message}", style="bold"))
        else:
            self.update(_table(snapshot, vllm_pids))


def _table(snapshot: GpuSnapshot, vllm_pids: frozenset[int]) -> Table:
    """The GPU table."""
    table = Table(box=None, padding=(0, 1), expand=True)
    for column in COLUMNS:
        table.add_column(column, no_wrap=column != "throttle")
    for gpu in snapshot.gpus:
        table.add_row(*gpu_row(gpu))
        extra = gpu_users(gpu, vllm_pids)
        if gpu.errors:
            extra += "; NVML: " + "; ".join(gpu.errors)
        table.add_row("", Text(extra, style="dim"), end_section=False)
    return table
