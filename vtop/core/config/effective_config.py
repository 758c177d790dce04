"""The effective server config from what vtop can see, and the knowledge it is given (pure:
what was read from disk or the network arrives as data, in the frame or in the options)."""

from __future__ import annotations

from dataclasses import dataclass

from vtop.core.config.cache_config import cache_configs
from vtop.core.config.kv import MODEL_CONFIG, ModelShape, bytes_per_token
from vtop.core.config.server_config import Fact, ServerConfig, Setting, assemble
from vtop.core.config.settings import Settings
from vtop.core.frame import GpuSnapshot, GpuStatus, TargetScrape


@dataclass(frozen=True)
class DiagnoseOptions:
    """What to sample and with which knowledge of the server."""

    window_s: float = 15.0
    interval_s: float = 1.0
    vllm_args: str | None = None
    vllm_log: str | None = None
    read_gpus: bool = True
    model_facts: tuple[Fact, ...] = ()
    """The KV geometry of the model the flags or the log name, read from its config.json by
    the command line (the server's own answer, carried in the frames, is used otherwise)."""

    @staticmethod
    def from_settings(
        settings: Settings,
        log_text: str | None = None,
        read_gpus: bool = True,
        model_facts: tuple[Fact, ...] = (),
    ) -> DiagnoseOptions:
        """The one way a command turns its settings into diagnosis options."""
        return DiagnoseOptions(
            settings.window_s,
            settings.interval_s,
            settings.vllm_args,
            log_text,
            read_gpus,
            model_facts,
        )


def server_config(
    scrape: TargetScrape | None, gpu: GpuSnapshot | None, options: DiagnoseOptions
) -> ServerConfig:
    """The effective config from what the server reports, its log, its argv and the GPU."""
    gpus = gpu.gpus if gpu is not None and gpu.state is GpuStatus.OK else ()
    reported = scrape.server_settings if scrape is not None else ()
    config = assemble(
        argv=options.vllm_args,
        log_text=options.vllm_log,
        cache_configs=cache_configs(scrape.samples) if scrape is not None and scrape.ok else [],
        gpu_memory_bytes=gpus[0].memory_total_bytes if gpus else None,
        gpu_name=gpus[0].name if gpus else None,
        server_settings=tuple(fact for fact in reported if fact[2] != MODEL_CONFIG),
    )
    add_kv_bytes_per_token(config, options.model_facts or _served_model(reported, config))
    if config.facts.version is None and scrape is not None:
        config.facts.version = scrape.server_version
    return config


def _served_model(reported: tuple[Fact, ...], config: ServerConfig) -> tuple[Fact, ...]:
    """The model geometry the server's own answer carried, when that model is the one the
    config names (the flags or log may name another)."""
    served = next((value for name, value, _ in reported if name == "model"), None)
    return (
        tuple(f for f in reported if f[2] == MODEL_CONFIG) if served == config.get("model") else ()
    )


def add_kv_bytes_per_token(config: ServerConfig, model_facts: tuple[Fact, ...]) -> None:
    """vtop:kv_bytes_per_token from the model's geometry (its config.json, read at the source),
    the geometry kept beside it."""
    shape = ModelShape.from_settings({name: value for name, value, _ in model_facts})
    if shape is None:
        return
    config.merge({name: Setting(value, source) for name, value, source in model_facts}, False)
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
