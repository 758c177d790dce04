"""An exposition of NVIDIA's dcgm-exporter, written by prometheus_client from its field
definitions (etc/default-counters.csv: names, gauge types, units) and the labels it puts on
every series (gpu, UUID, device, modelName, Hostname, and the pod holding the GPU when it maps
pods): no dcgm-exporter runs here (no GPU)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge, generate_latest

LABELS = ["gpu", "UUID", "device", "modelName", "Hostname", "container", "namespace", "pod"]
HW_SLOWDOWN = 0x8
"""NVML's clock event reason bit of a hardware slowdown."""


@dataclass(frozen=True)
class Gpu:
    """One GPU as dcgm-exporter reports it, with the pod that holds it."""

    index: int
    namespace: str
    pod: str
    utilization_pct: float
    throttle_reasons: int = 0
    fb_used_mib: float = 70_000.0
    fb_free_mib: float = 10_000.0


def dcgm_exposition(gpus: list[Gpu]) -> str:
    registry = CollectorRegistry()

    def gauge(name: str, help_text: str) -> Gauge:
        return Gauge(name, help_text, LABELS, registry=registry)

    util = gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).")
    used = gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).")
    free = gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).")
    power = gauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).")
    temp = gauge("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).")
    clock = gauge("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).")
    reasons = gauge("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Current clock throttle reasons.")
    for gpu in gpus:
        labels = (
            str(gpu.index),
            f"GPU-{gpu.index:08d}-0000-0000-0000-000000000000",
            f"nvidia{gpu.index}",
            "NVIDIA H100 80GB HBM3",
            "gpu-node-1",
            "vllm",
            gpu.namespace,
            gpu.pod,
        )
        util.labels(*labels).set(gpu.utilization_pct)
        used.labels(*labels).set(gpu.fb_used_mib)
        free.labels(*labels).set(gpu.fb_free_mib)
        power.labels(*labels).set(550.0)
        temp.labels(*labels).set(88.0 if gpu.throttle_reasons else 60.0)
        clock.labels(*labels).set(1100.0 if gpu.throttle_reasons else 1980.0)
        reasons.labels(*labels).set(gpu.throttle_reasons)
    return generate_latest(registry).decode()
