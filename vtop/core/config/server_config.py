"""The server's effective configuration, assembled from argv, the startup log, cache_config_info
and version/GPU-dependent defaults, and exposed to rules as `vtop:*` pseudo-metrics."""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass, field

from vtop.core.config.cache_config import CacheConfig
from vtop.core.config.gpu_peaks import peak_for
from vtop.core.redact import is_secret_name

GIB = 1024**3
NUMERIC = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "kv_capacity_tokens",
    "block_size",
    "gpu_memory_utilization",
    "prefix_caching",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "enforce_eager",
    "kv_bytes_per_token",
    "num_engines",
    "max_concurrency",
    "num_gpu_blocks_override",
    "kv_cache_memory_bytes",
    "kv_cache_fp8",
    "kv_offloading_size",
    "gpu_peak_flops",
    "gpu_peak_bytes_per_s",
)
UNSET_BY_DEFAULT = ("num_gpu_blocks_override", "kv_cache_memory_bytes")
"""Settings that are off unless given: 0 once anything about the server is known."""
FLAG_NAMES = {
    "max_num_seqs": "--max-num-seqs",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "max_model_len": "--max-model-len",
    "block_size": "--block-size",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "tensor_parallel_size": "--tensor-parallel-size",
    "pipeline_parallel_size": "--pipeline-parallel-size",
    "data_parallel_size": "--data-parallel-size",
    "num_gpu_blocks_override": "--num-gpu-blocks-override",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
    "kv_cache_dtype": "--kv-cache-dtype",
    "kv_offloading_size": "--kv-offloading-size",
    "model": "--model",
}
SHORT_FLAGS = {
    "-tp": "tensor_parallel_size",
    "-pp": "pipeline_parallel_size",
    "-dp": "data_parallel_size",
}
BOOLEAN_FLAGS = {
    "--enable-prefix-caching": ("prefix_caching", True),
    "--no-enable-prefix-caching": ("prefix_caching", False),
    "--enforce-eager": ("enforce_eager", True),
}
HOW_TO_KNOW = "pass --vllm-args '<the vllm serve flags>' or --vllm-log FILE"

Value = float | str | bool
Fact = tuple[str, Value, str]
"""(setting name, value, source): what a server or a file reported."""


@dataclass(frozen=True)
class Setting:
    """One effective setting and where it came from."""

    value: Value
    source: str


@dataclass
class StartupFacts:
    """What the startup log says beyond settings."""

    version: str | None = None
    kv_cache_gib: float | None = None
    init_seconds: float | None = None
    max_model_len_fit: int | None = None


@dataclass
class ServerConfig:
    """Effective settings with their sources; unknown ones are absent."""

    settings: dict[str, Setting] = field(default_factory=dict)
    facts: StartupFacts = field(default_factory=StartupFacts)

    def get(self, name: str) -> Value | None:
        """A setting's value, None when unknown."""
        setting = self.settings.get(name)
        return None if setting is None else setting.value

    def number(self, name: str) -> float | None:
        """A numeric setting (booleans as 1/0), None when unknown or not numeric."""
        value = self.get(name)
        if isinstance(value, bool):
            return 1.0 if value else 0.0
        return float(value) if isinstance(value, int | float) else None

    def pseudo_metrics(self) -> dict[str, float | None]:
        """`vtop:<name>` -> value for the rule engine (None = unknown)."""
        return {f"vtop:{name}": self.number(name) for name in NUMERIC}

    def with_inferences(self, inferred: dict[str, Setting]) -> ServerConfig:
        """A copy where inferred settings fill what is unknown or only a default."""
        settings = dict(self.settings)
        for name, setting in inferred.items():
            known = settings.get(name)
            if known is None or known.source.startswith("default"):
                settings[name] = setting
        return ServerConfig(settings, self.facts)

    def merge(self, settings: dict[str, Setting], overwrite: bool) -> None:
        """Add settings; keep existing ones unless `overwrite`."""
        for name, setting in settings.items():
            if overwrite or name not in self.settings:
                self.settings[name] = setting


