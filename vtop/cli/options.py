"""Options shared by commands, and the settings every command reads the same way: the config
file, then the environment (`VTOP_*`, `VLLM_API_KEY`), then the flags that were given."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from vtop.cli.errors import EXIT_USAGE, CliError
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.config.panels import PANEL_NAMES
from vtop.core.config.server_config import assemble
from vtop.core.config.settings import API_KEY_ENV, Settings, SettingsError, load_settings
from vtop.core.ingest.sources.server_facts import read_model_facts
from vtop.core.redact import remember
from vtop.core.rules.loader import PACKAGED, load_rules
from vtop.core.rules.rule import Rule, RuleFileError

if TYPE_CHECKING:
    from vtop.core.whatif.profile import StepProfiles


class Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows every flag's default once: a value, "off" for a switch, or the one its
    help names in parentheses (flags left unset defer to the config file and environment)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "(" in text or action.default is argparse.SUPPRESS or not action.option_strings:
            return text
        if action.default is None and action.nargs == 0:
            return f"{text} (default: off)"
        if action.default in (None, False):
            return f"{text} (default: {'off' if action.default is False else 'none'})"
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """vtop's argument parser: flags are never abbreviated (`--model` must not silently mean
    `--model-config`), and an unknown flag is answered with the one it is close to."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """Parse, refusing unknown flags with a did-you-mean."""
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            self.error(self.unknown_message(unknown))
        return parsed

    def error(self, message: str) -> NoReturn:
        """A usage mistake as one line, `vtop: error: PROG: MESSAGE`, and exit code 64 (the
        usage block is what `--help` is for)."""
        raise CliError(f"{self.prog}: {message} (`{self.prog} --help` lists the flags)")

    def long_flags(self) -> set[str]:
        """Every flag this parser and its subcommands take."""
        flags = set(self._option_string_actions)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    flags |= sub.long_flags() if isinstance(sub, Parser) else set()
        return flags

    def unknown_message(self, unknown: list[str]) -> str:
        """`unrecognized arguments: --modle x (did you mean --model?)`."""
        message = f"unrecognized arguments: {' '.join(unknown)}"
        flag = next((word.split("=", 1)[0] for word in unknown if word.startswith("--")), None)
        if flag is None:
            return message
        known = [name for name in self.long_flags() if name.startswith("--")]
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
        prefixed = sorted(name for name in known if name.startswith(flag))
        meant = close[0] if close else (prefixed[0] if prefixed else None)
        return f"{message} (did you mean {meant}?)" if meant else message


def positive_int(text: str) -> int:
    """An argument that must be a whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above zero, got {text}")
    return value


