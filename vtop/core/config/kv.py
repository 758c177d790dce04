"""KV-cache sizing: bytes per token from a model config, capacity in tokens, concurrency.

bytes/token per GPU = c x (layers / PP) x max(1, kv_heads // TP) x head_dim x dtype bytes,
with c = 2 (K and V), or c = 1 and head_dim = kv_lora_rank + qk_rope_head_dim for MLA
(the latent is replicated on every TP rank).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DTYPE_BYTES = {
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "auto": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
    "int8": 1,
}
GIB = 1024**3
MODEL_CONFIG = "model config.json"
"""The source named for settings read from the model's config.json."""


@dataclass(frozen=True)
class ModelShape:
    """The attention geometry that decides KV size."""

    layers: int
    kv_heads: int
    head_dim: int
    mla: bool = False
    dtype: str = "bfloat16"
    sliding_window: int | None = None

    @staticmethod
    def from_config(config: dict[str, Any]) -> ModelShape:
        """Read a Hugging Face config.json (text_config for multimodal models)."""
        config = config.get("text_config") or config
        heads = int(config["num_attention_heads"])
        mla = "kv_lora_rank" in config and config.get("kv_lora_rank") is not None
        if mla:
            head_dim = int(config["kv_lora_rank"]) + int(config.get("qk_rope_head_dim", 0))
        else:
            head_dim = int(config.get("head_dim") or config["hidden_size"] // heads)
        return ModelShape(
            layers=int(config["num_hidden_layers"]),
            kv_heads=1 if mla else int(config.get("num_key_value_heads") or heads),
            head_dim=head_dim,
            mla=mla,
            dtype=str(config.get("torch_dtype") or config.get("dtype") or "bfloat16"),
            sliding_window=config.get("sliding_window"),
        )

    @staticmethod
    def from_path(path: Path) -> ModelShape:
        """Read config.json from a model directory or the file itself."""
        file = path / "config.json" if path.is_dir() else path
        return ModelShape.from_config(json.loads(file.read_text()))

    def facts(self) -> tuple[tuple[str, float | str | bool, str], ...]:
        """The shape as settings (`model_layers`, ...) read from the model's config.json: what
        a source carries in the frame, so that a replay anywhere sizes the KV cache alike."""
        values: dict[str, float | str | bool] = {
            "model_layers": self.layers,
            "model_kv_heads": self.kv_heads,
            "model_head_dim": self.head_dim,
            "model_mla": self.mla,
            "model_dtype": self.dtype,
        }
        if self.sliding_window:
            values["model_sliding_window"] = self.sliding_window
        return tuple((name, value, MODEL_CONFIG) for name, value in values.items())

    @staticmethod
    def from_settings(settings: Mapping[str, object]) -> ModelShape | None:
        """The shape from `facts()` as they stand in a config (None when any is missing)."""
        layers, heads, dim = (_whole(settings.get(f"model_{n}")) for n in SHAPE_NUMBERS)
        if layers is None or heads is None or dim is None:
            return None
        return ModelShape(
            layers,
            heads,
            dim,
            mla=settings.get("model_mla") is True,
            dtype=str(settings.get("model_dtype") or "bfloat16"),
            sliding_window=_whole(settings.get("model_sliding_window")),
        )


SHAPE_NUMBERS = ("layers", "kv_heads", "head_dim")


def _whole(value: object) -> int | None:
    """A positive whole number setting, None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return int(value)


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a (KV-cache) dtype name."""
    key = dtype.lower().removeprefix("torch.")
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[key]


def bytes_per_token(
    shape: ModelShape, kv_cache_dtype: str = "auto", tp: int = 1, pp: int = 1
) -> int:
    """KV bytes one token occupies on one GPU (ValueError for a split vLLM refuses)."""
    refusal = tp_refusal(shape, tp)
    if refusal is not None:
        raise ValueError(refusal)
    element = dtype_bytes(shape.dtype if kv_cache_dtype == "auto" else kv_cache_dtype)
    factor = 1 if shape.mla else 2
    heads = shape.kv_heads if shape.mla else max(1, shape.kv_heads // tp)
    layers = math.ceil(shape.layers / pp)
    return factor * layers * heads * shape.head_dim * element


def tp_refusal(shape: ModelShape, tp: int) -> str | None:
    """Why vLLM would refuse to split the KV heads over `tp` GPUs, or None: its QKV layer
    divides the KV heads evenly over the ranks, or replicates each head over a whole number of
    ranks when there are fewer heads than ranks (QKVParallelLinear). An MLA latent is one head
    replicated on every rank."""
    if shape.mla or tp <= 1:
        return None
    heads = shape.kv_heads
    if (heads >= tp and heads % tp == 0) or (heads < tp and tp % heads == 0):
        return None
    return (
        f"--tp {tp} does not divide {heads} KV heads evenly (vLLM needs the KV heads to be a "
        f"multiple of the tensor-parallel size, or the size a multiple of the heads)"
    )


def capacity_tokens(kv_bytes: float, per_token: int, block_size: int = 16) -> int:
    """Tokens a KV budget holds, whole blocks only (as vLLM allocates)."""
    blocks = int(kv_bytes // (per_token * block_size))
    return blocks * block_size


def kv_budget_bytes(
    gpu_memory_bytes: float, utilization: float, weights_bytes: float, activation_bytes: float = 0.0
) -> float:
    """KV memory left on one GPU: utilization x total minus weights and activations."""
    return max(0.0, gpu_memory_bytes * utilization - weights_bytes - activation_bytes)


def concurrency(capacity: int, tokens_per_request: int) -> float:
    """How many requests of a given total length fit at once."""
    return capacity / tokens_per_request if tokens_per_request > 0 else math.inf


def max_num_seqs_for(
    capacity: float, prompt_tokens: float, output_tokens: float, block_size: int = 16
) -> int:
    """Sequences that 90% of the usable KV blocks hold, each request taking whole blocks.

    One block is vLLM's reserved null block; this matters when blocks are few or large.
    """
    usable_blocks = math.floor(capacity / block_size) - 1
    blocks_per_request = math.ceil((prompt_tokens + output_tokens) / block_size)
    return max(1, math.floor(0.9 * usable_blocks / blocks_per_request))
