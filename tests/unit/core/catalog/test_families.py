"""The catalogue as data: every family from vLLM 0.6 on, renames that point somewhere, and the
old names read as the families they became."""

from __future__ import annotations

from vtop.core.catalog.families import COUNTER, FAMILIES, GAUGE, HISTOGRAM
from vtop.core.catalog.names import BY_NAME, canonical_name, sample_type

V0_AT_0_6 = [
    "num_requests_running",
    "num_requests_waiting",
    "num_requests_swapped",
    "gpu_cache_usage_perc",
    "cpu_cache_usage_perc",
    "gpu_prefix_cache_hit_rate",
    "cpu_prefix_cache_hit_rate",
    "num_preemptions_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "time_to_first_token_seconds",
    "time_per_output_token_seconds",
    "e2e_request_latency_seconds",
    "request_prompt_tokens",
    "request_generation_tokens",
    "request_params_n",
    "request_params_best_of",
    "request_success_total",
    "spec_decode_draft_acceptance_rate",
    "spec_decode_efficiency",
    "spec_decode_num_accepted_tokens_total",
    "spec_decode_num_draft_tokens_total",
    "spec_decode_num_emitted_tokens_total",
    "cache_config_info",
    "avg_prompt_throughput_toks_per_s",
    "avg_generation_throughput_toks_per_s",
    "lora_requests_info",
    "request_queue_time_seconds",
    "request_inference_time_seconds",
    "request_prefill_time_seconds",
    "request_decode_time_seconds",
    "time_in_queue_requests",
    "model_forward_time_milliseconds",
    "model_execute_time_milliseconds",
    "request_max_num_generation_tokens",
    "request_params_max_tokens",
    "tokens_total",
    "iteration_tokens_total",
]
"""V0's families from 0.6.0 to 0.6.5 (vLLM's engine/metrics.py of those releases)."""


def test_every_family_vllm_exported_since_0_6_is_catalogued() -> None:
    lacking = [name for name in V0_AT_0_6 if f"vllm:{name}" not in BY_NAME]
    assert lacking == []


def test_every_row_is_typed_dated_and_unique() -> None:
    names = [info.name for info in FAMILIES]
    assert len(names) == len(set(names)) >= 140
    for info in FAMILIES:
        assert info.type in (COUNTER, GAUGE, HISTOGRAM), info
        assert info.since and info.unit and info.description, info
        assert (info.type == COUNTER) == info.name.endswith("_total") or (
            info.name == "vllm:iteration_tokens_total"  # a histogram, named so since V0
        ), info


def test_a_rename_points_at_a_family_of_the_same_type_and_is_read_as_it() -> None:
    renamed = [info for info in FAMILIES if info.renamed_to]
    assert len(renamed) >= 5
    for old in renamed:
        new = BY_NAME[old.renamed_to]
        assert old.removed and new.type == old.type and not new.removed, (old, new)
        assert old.name in new.aliases
        assert canonical_name(old.name) == new.name
    assert canonical_name("vllm:time_per_output_token_seconds_bucket") == (
        "vllm:inter_token_latency_seconds_bucket"
    )


def test_a_family_removed_without_a_successor_keeps_its_own_name_and_type() -> None:
    assert canonical_name("vllm:num_requests_swapped") == "vllm:num_requests_swapped"
    assert sample_type("vllm:model_forward_time_milliseconds_bucket") == HISTOGRAM
    assert sample_type("vllm:kv_offload_tiering_lookup_sync_delay_seconds_count") == HISTOGRAM
    assert sample_type("vllm:kv_offload_cpu_cache_usage_perc") == GAUGE
