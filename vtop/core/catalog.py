"""vLLM metric catalogue: names vtop uses, types, units, and aliases across vLLM versions."""

from __future__ import annotations

from dataclasses import dataclass

from vtop.core.frame import Series

FAMILY_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_gcount", "_gsum", "_info")
"""The suffixes of a family's samples (a histogram's `_bucket`, a counter's `_total`, ...)."""


@dataclass(frozen=True)
class MetricInfo:
    """One vLLM metric family as exposed on the wire."""

    name: str
    type: str
    unit: str
    description: str
    aliases: tuple[str, ...] = ()
    note: str = ""


def _m(
    name: str, kind: str, unit: str, description: str, *aliases: str, note: str = ""
) -> MetricInfo:
    return MetricInfo(
        f"vllm:{name}", kind, unit, description, tuple(f"vllm:{a}" for a in aliases), note
    )


METRICS: tuple[MetricInfo, ...] = (
    _m("num_requests_running", "gauge", "requests", "Requests in model execution batches"),
    _m(
        "num_requests_waiting",
        "gauge",
        "requests",
        "Requests waiting to be scheduled",
        note="since 2026-04 (#38435) capacity + deferred",
    ),
    _m(
        "num_requests_waiting_by_reason",
        "gauge",
        "requests",
        "Waiting by reason (capacity/deferred)",
    ),
    _m(
        "num_requests_swapped",
        "gauge",
        "requests",
        "Swapped requests",
        note="V0 only; removed v0.9.1",
    ),
    _m(
        "kv_cache_usage_perc",
        "gauge",
        "ratio",
        "KV-cache usage, 1 = full",
        "gpu_cache_usage_perc",
        note="gpu_cache_usage_perc before v0.9.2, removed in 0.12",
    ),
    _m("cpu_cache_usage_perc", "gauge", "ratio", "CPU swap cache usage", note="V0 only"),
    _m(
        "prefix_cache_queries_total",
        "counter",
        "tokens",
        "Prefix-cache queried tokens",
        "gpu_prefix_cache_queries_total",
        note="counted blocks before v0.9.0",
    ),
    _m(
        "prefix_cache_hits_total",
        "counter",
        "tokens",
        "Prefix-cache hit tokens",
        "gpu_prefix_cache_hits_total",
        note="counted blocks before v0.9.0",
    ),
    _m("gpu_prefix_cache_hit_rate", "gauge", "ratio", "Prefix-cache hit rate", note="V0 only"),
    _m("external_prefix_cache_queries_total", "counter", "tokens", "KV-connector cache queries"),
    _m("external_prefix_cache_hits_total", "counter", "tokens", "KV-connector cache hits"),
    _m("num_preemptions_total", "counter", "preemptions", "Cumulative preemptions"),
    _m("prompt_tokens_total", "counter", "tokens", "Prompt tokens, cached included"),
    _m("generation_tokens_total", "counter", "tokens", "Generated tokens"),
    _m("prompt_tokens_cached_total", "counter", "tokens", "Cached prompt tokens"),
    _m("request_success_total", "counter", "requests", "Finished requests by finished_reason"),
    _m("admission_rejections_total", "counter", "requests", "Requests rejected at admission"),
    _m("request_prompt_tokens", "histogram", "tokens", "Prompt length per finished request"),
    _m("request_generation_tokens", "histogram", "tokens", "Output length per finished request"),
    _m("request_params_max_tokens", "histogram", "tokens", "max_tokens request parameter"),
    _m("iteration_tokens_total", "histogram", "tokens", "Tokens per engine step"),
    _m("time_to_first_token_seconds", "histogram", "seconds", "Time to first token"),
    _m(
        "inter_token_latency_seconds",
        "histogram",
        "seconds",
        "Gap between output events",
        "time_per_output_token_seconds",
        note="time_per_output_token_seconds before 0.11 (removed 0.15)",
    ),
    _m("request_time_per_output_token_seconds", "histogram", "seconds", "Per-request TPOT"),
    _m("e2e_request_latency_seconds", "histogram", "seconds", "End-to-end request latency"),
    _m(
        "request_queue_time_seconds",
        "histogram",
        "seconds",
        "Time queued before first schedule",
        "time_in_queue_requests",
        note="time_in_queue_requests in V0 until v0.9.1",
    ),
    _m("request_prefill_time_seconds", "histogram", "seconds", "Prefill time"),
    _m("request_decode_time_seconds", "histogram", "seconds", "Decode time"),
    _m("request_inference_time_seconds", "histogram", "seconds", "Scheduled to last token"),
    _m("request_prefill_kv_computed_tokens", "histogram", "tokens", "Prompt tokens not from cache"),
    _m("request_num_preemptions", "histogram", "preemptions", "Preemptions per request"),
    _m("spec_decode_num_drafts_total", "counter", "drafts", "Speculative drafts"),
    _m("spec_decode_num_draft_tokens_total", "counter", "tokens", "Draft tokens proposed"),
    _m("spec_decode_num_accepted_tokens_total", "counter", "tokens", "Draft tokens accepted"),
    _m(
        "spec_decode_num_accepted_tokens_per_pos_total",
        "counter",
        "tokens",
        "Draft tokens accepted per draft position (label position)",
    ),
    _m(
        "prompt_tokens_by_source_total",
        "counter",
        "tokens",
        "Prompt tokens by source (label source: computed, cached locally, from a connector)",
    ),
    _m("estimated_flops_per_gpu_total", "counter", "flops", "Estimated FLOPs per GPU (MFU)"),
    _m(
        "estimated_read_bytes_per_gpu_total",
        "counter",
        "bytes",
        "Estimated bytes read per GPU (memory-bandwidth utilisation)",
    ),
    _m("kv_offload_load_bytes_total", "counter", "bytes", "KV bytes loaded from the offload tier"),
    _m("kv_offload_load_time_total", "counter", "seconds", "Time loading from the offload tier"),
    _m("kv_offload_store_bytes_total", "counter", "bytes", "KV bytes stored to the offload tier"),
    _m("kv_offload_store_time_total", "counter", "seconds", "Time storing to the offload tier"),
    _m(
        "kv_offload_total_bytes_total",
        "counter",
        "bytes",
        "KV offload bytes, both directions (label transfer_type)",
        note="split into kv_offload_load_bytes and kv_offload_store_bytes in 2026-06",
    ),
    _m(
        "kv_offload_total_time_total",
        "counter",
        "seconds",
        "KV offload transfer time, both directions (label transfer_type)",
        note="split into kv_offload_load_time and kv_offload_store_time in 2026-06",
    ),
    _m(
        "kv_offload_allocation_failure_total",
        "counter",
        "failures",
        "Offload tier allocations that failed",
    ),
    _m("hf3fs_num_failed_load_total", "counter", "loads", "Failed HF3FS KV loads"),
    _m("mooncake_store_operation_total", "counter", "operations", "Mooncake store operations"),
    _m(
        "mooncake_store_operation_failed_keys_total",
        "counter",
        "keys",
        "Mooncake store keys that failed in operations",
    ),
    _m("nixl_xfer_time_seconds", "histogram", "seconds", "NIXL KV transfer duration"),
    _m("nixl_num_failed_transfers_total", "counter", "transfers", "Failed NIXL KV transfers"),
    _m(
        "nixl_num_failed_notifications_total",
        "counter",
        "notifications",
        "Failed NIXL KV notifications",
    ),
    _m("cache_config_info", "gauge", "info", "CacheConfig fields as labels"),
    _m("engine_sleep_state", "gauge", "state", "Sleep/wake state"),
    _m("lora_requests_info", "gauge", "info", "Running/waiting LoRA adapters"),
)

