"""Build a random-weight Llama model directory offline (run with the vLLM venv's Python).

Usage: python make_model.py OUT_DIR {tiny,small}
Nothing is downloaded: the tokenizer is trained here on generated text, and vLLM serves the model
with `--load-format dummy` (random weights), so only config.json and the tokenizer are written.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, PreTrainedTokenizerFast

SIZES = {
    "tiny": dict(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
    ),
    "light": dict(
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=1,
    ),
    "medium": dict(
        hidden_size=512,
        intermediate_size=1536,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
    ),
    "small": dict(
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=6,
        num_attention_heads=16,
        num_key_value_heads=4,
    ),
}
CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant:{% endif %}"
)


def corpus() -> list[str]:
    """Deterministic training text covering bytes, words and digits."""
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "a",
        "lazy",
        "dog",
        "while",
        "servers",
        "batch",
        "tokens",
    ]
    lines = [" ".join(words[i % len(words) :] + words[: i % len(words)]) for i in range(200)]
    return lines + [str(n) for n in range(1000)] + [bytes(range(32, 127)).decode()]


def build_tokenizer(out: Path) -> None:
    """Train a 512-entry byte-level BPE tokenizer and save it with a chat template."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus(), trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    wrapped.chat_template = CHAT_TEMPLATE
    wrapped.save_pretrained(out)


def build_config(out: Path, size: str) -> None:
    """Write a Llama config.json with head_dim 64 (the CPU attention backend needs it)."""
    config = LlamaConfig(
        vocab_size=512,
        max_position_embeddings=4096,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
        **SIZES[size],
    )
    config.save_pretrained(out)


def main() -> None:
    out, size = Path(sys.argv[1]), sys.argv[2]
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    build_config(out, size)
    print(out)


if __name__ == "__main__":
    main()
