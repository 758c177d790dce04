"""Floor 4, config: what a vLLM server is configured with and where each value came from (flags,
startup log, `cache_config_info`, HTTP answers, inferences, GPU defaults), the KV-cache model,
vtop's own settings and the dashboard's panel table. Imports the store and the leaves only;
pure (what was read from disk arrives as data).

Offers `Settings` and `load_settings` (settings), `ServerConfig` and `assemble`
(server_config), `DiagnoseOptions` and `server_config` (effective_config), `Inferences`
(inference), the KV formulas (kv), `PANELS` (panels), where spans are received
(otlp_address), the GPU peak table and the startup-failure explanations.
"""

__all__ = [
    "cache_config",
    "effective_config",
    "gpu_peaks",
    "inference",
    "kv",
    "otlp_address",
    "panels",
    "server_config",
    "settings",
    "startup_failures",
]
