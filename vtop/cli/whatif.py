"""`vtop whatif [URL | RECORDING] --set FLAG=VALUE`: a window -> session -> the scheduler model
calibrated on it -> the figures predicted for the changed flags."""

from __future__ import annotations

import argparse
from pathlib import Path

from vtop.cli.diagnose import window_of
from vtop.cli.errors import CliError
from vtop.cli.frames import file_argument
from vtop.cli.options import (
    add_rules_option,
    add_target_options,
    diagnose_options_of,
    parser,
    rules_of,
    settings_from,
    step_profiles_of,
    warn_unkept,
)
from vtop.core.config.server_config import ServerConfig
from vtop.core.config.settings import DEFAULT_URL
from vtop.core.session.window_session import judged_window
from vtop.core.status import ExitCode
from vtop.core.strict_json import strict_json
from vtop.core.whatif.calibrate import CannotModelError
from vtop.core.whatif.predict import FLAGS, whatif
from vtop.text.fold import fold, terminal_width
from vtop.text.whatif import json_refusal, json_whatif, text_whatif

EXIT_CANNOT = ExitCode.UNKNOWN
DEFAULT_WINDOW_S = 30.0


def _change(text: str) -> tuple[str, float]:
    """FLAG=VALUE for --set: `max-num-seqs=8`, `--max-num-seqs=8`, or `max_num_seqs=8` (the
    setting's name, as the report's config lists it)."""
    flag, equals, value = text.partition("=")
    flag = "--" + flag.strip().lstrip("-").replace("_", "-")
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not equals or number != number:
        raise argparse.ArgumentTypeError(f"expected FLAG=NUMBER, got {text!r}")
    if flag not in FLAGS:
        raise argparse.ArgumentTypeError(f"{flag}: the model changes only {', '.join(FLAGS)}")
    if not number.is_integer() or number < SMALLEST[flag]:
        raise argparse.ArgumentTypeError(
            f"{flag} {value.strip()}: vLLM takes a whole number of at least {SMALLEST[flag]}"
        )
    return flag, number


SMALLEST = {
    "--max-num-seqs": 1,
    "--max-num-batched-tokens": 1,
    "--num-gpu-blocks-override": 1,
    "--block-size": 1,
    "--kv-cache-memory-bytes": 1,
}
"""The least value vLLM accepts for each flag the model changes (vllm/config/scheduler.py and
cache.py: max_num_seqs, max_num_batched_tokens and block_size are `ge=1`/`gt=0`; a pool of no
blocks or no bytes holds no request)."""


def refused_by_vllm(changes: dict[str, float], config: ServerConfig) -> str | None:
    """Why vLLM would refuse the changed flags together with the server's other settings
    (SchedulerConfig.verify_max_model_len: the token budget at least max-num-seqs), or None."""
    seqs = changes.get("--max-num-seqs", config.number("max_num_seqs"))
    budget = changes.get("--max-num-batched-tokens", config.number("max_num_batched_tokens"))
    if seqs is not None and budget is not None and budget < seqs:
        return (
            f"vLLM refuses --max-num-batched-tokens {budget:.0f} below --max-num-seqs "
            f"{seqs:.0f} (max_num_batched_tokens must be greater than or equal to max_num_seqs)"
        )
    return None


def whatif_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop whatif`."""
    command = parser(
        "vtop whatif",
        "predict what a flag change does: calibrate a model of vLLM's scheduler on a window of "
        "the server (or a recording), then replay it with the changed flags",
        epilog="exit codes: 0 predicted (or calibrated), 3 the model cannot speak for this window",
    )
    command.add_argument("url", nargs="?", help=f"server URL or recording (default {DEFAULT_URL})")
    command.add_argument(
        "--set",
        dest="changes",
        action="append",
        type=_change,
        default=[],
        metavar="FLAG=VALUE",
        help="a changed `vllm serve` flag, e.g. max-num-seqs=8; repeatable (default: none, "
        "calibration only)",
    )
    command.add_argument("--target", help="which target of a recording (default: the first)")
    command.add_argument("--window", type=float, help=f"seconds to sample ({DEFAULT_WINDOW_S:g})")
    command.add_argument("--interval", type=float, help="seconds between scrapes (1)")
    command.add_argument("--from", dest="start", type=float, help="recording: from N s in")
    command.add_argument("--to", dest="end", type=float, help="recording: up to N s in")
    command.add_argument(
        "--after-restart",
        dest="after_restart_s",
        type=float,
        metavar="SECONDS",
        help="also predict the first SECONDS after the restart (default: the window's length)",
    )
    command.add_argument("--vllm-args", help="the server's `vllm serve` flags, as one string")
    command.add_argument("--vllm-log", type=Path, help="the server's startup log")
    command.add_argument("--json", action="store_true", help="print the JSON report")
    add_rules_option(command)
    add_target_options(command)
    return command


def whatif_main(argv: list[str]) -> int:
    """Run `vtop whatif`; with --json every outcome is JSON, a refusal included (its reason and
    exit code in the report, the same words on stderr)."""
    args = whatif_parser().parse_args(argv)
    try:
        return _whatif(args)
    except CliError as error:
        if args.json:
            print(strict_json(json_refusal(error.message, error.code)))
        raise


def _whatif(args: argparse.Namespace) -> int:
    """Calibrate on the window and predict the changes."""
    if args.window is None:
        args.window = DEFAULT_WINDOW_S
    path = file_argument(args.url) if args.url else None
    urls = (args.url,) if args.url and path is None else None
    settings = settings_from(args, urls=urls)
    rules = rules_of(settings)
    options = diagnose_options_of(settings, read_gpus=False)
    frames, options = window_of(args, path, settings, options, command="vtop whatif")
    targets = [scrape.target for frame in frames for scrape in frame.scrapes]
    if not targets:
        raise CliError("no frames in the window", EXIT_CANNOT)
    target = args.target or targets[0]
    session = judged_window(frames, rules, options)
    state = session.targets.get(target)
    if state is None:
        raise CliError(f"{target}: not in the window", EXIT_CANNOT)
    refusal = refused_by_vllm(dict(args.changes), state.config)
    if refusal is not None:
        raise CliError(f"whatif: {refusal}")
    now = frames[-1].timestamp
    window = max(now - frames[0].timestamp, 1.0)
    profiles = step_profiles_of()
    try:
        prediction = whatif(
            session.store,
            target,
            now,
            window,
            state.config,
            dict(args.changes),
            0,
            profiles,
            args.after_restart_s,
        )
    except CannotModelError as error:
        raise CliError(f"whatif: cannot model this window: {error}", EXIT_CANNOT) from None
    warn_unkept(profiles)
    text = fold(text_whatif(prediction), terminal_width())
    print(strict_json(json_whatif(prediction)) if args.json else text)
    return 0 if prediction.predicted is not None or not args.changes else EXIT_CANNOT
