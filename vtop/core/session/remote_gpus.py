"""A server's own GPUs, as the GPU panel shows them: the `nvml:*` series stored under the
server (a remote replica's GPUs, joined from dcgm-exporter by pod), read back as a snapshot."""

from __future__ import annotations

from vtop.core.frame import GpuReading, GpuSnapshot, GpuStatus
from vtop.core.store.gpu_series import THROTTLE_SERIES_NAMES
from vtop.core.store.store import INSTANCE, Store

REASON_NAMES = {short: name for name, short in THROTTLE_SERIES_NAMES.items()}
"""`nvml:throttle`'s reason label by the name the GPU panel shows."""


def own_gpus(store: Store, target: str, now: float) -> GpuSnapshot | None:
    """The target's own GPUs at `now` (None when it has none: the host's are shown)."""
    where = {INSTANCE: target}
    values: dict[str, dict[str, float]] = {}
    for name in GPU_FIELDS:
        for series in store.select(f"nvml:{name}", where):
            value = store.latest(series, now)
            if value is not None:
                values.setdefault(series.label("gpu") or "?", {})[name] = value
    if not values:
        return None
    throttled: dict[str, list[str]] = {}
    for series in store.select("nvml:throttle", where):
        reason = REASON_NAMES.get(series.label("reason") or "")
        if reason is not None and store.latest(series, now) == 1.0:
            throttled.setdefault(series.label("gpu") or "?", []).append(reason)
    readings = tuple(
        _reading(gpu, position, fields, tuple(throttled.get(gpu, ())))
        for position, (gpu, fields) in enumerate(sorted(values.items()))
    )
    return GpuSnapshot(GpuStatus.OK, readings, message=f"{target}'s own GPUs (dcgm-exporter)")


GPU_FIELDS = (
    "utilization_percent",
    "memory_used_bytes",
    "memory_total_bytes",
    "power_watts",
    "power_limit_watts",
    "temperature_celsius",
    "sm_clock_mhz",
)
"""The `nvml:<name>` series a GPU reading is filled from."""


def _reading(
    gpu: str, position: int, fields: dict[str, float], throttled: tuple[str, ...]
) -> GpuReading:
    return GpuReading(
        index=int(gpu) if gpu.isdigit() else position,
        utilization_pct=fields.get("utilization_percent"),
        memory_used_bytes=_whole(fields.get("memory_used_bytes")),
        memory_total_bytes=_whole(fields.get("memory_total_bytes")),
        power_w=fields.get("power_watts"),
        power_limit_w=fields.get("power_limit_watts"),
        temperature_c=fields.get("temperature_celsius"),
        sm_clock_mhz=_whole(fields.get("sm_clock_mhz")),
        throttle_reasons=throttled,
    )


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)
