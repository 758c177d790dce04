"""Dashboard settings: config file, then environment, then flags (later wins)."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import tomllib
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtop.core.config.otlp_address import parse_address
from vtop.core.config.panels import PANEL_NAMES

API_KEY_ENV = "VLLM_API_KEY"
VLLM_PORT = 8000
"""The port `vllm serve` listens on unless told otherwise."""
DEFAULT_URL = f"http://127.0.0.1:{VLLM_PORT}"
SCHEMES = ("http", "https")
URL_SETTINGS = frozenset({"probe_url", "prometheus"})
"""Single-URL settings, read as servers are (a bare host gets port 8000, a word is refused)."""
FLAG = "flag"
"""Where a value given on the command line comes from (its errors name the value alone)."""


SAMPLE_LIMIT = 50_000
"""vLLM samples one scrape may hold before it is refused (Prometheus's `sample_limit`): a real
vLLM exposes hundreds to a few thousand, and the store keeps 50,000 series in all."""


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
    """Panels hidden at start (names from vtop.core.config.panels)."""
    rules_dir: tuple[str, ...] = ()
    """Directories of extra rules that add to or override the packaged ones, in order."""
    vllm_args: str | None = None
    """The server's launch arguments, when vtop did not start it."""
    vllm_log: str | None = None
    """Path of the server's log, for its startup lines."""
    bundle_dir: str = "."
    """Where the dashboard's `b` key writes incident bundles."""
    prometheus: str | None = None
    """Read the vLLM servers a Prometheus server scrapes instead of scraping them."""
    probe_url: str | None = None
    """The URL users call (a proxy, a gateway, a load balancer in front of vLLM): canaries are
    streamed through it and timed as a client sees them (off when None)."""
    probe_interval_s: float = 10.0
    """Seconds between canaries (each asks for a few tokens)."""
    runbook_base: str | None = None
    """The URL of vtop's rules reference as you publish it (docs/rules.md): `vtop rules export`
    points each alert's runbook_url at its rule's anchor there."""
    prometheus_alerts: bool = False
    """With `prometheus`: read the alerts it fires for the exported rules and each server's
    headline figures, not every raw series (large fleets)."""
    prometheus_judge: str = "auto"
    """With `prometheus`: who evaluates the rules. `vtop` pulls every raw series and judges
    them here; `prometheus` asks Prometheus to evaluate the rules' conditions for the whole
    fleet (a few queries a tick); `auto` is `prometheus` past JUDGE_IN_PROMETHEUS_FROM servers."""
    otlp: tuple[str, ...] = ()
    """Where to receive vLLM's request spans: `grpc://HOST:PORT`, `http://HOST:PORT` (off
    when empty; loopback unless a host is given)."""
    otlp_token: str | None = None
    """A bearer token every span export must carry (a secret: redacted like the API key)."""
    sample_limit: int = SAMPLE_LIMIT
    """A scrape holding more vLLM samples than this is refused, as Prometheus's
    `sample_limit` refuses it (a real vLLM exposes hundreds to a few thousand; an exporter
    whose labels explode would take vtop's memory)."""

    @property
    def findings_from_prometheus(self) -> bool:
        """The findings are what Prometheus says (its alerts, or the conditions it evaluated
        for vtop), not rules evaluated here on raw series."""
        return self.prometheus is not None and (
            self.prometheus_alerts or self.prometheus_judge == "prometheus"
        )


JUDGES = ("auto", "vtop", "prometheus")
JUDGE_IN_PROMETHEUS_FROM = 50
"""Servers from which `auto` has Prometheus evaluate the rules: raw series cost vtop about
14 ms of CPU and 69 KB per server per tick (50 servers: 0.7 s a tick)."""


def judged_in_prometheus(settings: Settings, servers: int) -> bool:
    """Whether the rules are evaluated by the settings' Prometheus for `servers` servers."""
    if settings.prometheus is None or settings.prometheus_alerts:
        return False
    if settings.prometheus_judge == "auto":
        return servers >= JUDGE_IN_PROMETHEUS_FROM
    return settings.prometheus_judge == "prometheus"


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
    "verify_tls": "VTOP_VERIFY_TLS",
    "prometheus": "VTOP_PROMETHEUS",
    "prometheus_alerts": "VTOP_PROMETHEUS_ALERTS",
    "prometheus_judge": "VTOP_PROMETHEUS_JUDGE",
    "runbook_base": "VTOP_RUNBOOK_BASE",
    "probe_url": "VTOP_PROBE",
    "probe_interval_s": "VTOP_PROBE_INTERVAL",
    "otlp": "VTOP_OTLP",
    "otlp_token": "VTOP_OTLP_TOKEN",
    "sample_limit": "VTOP_SAMPLE_LIMIT",
}


def server_url(text: str) -> str:
    """A server as a base URL: `http(s)://...` as given, `host:port` over http, and a bare
    host (an IP address, `localhost`, a dotted name or a host name such as `node17`) on
    vLLM's port 8000, never on port 80. Anything else is refused."""
    text = text.strip()
    given = "://" in text
    scheme = text.split("://", 1)[0].lower() if given else "http"
    if scheme not in SCHEMES:
        raise ValueError(f"{text}: unsupported scheme {scheme!r} (vLLM serves http or https)")
    url = text if given else f"http://{text}"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError(f"{text}: the port must be a number from 1 to 65535") from None
    host = parts.hostname or ""
    if not host:
        raise ValueError(f"{text}: no host in the URL")
    if given or port is not None:
        return url
    if not _looks_like_host(host):
        raise ValueError(
            f"{text!r} is not a command, a URL or host:port (a server is http://HOST:PORT or "
            "HOST:PORT; `vtop --help` lists the commands)"
        )
    return f"http://{parts.netloc}:{VLLM_PORT}{parts.path}"


