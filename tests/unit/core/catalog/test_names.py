"""Metric catalogue aliases and cache_config_info decoding."""

from __future__ import annotations

from tests.support.payloads import fixture
from vtop.core.catalog.names import BY_NAME, canonical_name
from vtop.core.config.cache_config import (
    cache_config_from_labels,
    cache_configs,
    total_capacity_tokens,
)
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.rules.loader import load_rules


def test_aliases_map_old_names_to_current() -> None:
    assert canonical_name("vllm:gpu_cache_usage_perc") == "vllm:kv_cache_usage_perc"
    assert canonical_name("vllm:gpu_prefix_cache_hits_total") == "vllm:prefix_cache_hits_total"
    assert (
        canonical_name("vllm:time_per_output_token_seconds_bucket")
        == "vllm:inter_token_latency_seconds_bucket"
    )
    assert canonical_name("vllm:something_new") == "vllm:something_new"


def test_catalogue_types_agree_with_a_real_scrape() -> None:
    types = ExpositionParser().parse(fixture("underload")).types
    for name, info in BY_NAME.items():
        if name in types:
            assert types[name] == info.type, name


def test_cache_config_from_real_scrape() -> None:
    samples = ExpositionParser().parse(fixture("underload")).samples
    [config] = cache_configs(samples)
    assert config.kv_capacity_tokens == 1024
    assert config.block_size == 128
    assert config.prefix_caching is True
    assert config.gpu_memory_utilization == 0.92
    assert total_capacity_tokens([config]) == 1024
    assert config.num_gpu_blocks_override == 8 and config.kv_cache_memory_bytes == 1024**3
    [idle] = cache_configs(ExpositionParser().parse(fixture("idle")).samples)
    assert idle.num_gpu_blocks_override == 0  # reported as "None": not set


def test_capacity_falls_back_to_blocks_times_block_size_and_none_is_unknown() -> None:
    old = cache_config_from_labels({"num_gpu_blocks": "2000", "block_size": "16"})
    assert old.kv_capacity_tokens == 32000
    assert old.prefix_caching is None
    unknown = cache_config_from_labels({"num_gpu_blocks": "None", "block_size": "16"})
    assert unknown.kv_capacity_tokens is None
    assert total_capacity_tokens([old, unknown]) is None
    assert old.num_gpu_blocks_override is None  # not reported at all: unknown, not "unset"


def test_every_name_a_shipped_rule_reads_is_in_the_catalogue() -> None:
    """A name the catalogue lacks is typed by its suffix alone (a histogram's `_count` as a
    counter, its `_bucket` as a gauge) in `--prometheus` mode and in rule tests."""
    read = {name for rule in load_rules() for name in rule.names_read if name.startswith("vllm:")}
    lacking = sorted(name for name in read if family(name) not in BY_NAME)
    assert not lacking, lacking


def family(name: str) -> str:
    """A sample name's catalogue entry: a histogram's family, a counter's own name."""
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name.removesuffix(suffix) in BY_NAME:
            return name.removesuffix(suffix)
    return name
