"""KV-cache facts from `vllm:cache_config_info` labels (every CacheConfig field is a label)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vtop.core.frame import Sample
from vtop.core.histogram import optional_float

CACHE_CONFIG_INFO = "vllm:cache_config_info"


@dataclass(frozen=True)
class CacheConfig:
    """The KV-cache configuration one engine reports."""

    engine: str | None
    kv_capacity_tokens: int | None
    block_size: int | None
    num_gpu_blocks: int | None
    gpu_memory_utilization: float | None
    prefix_caching: bool | None
    cache_dtype: str | None
    max_concurrency: float | None
    kv_cache_memory_bytes: int | None
    num_gpu_blocks_override: int | None = None
    """0 when the server reports it unset ("None"); None when it does not report it."""
    kv_offloading_size: float | None = None
    """GiB of KV offload space (--kv-offloading-size): 0 when reported unset ("None")."""


def _int(value: str | None) -> int | None:
    """An integer label, None for absent or "None"."""
    number = optional_float(value)
    return None if number is None else int(number)


def _bool(value: str | None) -> bool | None:
    """A Python-bool label ("True"/"False"), None when absent."""
    if value in ("True", "true"):
        return True
    if value in ("False", "false"):
        return False
    return None


def _unset_is_zero(labels: dict[str, str], name: str) -> int | None:
    """An optional integer setting: 0 when reported as "None", None when not reported."""
    if labels.get(name) == "None":
        return 0
    return _int(labels.get(name))


def capacity_tokens(labels: dict[str, str]) -> int | None:
    """KV capacity in tokens: `kv_cache_size_tokens`, else num_gpu_blocks x block_size."""
    direct = _int(labels.get("kv_cache_size_tokens"))
    if direct is not None:
        return direct
    blocks, block_size = _int(labels.get("num_gpu_blocks")), _int(labels.get("block_size"))
    if blocks is None or block_size is None:
        return None
    return blocks * block_size


def cache_config_from_labels(labels: dict[str, str]) -> CacheConfig:
    """Read one `cache_config_info` sample's labels, matching label names exactly."""
    return CacheConfig(
        engine=labels.get("engine"),
        kv_capacity_tokens=capacity_tokens(labels),
        block_size=_int(labels.get("block_size")),
        num_gpu_blocks=_int(labels.get("num_gpu_blocks")),
        gpu_memory_utilization=optional_float(labels.get("gpu_memory_utilization")),
        prefix_caching=_bool(labels.get("enable_prefix_caching")),
        cache_dtype=labels.get("cache_dtype"),
        max_concurrency=optional_float(labels.get("kv_cache_max_concurrency")),
        kv_cache_memory_bytes=_unset_is_zero(labels, "kv_cache_memory_bytes"),
        num_gpu_blocks_override=_unset_is_zero(labels, "num_gpu_blocks_override"),
        kv_offloading_size=(
            0.0
            if labels.get("kv_offloading_size") == "None"
            else optional_float(labels.get("kv_offloading_size"))
        ),
    )


def cache_configs(samples: Sequence[Sample]) -> list[CacheConfig]:
    """Every engine's cache config found in a scrape, ordered by engine."""
    found = [
        cache_config_from_labels(dict(sample.series.labels))
        for sample in samples
        if sample.series.name == CACHE_CONFIG_INFO
    ]
    return sorted(found, key=lambda config: config.engine or "")


def total_capacity_tokens(configs: list[CacheConfig]) -> int | None:
    """KV capacity summed over engines; None when any engine's capacity is unknown."""
    capacities = [config.kv_capacity_tokens for config in configs]
    if not capacities or any(capacity is None for capacity in capacities):
        return None
    return sum(capacity for capacity in capacities if capacity is not None)
