"""GPU readings as host-level `nvml:*` series, so rules read them like metrics (the store's
conversion: no source is imported by the store)."""

from __future__ import annotations

from vtop.core.frame import GpuSnapshot, GpuStatus, Sample, ScrapeStatus, Series, TargetScrape

GPU_TARGET = "local-gpus"
THROTTLE_SERIES_NAMES = {
    "software power cap": "sw_power_cap",
    "hardware slowdown": "hw_slowdown",
    "software thermal slowdown": "sw_thermal_slowdown",
    "hardware thermal slowdown": "hw_thermal_slowdown",
    "hardware power brake": "hw_power_brake",
}


def gpu_samples(snapshot: GpuSnapshot) -> list[Sample]:
    """GPU readings as host-level `nvml:*` series, so rules can use them like metrics."""
    samples: list[Sample] = []
    for gpu in snapshot.gpus:
        labels = (("gpu", str(gpu.index)), ("instance", GPU_TARGET))
        fields = {
            "utilization_percent": gpu.utilization_pct,
            "memory_used_bytes": gpu.memory_used_bytes,
            "memory_total_bytes": gpu.memory_total_bytes,
            "power_watts": gpu.power_w,
            "power_limit_watts": gpu.power_limit_w,
            "temperature_celsius": gpu.temperature_c,
            "sm_clock_mhz": gpu.sm_clock_mhz,
        }
        for name, value in fields.items():
            if value is not None:
                samples.append(Sample(Series(f"nvml:{name}", labels), float(value)))
        if gpu.clock_event_reasons is not None:
            for reason, short in THROTTLE_SERIES_NAMES.items():
                throttle_labels = (
                    ("gpu", str(gpu.index)),
                    ("instance", GPU_TARGET),
                    ("reason", short),
                )
                flag = 1.0 if reason in gpu.throttle_reasons else 0.0
                samples.append(Sample(Series("nvml:throttle", throttle_labels), flag))
    return samples


def gpu_scrape(snapshot: GpuSnapshot) -> TargetScrape:
    """GPU readings as a scrape of the host-level target, for the store."""
    status = ScrapeStatus.OK if snapshot.state is GpuStatus.OK else ScrapeStatus.UNREACHABLE
    samples = tuple(gpu_samples(snapshot))
    return TargetScrape(GPU_TARGET, status, samples=samples, error=snapshot.message)
