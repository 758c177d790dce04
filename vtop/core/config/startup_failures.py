"""Why a vLLM server failed to start, in one sentence with the fix, from its log."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class StartupFailure:
    """An explained failure and the log line that shows it."""

    kind: str
    explanation: str
    line_number: int
    line: str


def _kv_too_small(match: re.Match[str]) -> str:
    return (
        f"The KV cache cannot hold one request of --max-model-len {match['mml']}: set "
        f"--max-model-len {match['fit']} or less (or raise --gpu-memory-utilization, "
        "use --kv-cache-dtype fp8, or more tensor parallelism)."
    )


def _free_memory(match: re.Match[str]) -> str:
    free, total = float(match["free"]), float(match["total"])
    suggested = max(0.05, (free - 0.5) / total)
    return (
        f"Another process holds GPU memory ({free:.1f} of {total:.1f} GiB free): lower "
        f"--gpu-memory-utilization to {suggested:.2f} or less, or free the GPU."
    )


PATTERNS: list[tuple[str, re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (
        "kv_too_small",
        re.compile(r"max seq len \((?P<mml>\d+)\).*estimated maximum model length is (?P<fit>\d+)"),
        _kv_too_small,
    ),
    (
        "gpu_memory_taken",
        re.compile(
            r"Free memory on device \S+ \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup "
            r"is less than desired"
        ),
        _free_memory,
    ),
    (
        "no_kv_memory",
        re.compile(r"No available memory for the cache blocks"),
        lambda _: (
            "Nothing is left for the KV cache after the weights: raise "
            "--gpu-memory-utilization, use a smaller or quantized model, or more tensor "
            "parallelism."
        ),
    ),
    (
        "out_of_memory",
        re.compile(r"CUDA out of memory|OutOfMemoryError"),
        lambda _: (
            "The GPU ran out of memory: lower --gpu-memory-utilization by 0.02-0.05, "
            "lower --max-num-batched-tokens, or shrink CUDA graphs (--max-cudagraph-capture-size)."
        ),
    ),
    (
        "offload_needs_gpu",
        re.compile(r"CPU Offloading is currently only supported on (?P<where>[^'\"]+)"),
        lambda match: (
            f"This vLLM cannot offload KV cache to the CPU (only on {match['where'].strip()}): "
            "remove --kv-offloading-size (and --kv-offloading-backend)."
        ),
    ),
    (
        "port_in_use",
        re.compile(r"[Aa]ddress already in use|Errno 98"),
        lambda _: (
            "The port is taken by another process: pass another --port, or stop the "
            "other server first (`vtop ps` lists the ones vtop started)."
        ),
    ),
    (
        "bad_flag",
        re.compile(r"error: (?P<what>(unrecognized arguments|argument [^:]+): .*)"),
        lambda match: f"vLLM rejected its arguments ({match['what']}): fix or remove that flag.",
    ),
    (
        "bad_value",
        re.compile(
            r"(ValueError|pydantic_core\._pydantic_core\.ValidationError|"
            r"ValidationError): (?P<what>.+)"
        ),
        lambda match: f"vLLM refused the configuration: {match['what'].strip()}",
    ),
]


def explain_failure(log_text: str) -> StartupFailure | None:
    """The first known failure in a log (most specific patterns first), or None."""
    lines = log_text.splitlines()
    for kind, pattern, explain in PATTERNS:
        for number, line in enumerate(lines, start=1):
            match = pattern.search(line)
            if match:
                return StartupFailure(kind, explain(match), number, line.strip())
    return None
