"""Write random LoRA adapters for a model directory (run with the vLLM venv's Python).

Usage: python make_lora.py MODEL_DIR OUT_DIR NAME...
Each adapter is a PEFT directory (adapter_config.json, adapter_model.safetensors) of rank 8 on
q_proj and v_proj, with small random weights: enough for vLLM to load it, give it a slot and
batch its requests; nothing is downloaded.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

RANK = 8


def adapter(model: dict[str, int], out: Path, seed: int) -> None:
    """One adapter directory."""
    hidden, layers = model["hidden_size"], model["num_hidden_layers"]
    head = hidden // model["num_attention_heads"]
    outputs = {"q_proj": hidden, "v_proj": model["num_key_value_heads"] * head}
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(layers):
        for projection, width in outputs.items():
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{projection}"
            for part, shape in (("lora_A", (RANK, hidden)), ("lora_B", (width, RANK))):
                weights = torch.randn(*shape, generator=generator) * 0.01
                tensors[f"{prefix}.{part}.weight"] = weights.to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": RANK,
        "lora_alpha": 2 * RANK,
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "target_modules": sorted(outputs),
    }
    (out / "adapter_config.json").write_text(json.dumps(config))
    save_file(tensors, str(out / "adapter_model.safetensors"))


def main() -> None:
    model_dir, out, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    model = json.loads((model_dir / "config.json").read_text())
    for seed, name in enumerate(names):
        adapter(model, out / name, seed)


if __name__ == "__main__":
    main()
