"""KV-cache geometry: bytes per token, capacity, the model's config read once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from vtop.core.config.effective_config import server_config
from vtop.core.config.kv import ModelShape, bytes_per_token, capacity_tokens, max_num_seqs_for
from vtop.core.frame import ScrapeStatus, TargetScrape
from vtop.core.ingest.sources.server_facts import read_model_facts
from vtop.core.session.diagnose import (
    DiagnoseOptions,
)

TINY_CONFIG = {
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "hidden_size": 128,
    "head_dim": 64,
    "torch_dtype": "bfloat16",
}


def test_kv_formula_reproduces_the_seed_example() -> None:
    shape = ModelShape(layers=40, kv_heads=8, head_dim=128)
    assert bytes_per_token(shape) == 163_840
    capacity = capacity_tokens(20 * 2**30, 163_840)
    assert capacity == 131_072
    assert capacity // 4096 == 32
    assert bytes_per_token(shape, "fp8") == 81_920
    assert bytes_per_token(shape, tp=16) == 40 * 1 * 128 * 2 * 2  # TP beyond KV heads replicates
    assert max_num_seqs_for(1024, 96, 300) == 2  # 63 usable 16-token blocks, 25 per request
    assert max_num_seqs_for(1024, 96, 300, block_size=128) == 1  # 7 usable blocks, 4 per request


def test_kv_shape_from_configs() -> None:
    mla = ModelShape.from_config(
        {
            "num_hidden_layers": 61,
            "num_attention_heads": 128,
            "hidden_size": 7168,
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "torch_dtype": "bfloat16",
        }
    )
    assert bytes_per_token(mla, tp=8) == 61 * 576 * 2
    gqa = ModelShape.from_config(
        {
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "torch_dtype": "bfloat16",
        }
    )
    assert bytes_per_token(gqa) == 131_072


def test_the_model_config_is_read_once_at_the_edge_and_carried_as_data(tmp_path: Path) -> None:
    """KV bytes per token come from the model's config.json, read by the source (or the
    command line), never by the session: a frame that carries the geometry gives the same
    figure on a host without the model directory, and the core alone reads no file."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINY_CONFIG))
    facts = read_model_facts(str(model))
    told = DiagnoseOptions(vllm_args=f"--model {model}", model_facts=facts)
    assert server_config(None, None, told).number("kv_bytes_per_token") == 512
    untold = DiagnoseOptions(vllm_args=f"--model {model}")
    assert server_config(None, None, untold).number("kv_bytes_per_token") is None
    served = (("model", str(model), "/v1/models"), *facts)
    scrape = TargetScrape("http://x", ScrapeStatus.OK, server_settings=served)
    (model / "config.json").unlink()  # a replay on another host: the directory is not there
    config = server_config(scrape, None, DiagnoseOptions())
    assert config.number("kv_bytes_per_token") == 512
    assert config.settings["model_layers"].source == "model config.json"


def test_kv_cli_seed_example() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "vtop",
            "kv",
            "--layers",
            "40",
            "--kv-heads",
            "8",
            "--head-dim",
            "128",
            "--kv-memory-gib",
            "20",
            "--seq-len",
            "4096",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "163,840 B" in out.stdout and "131,072 tokens" in out.stdout
    assert "4,096 tokens per request: 32.0" in out.stdout
