"""Real and synthetic /metrics payloads for tests and benchmarks."""

from __future__ import annotations

import re
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURES = sorted(DATA.glob("vllm-0.32-cpu-metrics-*.txt"))
ENGINE_LABEL = re.compile(r'engine="0"')


def fixture(name: str) -> str:
    """A real vLLM 0.32 /metrics capture by short name (idle, underload, after)."""
    return (DATA / f"vllm-0.32-cpu-metrics-{name}.txt").read_text()


def multi_engine(text: str, engines: int) -> str:
    """A data-parallel payload: every engine-labelled line repeated once per engine."""
    out: list[str] = []
    for line in text.splitlines():
        if 'engine="0"' in line and not line.startswith("#"):
            out.extend(ENGINE_LABEL.sub(f'engine="{e}"', line) for e in range(engines))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def lora_payload() -> str:
    """LoRA info gauges with comma-joined adapter lists and escaped label values."""
    return (
        "# HELP vllm:lora_requests_info Running stats on lora requests.\n"
        "# TYPE vllm:lora_requests_info gauge\n"
        'vllm:lora_requests_info{max_lora="4",running_lora_adapters="sql-lora,chat \\"v2\\"",'
        'waiting_lora_adapters=""} 1.7959e+09\n'
        'vllm:lora_requests_info{max_lora="4",running_lora_adapters="a\\\\b\\nc",'
        'waiting_lora_adapters="x}y"} 1.7959e+09\n'
    )
