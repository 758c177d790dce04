"""The dashboard's widgets, one per module: each shows one piece of data it is given and never
fetches (header, action line, banner, charts, findings, GPUs, events, log)."""

__all__ = [
    "action_line",
    "banner",
    "chart_scroll",
    "event_log",
    "findings",
    "front_door",
    "gpu_panel",
    "header",
    "log_panel",
    "plotting",
    "time_chart",
    "ttft_histogram",
]
