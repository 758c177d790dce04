"""Pure text formatting for the dashboard (no Textual): numbers, ages, states, GPU rows."""

from __future__ import annotations

import time

from vtop.core.frame import GpuReading

NA = "-"


def number(value: float | None, pattern: str = "{:.0f}") -> str:
    """A figure, '-' when unknown."""
    return NA if value is None else pattern.format(value)


def percent(value: float | None) -> str:
    """0.42 -> '42%'."""
    return NA if value is None else f"{value * 100:.0f}%"


def seconds(value: float | None) -> str:
    """Latency in ms below one second, else seconds."""
    if value is None:
        return NA
    if value < 1:
        return f"{value * 1000:.0f}ms"
    return f"{value:.2f}s" if value < 10 else f"{value:.0f}s"


def gib(value: int | None) -> str:
    """Bytes as GiB."""
    return NA if value is None else f"{value / 2**30:.1f}G"


def duration(value: float | None) -> str:
    """Seconds as 45s, 12m, 3h05m, 2d04h."""
    if value is None or value < 0:
        return NA
    if value < 60:
        return f"{value:.0f}s"
    if value < 3600:
        return f"{value // 60:.0f}m"
    if value < 86400:
        return f"{value // 3600:.0f}h{value % 3600 // 60:02.0f}m"
    return f"{value // 86400:.0f}d{value % 86400 // 3600:02.0f}h"


def clock_time(timestamp: float) -> str:
    """HH:MM:SS in local time."""
    return time.strftime("%H:%M:%S", time.localtime(timestamp))


def gpu_row(gpu: GpuReading) -> list[str]:
    """GPU, util, memory, power/limit, temperature, SM clock, throttle reasons."""
    memory = f"{gib(gpu.memory_used_bytes)}/{gib(gpu.memory_total_bytes)}"
    power = f"{number(gpu.power_w)}/{number(gpu.power_limit_w)}W"
    reasons = ", ".join(gpu.throttle_reasons) or "none"
    return [
        str(gpu.index),
        number(gpu.utilization_pct, "{:.0f}%"),
        memory,
        power,
        number(gpu.temperature_c, "{:.0f}C"),
        number(gpu.sm_clock_mhz, "{:.0f}MHz"),
        reasons,
    ]


def gpu_users(gpu: GpuReading, vllm_pids: frozenset[int]) -> str:
    """Which processes use the GPU; vLLM's marked when known."""
    if not gpu.processes:
        return "no processes"
    names = [f"{p.pid}{' (vLLM)' if p.pid in vllm_pids else ''}" for p in gpu.processes]
    return "pids " + ", ".join(names)