def positive_float(text: str) -> float:
    """An argument that must be a finite number above zero."""
    value = _number(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above zero, got {text}")
    return value


def not_negative_float(text: str) -> float:
    """An argument that must be a finite number, zero or more."""
    value = _number(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be zero or more, got {text}")
    return value


def fraction(text: str) -> float:
    """An argument in (0, 1]."""
    value = _number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1, got {text}")
    return value


def _number(text: str) -> float:
    """A number argument (NaN refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value != value:
        raise argparse.ArgumentTypeError("expected a number, got NaN")
    return value


def parser(prog: str, description: str, **extra: Any) -> argparse.ArgumentParser:
    """An argument parser whose help lists each flag's default."""
    return Parser(prog=prog, description=description, **extra)


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """How to reach vLLM endpoints (None = not given: the config file or environment decide)."""
    parser.add_argument("--api-key", help=f"bearer token for /metrics (or ${API_KEY_ENV})")
    parser.add_argument(
        "--insecure", action="store_true", default=None, help="do not verify TLS certificates"
    )
    parser.add_argument("--timeout", type=float, help="whole-scrape deadline in seconds (5)")
    parser.add_argument("--no-gpu", action="store_true", help="do not read NVML")


def add_probe_options(parser: argparse.ArgumentParser) -> None:
    """The front door: canaries through the URL users call, timed beside the engine."""
    parser.add_argument(
        "--probe",
        metavar="PUBLIC_URL",
        help="stream canaries through the URL users call (a proxy, a gateway) and judge the "
        "path (or probe_url in the config file; default: off)",
    )
    parser.add_argument(
        "--probe-interval", type=float, help="seconds between canaries, a few tokens each (10)"
    )


def add_otlp_options(parser: argparse.ArgumentParser) -> None:
    """Where to receive vLLM's request spans (OTLP), and the token exports must carry."""
    parser.add_argument(
        "--otlp",
        action="append",
        metavar="ADDR",
        help="receive vLLM's request spans here: grpc://HOST:PORT or http://HOST:PORT "
        "(path /v1/traces); repeatable; the host is 127.0.0.1 unless given (or otlp in the "
        "config file)",
    )
    parser.add_argument(
        "--otlp-token", help="require `Authorization: Bearer TOKEN` on every span export"
    )


def add_rules_option(parser: argparse.ArgumentParser) -> None:
    """--rules DIR, repeatable: rules added to, or overriding by id, the shipped ones."""
    parser.add_argument(
        "--rules",
        action="append",
        metavar="DIR",
        help="directory of extra or overriding rules (repeatable; or VTOP_RULES=a,b)",
    )


def add_view_options(parser: argparse.ArgumentParser) -> None:
    """Options of every dashboard and of diagnose (None = not given, for layering)."""
    parser.add_argument("--window", type=float, help="seconds for rates and quantiles (15)")
    parser.add_argument("--history", type=float, help="seconds of history in charts (300)")
    parser.add_argument(
        "--low-redraw", action="store_true", default=None, help="redraw charts every 5th tick"
    )
    parser.add_argument("--hide", help=f"panels to hide, comma-separated: {','.join(PANEL_NAMES)}")
    add_rules_option(parser)
    parser.add_argument("--vllm-args", help="the server's `vllm serve` flags, as one string")
    parser.add_argument("--vllm-log", help="the server's log file (for its startup lines)")


def flags_of(args: argparse.Namespace) -> dict[str, Any]:
    """The flags that map onto settings (None when not given)."""
    given = vars(args)
    insecure = given.get("insecure")
    return {
        "window_s": given.get("window"),
        "history_s": given.get("history"),
        "low_redraw": given.get("low_redraw"),
        "hidden_panels": given.get("hide"),
        "rules_dir": tuple(given["rules"]) if given.get("rules") else None,
        "vllm_args": given.get("vllm_args"),
        "vllm_log": str(given["vllm_log"]) if given.get("vllm_log") else None,
        "timeout_s": given.get("timeout"),
        "interval_s": given.get("interval"),
        "api_key": given.get("api_key"),
        "probe_url": given.get("probe"),
        "probe_interval_s": given.get("probe_interval"),
        "verify_tls": False if insecure else None,
        "otlp": tuple(given["otlp"]) if given.get("otlp") else None,
        "otlp_token": given.get("otlp_token"),
        "prometheus_judge": given.get("judge"),
    }


def settings_from(args: argparse.Namespace, **more: Any) -> Settings:
    """Settings from the config file, the environment and these flags (later wins)."""
    flags = flags_of(args) | more
    try:
        settings = load_settings(flags)
    except SettingsError as error:
        raise CliError(str(error)) from None
    remember(settings.api_key)
    remember(settings.otlp_token)
    return settings


def rules_of(settings: Settings, code: int = EXIT_USAGE) -> list[Rule]:
    """The shipped rules plus the settings' rule directories (errors as file:line)."""
    try:
        return load_rules([PACKAGED, *(Path(d) for d in settings.rules_dir)])
    except RuleFileError as error:
        raise CliError(str(error), code) from None


def step_profiles_of(code: int = EXIT_USAGE) -> StepProfiles:
    """The model's step-time profiles in the state directory (an error naming the file and
    line when it is damaged). The model is imported here: the dashboard needs it only when a
    key asks for a prediction."""
    from vtop.core.whatif.profile import ProfileError, StepProfiles

    try:
        return StepProfiles.default()
    except ProfileError as error:
        raise CliError(f"{error} (delete it to start the profiles afresh)", code) from None


def warn_unkept(profiles: StepProfiles) -> None:
    """Say on stderr when the step profile could not be written."""
    if profiles.write_error is not None:
        print(f"vtop: warning: {profiles.write_error}", file=sys.stderr)


def diagnose_options_of(
    settings: Settings, code: int = EXIT_USAGE, read_gpus: bool = True
) -> DiagnoseOptions:
    """The diagnosis options every command uses: the settings, the log they name (read here),
    and the KV geometry of the model the flags or the log name (its config.json, read here:
    the core reads no file)."""
    log = log_text_of(settings, code)
    model = assemble(argv=settings.vllm_args, log_text=log).get("model")
    facts = read_model_facts(model) if isinstance(model, str) else ()
    return DiagnoseOptions.from_settings(settings, log, read_gpus, facts)


def log_text_of(settings: Settings, code: int) -> str | None:
    """The server log the settings name, read (an error naming the file when it cannot be)."""
    if not settings.vllm_log:
        return None
    try:
        return Path(settings.vllm_log).read_text(errors="replace")
    except OSError as error:
        raise CliError(f"{settings.vllm_log}: {error.strerror or error}", code) from None