CANONICAL_BY_ALIAS: dict[str, str] = {}
for _info in METRICS:
    for _alias in _info.aliases:
        for _suffix in ("", "_bucket", "_sum", "_count", "_created"):
            CANONICAL_BY_ALIAS[_alias + _suffix] = _info.name + _suffix
MAX_CACHED = 200_000
BY_NAME: dict[str, MetricInfo] = {info.name: info for info in METRICS}


RAY_PREFIXES = ("ray_vllm:", "ray_vllm_")
"""Ray Serve exports vLLM's metrics through Ray's own exporter: `ray_` ahead of the name, and
the `:` turned into `_` by vLLM's Ray wrappers (`vllm/v1/metrics/ray_wrappers.py`)."""


def canonical_name(name: str) -> str:
    """The current wire name for `name` (itself when it is not an old alias or a Ray name)."""
    for prefix in RAY_PREFIXES:
        if name.startswith(prefix):
            name = "vllm:" + name[len(prefix) :]
            break
    return CANONICAL_BY_ALIAS.get(name, name)


ALERTS = "ALERTS"
"""Prometheus's series of active alerts (read for the exported rules' alerts)."""


def is_vllm(name: str) -> bool:
    """True for a vLLM engine metric (`vllm:`, or Ray Serve's `ray_vllm:` / `ray_vllm_`)."""
    return name.startswith(("vllm:", *RAY_PREFIXES))


class Normalizer:
    """Maps raw series to canonical names, caching per series; new metrics pass through."""

    def __init__(self) -> None:
        self._canonical: dict[Series, tuple[Series, bool]] = {}

    def normalize(self, series: Series) -> tuple[Series, bool]:
        """The canonical series and whether the raw name was an old alias."""
        known = self._canonical.get(series)
        if known is None:
            if len(self._canonical) >= MAX_CACHED:
                self._canonical.clear()
            name = canonical_name(series.name)
            known = (Series(name, series.labels), name != series.name)
            self._canonical[series] = known
        return known


def sample_type(name: str) -> str:
    """The exposition type of a sample name when none was declared: the catalogue's, else by
    suffix (counters end in _total)."""
    for suffix in ("_bucket", "_sum", "_count"):
        family = name.removesuffix(suffix)
        if family != name and family in BY_NAME and BY_NAME[family].type == "histogram":
            return "histogram"
    if name in BY_NAME:
        return BY_NAME[name].type
    return "counter" if name.endswith("_total") else "gauge"


def family_of(sample_name: str, types: dict[str, str]) -> tuple[str, str]:
    """The family a sample belongs to and its declared type ('untyped' when undeclared)."""
    declared = types.get(sample_name)
    if declared is not None:
        return sample_name, declared
    for suffix in FAMILY_SUFFIXES:
        if sample_name.endswith(suffix):
            family = sample_name[: -len(suffix)]
            if family in types:
                return family, types[family]
    return sample_name, "untyped"
