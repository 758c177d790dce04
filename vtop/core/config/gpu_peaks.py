"""Peak dense BF16 tensor throughput and memory bandwidth per GPU model, by NVML name.

Figures are NVIDIA's datasheet numbers without sparsity; model FLOPs utilisation (MFU) and
memory-bandwidth utilisation (MBU) divide vLLM's `estimated_flops_per_gpu_total` and
`estimated_read_bytes_per_gpu_total` rates by them.
"""

from __future__ import annotations

from dataclasses import dataclass

TERA = 1e12


@dataclass(frozen=True)
class GpuPeak:
    """One GPU model's peaks."""

    model: str
    match: str
    """Substring of the NVML device name (checked in table order: most specific first)."""
    flops: float
    bytes_per_s: float
    source: str


PEAKS: tuple[GpuPeak, ...] = (
    GpuPeak("GB200", "GB200", 2500 * TERA, 8.0 * TERA, "NVIDIA GB200 NVL72 datasheet, per GPU"),
    GpuPeak("B200", "B200", 2250 * TERA, 8.0 * TERA, "NVIDIA DGX B200 / HGX B200 datasheet"),
    GpuPeak("H200 NVL", "H200 NVL", 835 * TERA, 4.8 * TERA, "NVIDIA H200 datasheet (NVL)"),
    GpuPeak("H200", "H200", 989 * TERA, 4.8 * TERA, "NVIDIA H200 datasheet (SXM)"),
    GpuPeak("H100 NVL", "H100 NVL", 835 * TERA, 3.9 * TERA, "NVIDIA H100 datasheet (NVL)"),
    GpuPeak("H100 PCIe", "H100 PCIe", 756 * TERA, 2.0 * TERA, "NVIDIA H100 datasheet (PCIe)"),
    GpuPeak("H100 SXM", "H100", 989 * TERA, 3.35 * TERA, "NVIDIA H100 datasheet (SXM)"),
    GpuPeak("A100 40GB", "A100-SXM4-40GB", 312 * TERA, 1.555 * TERA, "NVIDIA A100 datasheet"),
    GpuPeak("A100 PCIe 40GB", "A100-PCIE-40GB", 312 * TERA, 1.555 * TERA, "NVIDIA A100 datasheet"),
    GpuPeak("A100 PCIe 80GB", "A100 80GB PCIe", 312 * TERA, 1.935 * TERA, "NVIDIA A100 datasheet"),
    GpuPeak("A100 SXM 80GB", "A100", 312 * TERA, 2.039 * TERA, "NVIDIA A100 datasheet (SXM)"),
    GpuPeak("L40S", "L40S", 362 * TERA, 0.864 * TERA, "NVIDIA L40S datasheet"),
    GpuPeak("L4", "L4", 121 * TERA, 0.3 * TERA, "NVIDIA L4 datasheet"),
    GpuPeak("A10G", "A10G", 125 * TERA, 0.6 * TERA, "NVIDIA A10G (AWS G5) specifications"),
    GpuPeak("A10", "A10", 125 * TERA, 0.6 * TERA, "NVIDIA A10 datasheet"),
)


def peak_for(nvml_name: str) -> GpuPeak | None:
    """The table entry whose match is in the NVML name, None for a GPU not in the table."""
    return next((peak for peak in PEAKS if peak.match in nvml_name), None)