def _number(text: str) -> Value:
    """'16' -> 16, '0.9' -> 0.9, anything else stays text."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def from_argv(argv: list[str] | str) -> dict[str, Setting]:
    """Settings from `vllm serve` (or api_server) arguments; unknown flags are ignored."""
    words = shlex.split(argv) if isinstance(argv, str) else list(argv)
    by_flag = {flag: name for name, flag in FLAG_NAMES.items()} | SHORT_FLAGS
    found: dict[str, Setting] = {}
    index = 0
    while index < len(words):
        word = words[index]
        flag, _, inline = word.partition("=")
        if flag in BOOLEAN_FLAGS:
            name, value = BOOLEAN_FLAGS[flag]
            found[name] = Setting(value, "argv")
        elif flag in by_flag:
            raw = inline if inline else (words[index + 1] if index + 1 < len(words) else "")
            index += 0 if inline else 1
            found[by_flag[flag]] = Setting(_number(raw), "argv")
        elif word == "serve" and index + 1 < len(words) and not words[index + 1].startswith("-"):
            found["model"] = Setting(words[index + 1], "argv")
            index += 1
        index += 1
    return found


LOG_NUMBERS = {
    "max_model_len": re.compile(r"Using max model len (\d+)"),
    "max_num_batched_tokens": re.compile(
        r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)"
    ),
    "kv_capacity_tokens": re.compile(r"[GC]PU KV cache size: ([\d,]+) tokens"),
    "max_concurrency": re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x"),
}
NON_DEFAULT = re.compile(r"non-default args: (\{.*\})")
ENGINE_CONFIG = re.compile(r"Initializing a V1 LLM engine \(v([\w.+-]+)\) with config: (.*)")
ENGINE_FIELDS = {
    "enable_prefix_caching": "prefix_caching",
    "enforce_eager": "enforce_eager",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
}
KV_GIB = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
INIT_TIME = re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s")
FIT_LEN = re.compile(r"max seq len \((\d+)\).*estimated maximum model length is (\d+)")


def from_log(text: str) -> tuple[dict[str, Setting], StartupFacts]:
    """Settings and facts from a vLLM startup log (later lines win)."""
    found: dict[str, Setting] = {}
    facts = StartupFacts()
    for line in text.splitlines():
        _read_log_line(line, found, facts)
    return found, facts


def _read_log_line(line: str, found: dict[str, Setting], facts: StartupFacts) -> None:
    """Apply one log line's information."""
    for name, pattern in LOG_NUMBERS.items():
        match = pattern.search(line)
        if match:
            found[name] = Setting(_number(match.group(1).replace(",", "")), "log")
    if match := NON_DEFAULT.search(line):
        found.update(_non_default_args(match.group(1)))
    if match := ENGINE_CONFIG.search(line):
        facts.version = match.group(1)
        for key, value in re.findall(r"(\w+)=([^,]+)", match.group(2)):
            if key in ENGINE_FIELDS:
                parsed = {"True": True, "False": False}.get(value, _number(value))
                found.setdefault(ENGINE_FIELDS[key], Setting(parsed, "log"))
    if match := KV_GIB.search(line):
        facts.kv_cache_gib = float(match.group(1))
    if match := INIT_TIME.search(line):
        facts.init_seconds = float(match.group(1))
    if match := FIT_LEN.search(line):
        facts.max_model_len_fit = int(match.group(2))


def _non_default_args(literal: str) -> dict[str, Setting]:
    """The `non-default args: {...}` dict as settings."""
    try:
        parsed = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return {}
    renames = {"enable_prefix_caching": "prefix_caching"}
    found: dict[str, Setting] = {}
    for key, value in parsed.items() if isinstance(parsed, dict) else []:
        if is_secret_name(str(key)):
            continue  # `api_key` and the like: never kept, never shown
        name = renames.get(str(key), str(key))
        if isinstance(value, bool | int | float | str):
            found[name] = Setting(value, "log")
    return found


