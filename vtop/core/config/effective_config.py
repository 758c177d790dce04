"""The effective server config from what vtop can see, and the knowledge it is given."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vtop.core.config.cache_config import cache_configs
from vtop.core.config.kv import ModelShape, bytes_per_token
from vtop.core.config.server_config import ServerConfig, Setting, assemble
from vtop.core.frame import GpuSnapshot, GpuState, TargetScrape


@dataclass(frozen=True)
class DiagnoseOptions:
    """What to sample and with which knowledge of the server."""

    window_s: float = 15.0
    interval_s: float = 1.0
    vllm_args: str | None = None
    vllm_log: str | None = None
    read_gpus: bool = True


def server_config(
    scrape: TargetScrape | None, gpu: GpuSnapshot | None, options: DiagnoseOptions
) -> ServerConfig:
    """The effective config from what the server reports, its log, its argv and the GPU."""
    gpus = gpu.gpus if gpu is not None and gpu.state is GpuState.OK else ()
    config = assemble(
        argv=options.vllm_args,
        log_text=options.vllm_log,
        cache_configs=cache_configs(scrape.samples) if scrape is not None and scrape.ok else [],
        gpu_memory_bytes=gpus[0].memory_total_bytes if gpus else None,
        gpu_name=gpus[0].name if gpus else None,
        server_settings=scrape.server_settings if scrape is not None else (),
    )
    add_kv_bytes_per_token(config)
    if config.facts.version is None and scrape is not None:
        config.facts.version = scrape.server_version
    return config


def add_kv_bytes_per_token(config: ServerConfig) -> None:
    """vtop:kv_bytes_per_token from the model's config.json when the model is a local path."""
    model = config.get("model")
    if not isinstance(model, str) or not (Path(model) / "config.json").is_file():
        return
    shape = ModelShape.from_path(Path(model))
    kv_dtype = config.get("kv_cache_dtype")
    try:
        per_token = bytes_per_token(
            shape,
            kv_dtype if isinstance(kv_dtype, str) else "auto",
            int(config.number("tensor_parallel_size") or 1),
            int(config.number("pipeline_parallel_size") or 1),
        )
    except ValueError:
        return
    config.settings["kv_bytes_per_token"] = Setting(per_token, "model config.json")
