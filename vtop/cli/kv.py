"""`vtop kv`: KV-cache capacity calculator."""

from __future__ import annotations

import argparse
from pathlib import Path

from vtop.cli.errors import CliError
from vtop.cli.options import fraction, not_negative_float, positive_float, positive_int
from vtop.cli.options import parser as options_parser
from vtop.core.config.kv import (
    GIB,
    ModelShape,
    bytes_per_token,
    capacity_tokens,
    concurrency,
    kv_budget_bytes,
    max_num_seqs_for,
)


def kv_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop kv`."""
    parser = options_parser(
        "vtop kv", "KV bytes per token, capacity in tokens and concurrency for a model"
    )
    parser.add_argument("--model-config", type=Path, help="config.json or a model directory")
    parser.add_argument(
        "--layers", type=positive_int, help="hidden layers (without --model-config)"
    )
    parser.add_argument("--kv-heads", type=positive_int, help="KV heads (without --model-config)")
    parser.add_argument(
        "--head-dim", type=positive_int, help="head dimension (without --model-config)"
    )
    parser.add_argument("--dtype", default="bfloat16", help="model dtype (default bfloat16)")
    parser.add_argument("--kv-cache-dtype", default="auto", help="auto, fp8, ...")
    parser.add_argument("--tp", type=positive_int, default=1, help="tensor parallel size")
    parser.add_argument("--pp", type=positive_int, default=1, help="pipeline parallel size")
    parser.add_argument("--block-size", type=positive_int, default=16, help="tokens per KV block")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--kv-memory-gib", type=positive_float, help="KV memory per GPU, GiB")
    budget.add_argument(
        "--gpu-memory-gib", type=positive_float, help="GPU memory, GiB (with --weights-gib)"
    )
    parser.add_argument(
        "--gpu-memory-utilization", type=fraction, default=0.92, help="vLLM's share of the GPU"
    )
    parser.add_argument(
        "--weights-gib", type=not_negative_float, default=0.0, help="weights per GPU, GiB"
    )
    parser.add_argument(
        "--activation-gib", type=not_negative_float, default=0.0, help="activation reserve, GiB"
    )
    parser.add_argument("--seq-len", type=positive_int, help="tokens per request (prompt + output)")
    return parser


def shape_from(args: argparse.Namespace) -> ModelShape:
    """The model shape from a config file or explicit numbers."""
    if args.model_config is not None:
        return ModelShape.from_path(args.model_config)
    if None in (args.layers, args.kv_heads, args.head_dim):
        raise ValueError("give --model-config, or --layers, --kv-heads and --head-dim")
    return ModelShape(args.layers, args.kv_heads, args.head_dim, dtype=args.dtype)


def kv_main(argv: list[str]) -> int:
    """Print the KV sizing."""
    args = kv_parser().parse_args(argv)
    try:
        shape = shape_from(args)
        per_token = bytes_per_token(shape, args.kv_cache_dtype, args.tp, args.pp)
    except OSError as error:
        raise CliError(f"{error.filename}: {error.strerror or error}") from None
    except (ValueError, KeyError) as error:
        raise CliError(str(error)) from None
    mla = " (MLA latent, replicated per TP rank)" if shape.mla else ""
    print(
        f"model: {shape.layers} layers x {shape.kv_heads} KV heads x head_dim {shape.head_dim}, "
        f"{shape.dtype}{mla}; KV dtype {args.kv_cache_dtype}; TP {args.tp} PP {args.pp}"
    )
    print(f"KV bytes per token per GPU: {per_token:,} B ({per_token / 1024:.1f} KiB)")
    budget = _budget_bytes(args)
    if budget is None:
        return 0
    if budget <= 0:
        raise CliError(
            "no memory is left for the KV cache: the weights and the activation reserve take "
            "all of vLLM's share of the GPU"
        )
    capacity = capacity_tokens(budget, per_token, args.block_size)
    print(f"KV budget per GPU: {budget / GIB:.2f} GiB -> capacity {capacity:,} tokens")
    if args.seq_len:
        fits = concurrency(capacity, args.seq_len)
        print(f"concurrency at {args.seq_len:,} tokens per request: {fits:.1f}")
        suggested = max_num_seqs_for(capacity, args.seq_len, 0, args.block_size)
        print(f"--max-num-seqs with 10% headroom: {suggested}")
    if shape.sliding_window:
        print("note: sliding-window layers keep fewer blocks; trust vLLM's logged KV size")
    return 0


def _budget_bytes(args: argparse.Namespace) -> float | None:
    """KV memory per GPU from the arguments, None when none was given."""
    if args.kv_memory_gib is not None:
        return float(args.kv_memory_gib * GIB)
    if args.gpu_memory_gib is not None:
        return kv_budget_bytes(
            args.gpu_memory_gib * GIB,
            args.gpu_memory_utilization,
            args.weights_gib * GIB,
            args.activation_gib * GIB,
        )
    return None
