"""Pure UI helpers: formatting, chart data, and deterministic plotext output."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

from vtop.core.frame import EventKind
from vtop.core.session.history import SummaryHistory
from vtop.core.session.session import Mark
from vtop.core.store.summary import unknown_summary
from vtop.ui.chart_data import LineSpec, bucket_counts, line_points, mark_offsets
from vtop.ui.format import duration, percent, seconds
from vtop.ui.widgets.log_panel import ACCESS_LINE, compact

RENDER = """
from vtop.ui.widgets import plotting
from textual_plotext.plot import Plot
plot = Plot()
plot.plotsize(37, 10)
labels = ["0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75"]
labels += ["1", "2.5", "5", "7.5", "10", "20", "40", "80", "160", "640", "2560"]
positions = [float(i) for i in range(1, 23)]
plot.bar(positions, [0] * 10 + [3, 5, 8, 13, 2, 0, 0, 1, 0, 0, 0, 0], marker="sd")
plot.xticks(positions[::4], labels[::4])
plot.vline(13, "red")
print(plot.build())
"""


def render_with_hash_seed(seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-c", RENDER], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_charts_render_the_same_whatever_the_hash_seed() -> None:
    outputs = {render_with_hash_seed(seed) for seed in ("1", "2", "3", "4")}
    assert len(outputs) == 1


def test_formatting() -> None:
    assert seconds(None) == "-" and seconds(0.0123) == "12ms" and seconds(2.5) == "2.50s"
    assert seconds(42.0) == "42s" and percent(0.425) == "42%" and percent(None) == "-"
    assert duration(45) == "45s" and duration(600) == "10m" and duration(3 * 3600 + 300) == "3h05m"
    assert duration(2 * 86400 + 4 * 3600) == "2d04h" and duration(None) == "-"


def test_bucket_counts_are_per_bucket_and_drop_an_empty_inf() -> None:
    cumulative = [(0.1, 2.0), (0.5, 5.0), (1.0, 5.0), (float("inf"), 5.0)]
    assert bucket_counts(cumulative) == (["0.1", "0.5", "1"], [2.0, 3.0, 0.0])
    with_inf = [(0.1, 1.0), (float("inf"), 3.0)]
    assert bucket_counts(with_inf) == (["0.1", "+Inf"], [1.0, 2.0])


def test_line_points_are_relative_to_now_and_skip_unknowns() -> None:
    history = SummaryHistory(10)
    for at, running in [(60.0, 5.0), (90.0, 1.0), (95.0, None), (100.0, 3.0), (101.0, 4.0)]:
        history.append(at, dataclasses.replace(unknown_summary("t"), running=running))
    xs, ys = line_points(history, LineSpec("r", "running", 2.0), 100.0, 30.0)
    assert xs == [-10.0, 0.0] and ys == [2.0, 6.0]  # none before the span, none after now
    marks = [
        Mark(95.0, EventKind.RESTART, "t", ""),
        Mark(96.0, EventKind.FINDING, "t", ""),
        Mark(1.0, EventKind.KV, "t", ""),
    ]
    assert mark_offsets(marks, "t", 100.0, 30.0) == [-5.0]


def test_log_lines_are_compacted_and_access_lines_recognised() -> None:
    line = "(APIServer pid=7) INFO 11-29 11:11:30 [loggers.py:257] Engine 000: Avg prompt"
    assert compact(line) == "11:11:30 INFO Engine 000: Avg prompt"
    access = '(APIServer pid=7) INFO:     127.0.0.1:5 - "GET /metrics HTTP/1.1" 200 OK'
    assert ACCESS_LINE.search(access) and not ACCESS_LINE.search(line)
