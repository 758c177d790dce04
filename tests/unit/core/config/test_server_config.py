"""The effective server config: flags, the startup log, the scrape, what is unknown."""

from __future__ import annotations

import pytest

from tests.support.frames import TARGET
from tests.support.payloads import DATA, fixture
from tests.support.storm import storm_frames
from vtop.core.config.cache_config import cache_configs
from vtop.core.config.server_config import assemble, from_argv, from_log
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.rules.engine import ProposedChange
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import (
    DiagnoseOptions,
    diagnose_frames,
)
from vtop.text.report import proposed_value, text_report


def test_a_switch_is_true_or_false_and_a_word_stays_a_word() -> None:
    on = ProposedChange("--enable-prefix-caching", None, "--enable-prefix-caching", "", "")
    off = ProposedChange("--enable-prefix-caching", None, "--no-enable-prefix-caching", "", "")
    word = ProposedChange("--kv-cache-dtype", None, "--kv-cache-dtype fp8", "", "")
    count = ProposedChange("--max-num-seqs", 16.0, 8.0, "", "")
    assert [proposed_value(c) for c in (on, off, word, count)] == [True, False, "fp8", 8]
    assert isinstance(proposed_value(count), int)


def test_unknown_settings_are_reported_with_the_option_that_fixes_it() -> None:
    diagnosis = diagnose_frames(TARGET, storm_frames(), load_rules(), DiagnoseOptions())
    assert diagnosis.triage is not None
    primary = diagnosis.triage.primary
    assert primary is not None and primary.rule.id == "M1"
    change = next(c for c in primary.changes if c.flag == "--max-num-seqs")
    assert change.current is None and change.proposed == 1.0  # capacity is known, MNS is not
    unchecked = {u.rule.id: u.how for u in diagnosis.triage.unchecked}
    assert "--max-num-seqs" in unchecked["Q2"] and "--vllm-args" in unchecked["Q2"]
    assert "NOT CHECKED" in text_report(diagnosis)


def test_config_from_real_startup_log_and_scrape() -> None:
    log = (DATA / "vllm-0.32-cpu-serve.log").read_text()
    settings, facts = from_log(log)
    assert settings["max_num_seqs"].value == 16 and settings["max_num_seqs"].source == "log"
    assert settings["kv_capacity_tokens"].value == 1024
    assert settings["max_model_len"].value == 512
    assert facts.version == "0.32.0" and facts.init_seconds == pytest.approx(19.29)
    samples = ExpositionParser().parse(fixture("underload")).samples
    config = assemble(log_text=log, cache_configs=cache_configs(samples))
    metrics = config.pseudo_metrics()
    assert metrics["vtop:kv_capacity_tokens"] == 1024 and metrics["vtop:prefix_caching"] == 1.0
    assert metrics["vtop:max_num_batched_tokens"] is None  # not logged on this build: unknown
    assert metrics["vtop:num_gpu_blocks_override"] == 8  # this server pins its KV pool
    assert metrics["vtop:kv_cache_fp8"] == 0.0


def test_kv_pool_settings_default_to_unset_once_anything_is_known() -> None:
    fp8 = assemble(argv="vllm serve m --kv-cache-dtype fp8_e4m3").pseudo_metrics()
    assert fp8["vtop:kv_cache_fp8"] == 1.0 and fp8["vtop:num_gpu_blocks_override"] == 0.0
    assert fp8["vtop:kv_cache_memory_bytes"] == 0.0
    pinned = assemble(argv="vllm serve m --num-gpu-blocks-override 512").pseudo_metrics()
    assert pinned["vtop:num_gpu_blocks_override"] == 512
    assert assemble().pseudo_metrics()["vtop:num_gpu_blocks_override"] is None


def test_argv_forms_and_precedence() -> None:
    argv = (
        "vllm serve org/model -tp 2 --max-num-seqs=64 --no-enable-prefix-caching"
        " --gpu-memory-utilization 0.9"
    )
    settings = from_argv(argv)
    assert settings["model"].value == "org/model"
    assert settings["tensor_parallel_size"].value == 2
    assert settings["max_num_seqs"].value == 64
    assert settings["prefix_caching"].value is False
    config = assemble(argv=argv, gpu_memory_bytes=141 * 2**30, gpu_name="NVIDIA H200")
    assert config.settings["max_num_seqs"].source == "argv"
    assert config.settings["max_num_batched_tokens"].value == 8192
    assert (
        assemble(gpu_memory_bytes=80 * 2**30, gpu_name="NVIDIA A100-SXM4-80GB").get("max_num_seqs")
        == 256
    )
    assert assemble().get("max_num_seqs") is None  # no GPU, no guess
