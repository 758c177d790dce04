"""GPUs of remote replicas from NVIDIA's dcgm-exporter, joined to the vLLM servers that use them.

On a cluster vtop runs beside no GPU: dcgm-exporter exposes each GPU's fields (`DCGM_FI_DEV_*`)
labelled with the namespace and pod of the container that holds it, and Prometheus scrapes
both. A vLLM server scraped there carries its own pod's namespace and pod as target labels, so
a GPU joins the server whose pod holds it. Its fields become the `nvml:*` series vtop reads
from NVML on the host (same names and units), under that server, so the GPU rules judge the
right pod and the GPU figures show beside its engine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vtop.core.frame import Sample, Series

MIB = 1024.0 * 1024.0
FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": ("utilization_percent", 1.0),
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", MIB),
    "DCGM_FI_DEV_POWER_USAGE": ("power_watts", 1.0),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_watts", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_celsius", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
}
"""dcgm-exporter fields read as vtop's `nvml:` series: (name, factor to its unit)."""
MEMORY_PARTS = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")
"""Framebuffer used, free and reserved (MiB): their sum is the GPU's memory."""
REASONS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
"""The clock event (throttle) reasons bitmask, NVML's: its newer name and its older one."""
THROTTLE_BITS = {
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake": 0x80,
}
"""NVML's clock event reason bits, by the reason names of `nvml:throttle`."""
SELECTOR = (
    "DCGM_FI_DEV_("
    + "|".join(sorted({n.removeprefix("DCGM_FI_DEV_") for n in (*FIELDS, *MEMORY_PARTS, *REASONS)}))
    + ")"
)
"""The dcgm-exporter series vtop asks Prometheus for (a regex of metric names)."""


@dataclass(frozen=True)
class GpuReading:
    """One dcgm-exporter sample: the field, the GPU, the pod holding it, the value."""

    field: str
    gpu: str
    pod: tuple[str, str] | None
    value: float


def is_dcgm(name: str) -> bool:
    """True for a dcgm-exporter series vtop reads."""
    return name in FIELDS or name in MEMORY_PARTS or name in REASONS


def workload_pod(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """(namespace, pod) of the container holding a GPU. Scraped without honor_labels,
    Prometheus keeps the exporter's own pod as `pod` and the workload's as `exported_pod`."""
    namespace = labels.get("exported_namespace") or labels.get("namespace")
    pod = labels.get("exported_pod") or labels.get("pod")
    return (namespace, pod) if namespace and pod else None


def server_pod(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """(namespace, pod) a vLLM server's series carry (Kubernetes service discovery's target
    labels)."""
    namespace, pod = labels.get("namespace"), labels.get("pod")
    return (namespace, pod) if namespace and pod else None


def reading(labels: Mapping[str, str], value: float) -> GpuReading:
    """A dcgm-exporter sample as a reading (the GPU by its index, else its UUID)."""
    gpu = labels.get("gpu") or labels.get("UUID") or labels.get("device") or "?"
    return GpuReading(labels.get("__name__", ""), gpu, workload_pod(labels), value)


def gpu_samples(readings: Iterable[GpuReading]) -> list[Sample]:
    """Readings of one server's GPUs as `nvml:*` samples, one series per GPU."""
    by_gpu: dict[str, dict[str, float]] = {}
    for found in readings:
        by_gpu.setdefault(found.gpu, {})[found.field] = found.value
    samples: list[Sample] = []
    for gpu, fields in sorted(by_gpu.items()):
        labels = (("gpu", gpu),)
        for field, (name, factor) in FIELDS.items():
            if field in fields:
                samples.append(Sample(Series(f"nvml:{name}", labels), fields[field] * factor))
        if "DCGM_FI_DEV_FB_USED" in fields and "DCGM_FI_DEV_FB_FREE" in fields:
            total = sum(fields.get(part, 0.0) for part in MEMORY_PARTS) * MIB
            samples.append(Sample(Series("nvml:memory_total_bytes", labels), total))
        mask = next((fields[name] for name in REASONS if name in fields), None)
        if mask is not None and math.isfinite(mask) and mask >= 0:
            for reason, bit in THROTTLE_BITS.items():
                flag = 1.0 if int(mask) & bit else 0.0
                series = Series("nvml:throttle", (("gpu", gpu), ("reason", reason)))
                samples.append(Sample(series, flag))
    return samples