def from_cache_configs(configs: list[CacheConfig]) -> dict[str, Setting]:
    """Settings the server reports itself in `vllm:cache_config_info` (summed over engines)."""
    if not configs:
        return {}
    found: dict[str, Setting] = {"num_engines": Setting(len(configs), "cache_config_info")}
    capacities = [c.kv_capacity_tokens for c in configs]
    if all(capacity is not None for capacity in capacities):
        found["kv_capacity_tokens"] = Setting(sum(c or 0 for c in capacities), "cache_config_info")
    first = configs[0]
    for name, value in (
        ("block_size", first.block_size),
        ("gpu_memory_utilization", first.gpu_memory_utilization),
        ("prefix_caching", first.prefix_caching),
        ("max_concurrency", first.max_concurrency),
        ("num_gpu_blocks_override", first.num_gpu_blocks_override),
        ("kv_cache_memory_bytes", first.kv_cache_memory_bytes),
        ("kv_cache_dtype", first.cache_dtype),
        ("kv_offloading_size", first.kv_offloading_size),
    ):
        if value is not None:
            found[name] = Setting(value, "cache_config_info")
    return found


def gpu_peaks(gpu_name: str | None) -> dict[str, Setting]:
    """vtop:gpu_peak_flops and vtop:gpu_peak_bytes_per_s of this GPU, from the datasheet table."""
    peak = peak_for(gpu_name) if gpu_name else None
    if peak is None:
        return {}
    source = f"datasheet {peak.model}: {peak.source}"
    return {
        "gpu_peak_flops": Setting(peak.flops, source),
        "gpu_peak_bytes_per_s": Setting(peak.bytes_per_s, source),
    }


def defaults(gpu_memory_bytes: int | None, gpu_name: str | None) -> dict[str, Setting]:
    """vLLM's defaults where they can be known: they depend on the GPU, so none without one."""
    if gpu_memory_bytes is None or gpu_name is None:
        return {}
    large = gpu_memory_bytes >= 70 * GIB and "A100" not in gpu_name
    return {
        "max_num_seqs": Setting(1024 if large else 256, "default for this GPU"),
        "max_num_batched_tokens": Setting(8192 if large else 2048, "default for this GPU"),
        "prefix_caching": Setting(True, "default"),
        "enforce_eager": Setting(False, "default"),
        "tensor_parallel_size": Setting(1, "default"),
    }


def assemble(
    argv: list[str] | str | None = None,
    log_text: str | None = None,
    cache_configs: list[CacheConfig] | None = None,
    gpu_memory_bytes: int | None = None,
    gpu_name: str | None = None,
    server_settings: tuple[Fact, ...] = (),
) -> ServerConfig:
    """Effective config: what the server reports (metrics, then its HTTP endpoints) > startup
    log > argv > defaults. Inferences (inference.py) rank just above defaults."""
    config = ServerConfig()
    config.merge(from_cache_configs(cache_configs or []), overwrite=True)
    reported = {name: Setting(value, source) for name, value, source in server_settings}
    config.merge(reported, overwrite=False)
    if log_text:
        settings, config.facts = from_log(log_text)
        config.merge(settings, overwrite=False)
    if argv:
        config.merge(from_argv(argv), overwrite=False)
    config.merge(defaults(gpu_memory_bytes, gpu_name), overwrite=False)
    config.merge(gpu_peaks(gpu_name), overwrite=False)
    if config.settings:
        config.merge({name: Setting(0, "default (unset)") for name in UNSET_BY_DEFAULT}, False)
        config.merge(_kv_cache_fp8(config.get("kv_cache_dtype")), overwrite=False)
    return config


def _kv_cache_fp8(dtype: Value | None) -> dict[str, Setting]:
    """vtop:kv_cache_fp8: 1 when the KV cache is already stored in an fp8 format."""
    text = str(dtype) if dtype is not None else "auto"
    return {"kv_cache_fp8": Setting(text.startswith("fp8"), "kv_cache_dtype")}
