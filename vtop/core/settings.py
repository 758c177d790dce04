"""Dashboard settings: config file, then environment, then flags (later wins)."""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtop.core.sources.vllm_http import API_KEY_ENV, DEFAULT_URL

PANELS = (
    "requests",
    "kv",
    "preemptions",
    "ttft_histogram",
    "ttft",
    "throughput",
    "latency",
    "prefix_cache",
    "gpu",
)


class SettingsError(ValueError):
    """A setting that cannot be used, with where it came from."""


@dataclass(frozen=True)
class Settings:
    """Everything the dashboard needs to know before it starts."""

    urls: tuple[str, ...] = (DEFAULT_URL,)
    """vLLM base URLs to watch."""
    interval_s: float = 1.0
    """Seconds between scrapes."""
    window_s: float = 15.0
    """Seconds over which rates and quantiles are computed."""
    history_s: float = 300.0
    """Seconds of history the charts show."""
    timeout_s: float = 5.0
    """Scrape timeout in seconds."""
    api_key: str | None = None
    """Bearer token for /metrics."""
    verify_tls: bool = True
    """Verify TLS certificates."""
    low_redraw: bool = False
    """Redraw charts every few ticks only (slow links)."""
    hidden_panels: tuple[str, ...] = ()
    """Panels hidden at start (names from PANELS)."""
    rules_dir: str | None = None
    """Extra rules that add to or override the packaged ones."""
    vllm_args: str | None = None
    """The server's launch arguments, when vtop did not start it."""
    vllm_log: str | None = None
    """Path of the server's log, for its startup lines."""
    bundle_dir: str = "."
    """Where the dashboard's `b` key writes incident bundles."""
    prometheus: str | None = None
    """Read the vLLM servers a Prometheus server scrapes instead of scraping them."""


ENV_NAMES = {
    "urls": "VTOP_URLS",
    "interval_s": "VTOP_INTERVAL",
    "window_s": "VTOP_WINDOW",
    "history_s": "VTOP_HISTORY",
    "timeout_s": "VTOP_TIMEOUT",
    "low_redraw": "VTOP_LOW_REDRAW",
    "hidden_panels": "VTOP_HIDE",
    "rules_dir": "VTOP_RULES",
    "api_key": API_KEY_ENV,
    "prometheus": "VTOP_PROMETHEUS",
}


def config_path(env: Mapping[str, str]) -> Path:
    """$VTOP_CONFIG, else $XDG_CONFIG_HOME/vtop/config.toml, else ~/.config/vtop/config.toml."""
    if "VTOP_CONFIG" in env:
        return Path(env["VTOP_CONFIG"])
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "vtop" / "config.toml"


def _coerce(name: str, value: Any, where: str) -> Any:
    """A raw value (TOML, env text or flag) as the field's type."""
    default = getattr(Settings(), name)
    try:
        if isinstance(default, bool):
            return _boolean(value)
        if isinstance(default, float):
            return float(value)
        if isinstance(default, tuple):
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(str(item).strip() for item in items if str(item).strip())
        return None if value is None else str(value)
    except (TypeError, ValueError) as error:
        raise SettingsError(f"{where}: {name} = {value!r}: {error}") from None


def _boolean(value: Any) -> bool:
    """True/false from TOML booleans or env text."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected true or false")


def from_file(path: Path) -> dict[str, Any]:
    """Settings from a TOML file; a missing file is no settings."""
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"{path}: {error}") from None
    known = {field.name for field in dataclasses.fields(Settings)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SettingsError(
            f"{path}: unknown setting(s) {', '.join(unknown)}; known: {sorted(known)}"
        )
    return {name: _coerce(name, value, str(path)) for name, value in data.items()}


def from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """Settings from VTOP_* variables (and VLLM_API_KEY)."""
    return {
        name: _coerce(name, env[variable], f"${variable}")
        for name, variable in ENV_NAMES.items()
        if variable in env
    }


def load_settings(flags: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Settings:
    """File, then environment, then flags that were given (None means not given)."""
    env = os.environ if env is None else env
    layered = from_file(config_path(env)) | from_env(env)
    layered |= {
        name: _coerce(name, value, "flag") for name, value in flags.items() if value is not None
    }
    settings = Settings(**layered)
    _check(settings)
    return settings


def _check(settings: Settings) -> None:
    """Reject values the dashboard cannot run with."""
    if settings.interval_s <= 0 or settings.window_s <= 0 or settings.timeout_s <= 0:
        raise SettingsError("interval, window and timeout must be positive")
    unknown = sorted(set(settings.hidden_panels) - set(PANELS))
    if unknown:
        raise SettingsError(f"unknown panel(s) {', '.join(unknown)}; panels: {', '.join(PANELS)}")
    if not settings.urls:
        raise SettingsError("no URL to watch")