def _looks_like_host(host: str) -> bool:
    """An IP address, or a host name: labels of letters, digits and inner hyphens (RFC 1123)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return all(HOST_LABEL.fullmatch(label) for label in host.split("."))
    return True


HOST_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def config_path(env: Mapping[str, str]) -> Path:
    """$VTOP_CONFIG, else $XDG_CONFIG_HOME/vtop/config.toml, else ~/.config/vtop/config.toml."""
    if "VTOP_CONFIG" in env:
        return Path(env["VTOP_CONFIG"])
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "vtop" / "config.toml"


def _strict(name: str, value: Any, where: str) -> Any:
    """A TOML value of the field's own type (TOML has types: `interval_s = true` is a mistake,
    not 1.0), checked before it is coerced."""
    default = getattr(Settings(), name)
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, tuple):
        ok = isinstance(value, str) or (
            isinstance(value, list) and all(isinstance(item, str) for item in value)
        )
    else:
        ok = isinstance(value, str)
    if not ok:
        expected = (
            "a list of strings" if isinstance(default, tuple) else type(default or "").__name__
        )
        raise SettingsError(f"{where}: {name} = {value!r}: expected {expected}")
    return _coerce(name, value, where)


def _coerce(name: str, value: Any, where: str) -> Any:
    """A raw value (TOML, env text or flag) as the field's type."""
    default = getattr(Settings(), name)
    try:
        if isinstance(default, bool):
            return _boolean(value)
        if isinstance(default, int):
            count = int(value)
            if count < 1:
                raise ValueError("must be a positive whole number")
            return count
        if isinstance(default, float):
            number = float(value)
            if not 0 < number < float("inf"):
                raise ValueError("must be a positive number of seconds")
            return number
        if isinstance(default, tuple):
            items = value.split(",") if isinstance(value, str) else list(value)
            listed = tuple(str(item).strip() for item in items if str(item).strip())
            try:
                return _checked(name, listed)
            except ValueError as error:
                named = "" if where == FLAG else f"{where}: {name}: "
                raise SettingsError(f"{named}{error}") from None
        if name in URL_SETTINGS and value is not None:
            return server_url(str(value))
        return None if value is None else str(value)
    except SettingsError:
        raise
    except (TypeError, ValueError) as error:
        raise SettingsError(f"{where}: {name} = {value!r}: {error}") from None


def _checked(name: str, items: tuple[str, ...]) -> tuple[str, ...]:
    """A list setting's items, each one usable: URLs as base URLs, known panels, existing
    rule directories (a ValueError names the item)."""
    if name == "urls":
        return tuple(map(server_url, items))
    if name == "hidden_panels" and (unknown := sorted(set(items) - set(PANEL_NAMES))):
        raise ValueError(f"unknown panel(s) {', '.join(unknown)}; panels: {', '.join(PANEL_NAMES)}")
    if name == "rules_dir" and (missing := [d for d in items if not Path(d).is_dir()]):
        raise ValueError(f"rules directory {missing[0]}: no such directory")
    if name == "otlp":
        return tuple(str(parse_address(item)) for item in items)
    return items


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


def from_file(path: Path, explicit: bool = False) -> dict[str, Any]:
    """Settings from a TOML file; a missing default file is no settings, a missing file named
    by $VTOP_CONFIG is an error, and so is anything that is not a readable UTF-8 TOML file."""
    if not path.exists():
        if explicit:
            raise SettingsError(f"{path}: no such file (named by $VTOP_CONFIG)")
        return {}
    if not path.is_file():
        raise SettingsError(f"{path}: not a file")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        line = path.read_bytes()[: error.start].count(b"\n") + 1
        raise SettingsError(f"{path}:{line}: not UTF-8 text") from None
    except OSError as error:
        raise SettingsError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"{path}: {error}") from None
    known = {field.name for field in dataclasses.fields(Settings)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SettingsError(
            f"{path}:{_line_of(text, unknown[0])}: unknown setting(s) {', '.join(unknown)}; "
            f"known: {sorted(known)}"
        )
    return {
        name: _strict(name, value, f"{path}:{_line_of(text, name)}") for name, value in data.items()
    }


def _line_of(text: str, name: str) -> int:
    """The line that sets `name` in a TOML text (1 when not found)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip().startswith(name) and line.strip()[len(name) :].lstrip().startswith("="):
            return number
    return 1


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
    layered = from_file(config_path(env), explicit="VTOP_CONFIG" in env) | from_env(env)
    layered |= {
        name: _coerce(name, value, FLAG) for name, value in flags.items() if value is not None
    }
    settings = Settings(**layered)
    _check(settings)
    return settings


def _check(settings: Settings) -> None:
    """Reject values the dashboard cannot run with."""
    for name in ("interval_s", "window_s", "history_s", "timeout_s", "probe_interval_s"):
        value = getattr(settings, name)
        if not 0 < value < float("inf"):
            raise SettingsError(f"{name} = {value!r}: must be a positive number of seconds")
    if settings.prometheus_judge not in JUDGES:
        raise SettingsError(
            f"prometheus_judge = {settings.prometheus_judge!r}: one of {', '.join(JUDGES)}"
        )
    if not settings.urls:
        raise SettingsError("no URL to watch")
