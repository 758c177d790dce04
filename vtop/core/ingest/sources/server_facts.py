"""What a vLLM server tells about itself over HTTP, beside /metrics.

- `GET /version`: `{"version": "0.32.0"}`.
- `GET /v1/models`: every served model with its `max_model_len` and `root` (the model path).
- `GET /server_info?config_format=json`: the whole VllmConfig, only when the server runs with
  `VLLM_SERVER_DEV_MODE=1` (`vllm/entrypoints/serve/dev/server_info`); 404 otherwise.

Each is asked once per process start, within the scrape's deadline and a small byte limit.
When the model path that /v1/models names is a directory on this host, its `config.json` is read
then too (the KV geometry, as `model_*` settings): the frames carry it, so a recording replayed
on another host sizes the KV cache as it was sized here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from vtop.core.config.kv import ModelShape
from vtop.core.config.server_config import Fact
from vtop.core.ingest.sources.bounded_http import BodyError, DeadlineError, bounded_get

MAX_FACTS_BYTES = 4 * 1024 * 1024
MAX_MODEL_CONFIG_BYTES = 1024 * 1024
SERVER_INFO_FIELDS = {
    ("scheduler_config", "max_num_seqs"): "max_num_seqs",
    ("scheduler_config", "max_num_batched_tokens"): "max_num_batched_tokens",
    ("model_config", "max_model_len"): "max_model_len",
    ("model_config", "enforce_eager"): "enforce_eager",
    ("cache_config", "block_size"): "block_size",
    ("cache_config", "enable_prefix_caching"): "prefix_caching",
    ("cache_config", "gpu_memory_utilization"): "gpu_memory_utilization",
    ("cache_config", "cache_dtype"): "kv_cache_dtype",
    ("parallel_config", "tensor_parallel_size"): "tensor_parallel_size",
    ("parallel_config", "pipeline_parallel_size"): "pipeline_parallel_size",
    ("parallel_config", "data_parallel_size"): "data_parallel_size",
}


@dataclass(frozen=True)
class ServerFacts:
    """The version and the settings a server reported over HTTP."""

    version: str | None = None
    settings: tuple[Fact, ...] = ()


async def ask_server_facts(
    client: httpx.AsyncClient, base_url: str, headers: dict[str, str], timeout_s: float
) -> ServerFacts:
    """Ask /version, /v1/models and /server_info; whatever fails is simply not known."""
    version_doc = await _json(client, base_url + "/version", headers, timeout_s)
    models_doc = await _json(client, base_url + "/v1/models", headers, timeout_s)
    info_doc = await _json(client, base_url + "/server_info?config_format=json", headers, timeout_s)
    version = version_doc.get("version") if isinstance(version_doc, dict) else None
    facts = models_settings(models_doc) + server_info_settings(info_doc)
    model = next((value for name, value, _ in facts if name == "model"), None)
    shape = read_model_facts(model) if isinstance(model, str) else ()
    return ServerFacts(str(version) if version else None, facts + shape)


def read_model_facts(model: str) -> tuple[Fact, ...]:
    """The KV geometry from a model directory's config.json on this host (nothing when the
    path is not local, not readable, too large or not a model config)."""
    path = Path(model) / "config.json"
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_MODEL_CONFIG_BYTES + 1)
        if len(raw) > MAX_MODEL_CONFIG_BYTES:
            return ()
        return ModelShape.from_config(json.loads(raw)).facts()
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ()


async def _json(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], timeout_s: float
) -> Any:
    """A JSON document, or None for any failure (no route, not JSON, too big, too slow)."""
    try:
        response = await bounded_get(client, url, headers, timeout_s, MAX_FACTS_BYTES)
    except (httpx.HTTPError, DeadlineError, BodyError):
        return None
    if response.status_code != 200:
        return None
    try:
        return json.loads(response.content)
    except ValueError:
        return None


def models_settings(document: Any) -> tuple[Fact, ...]:
    """max_model_len (the largest of the served models) and the model path from /v1/models."""
    models = document.get("data") if isinstance(document, dict) else None
    if not isinstance(models, list):
        return ()
    entries = [m for m in models if isinstance(m, dict)]
    lengths = [m["max_model_len"] for m in entries if _is_count(m.get("max_model_len"))]
    facts: list[Fact] = []
    if lengths:
        facts.append(("max_model_len", max(lengths), "/v1/models"))
    roots = [m["root"] for m in entries if isinstance(m.get("root"), str) and not m.get("parent")]
    if roots:
        facts.append(("model", roots[0], "/v1/models"))
    return tuple(facts)


def server_info_settings(document: Any) -> tuple[Fact, ...]:
    """Scheduler, cache, model and parallel settings from /server_info (dev mode only)."""
    config = document.get("vllm_config") if isinstance(document, dict) else None
    if not isinstance(config, dict):
        return ()
    facts: list[Fact] = []
    for (section, key), name in SERVER_INFO_FIELDS.items():
        part = config.get(section)
        value = part.get(key) if isinstance(part, dict) else None
        if isinstance(value, bool | str | float | int) and (
            not isinstance(value, int) or isinstance(value, bool) or _is_count(value)
        ):
            facts.append((name, value, "/server_info"))
    return tuple(facts)


def _is_count(value: Any) -> bool:
    """A positive integer (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
