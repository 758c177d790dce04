"""`vtop tune NAME`: generated load before and after -> the one apply -> verify -> roll back."""

from __future__ import annotations

import argparse
import asyncio

from vtop.cli.errors import CliError
from vtop.cli.options import (
    add_rules_option,
    parser,
    rules_of,
    settings_from,
    step_profiles_of,
    warn_unkept,
)
from vtop.cli.serve import pick_server
from vtop.core.manage.apply import Applied
from vtop.core.manage.bench import BenchConfig, Lengths
from vtop.core.manage.verdict import comparison_lines, measurement_table
from vtop.core.managed_server import is_alive, state_dir
from vtop.core.ops.tune import NotApplied, TuneOptions, tune
from vtop.core.status import ExitCode

EXIT_ROLLED_BACK, EXIT_NOTHING = ExitCode.WARNING, ExitCode.UNKNOWN


def tune_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop tune`."""
    tuner = parser("vtop tune", "baseline under load, apply the fix, verify, roll back if worse")
    tuner.add_argument("name", nargs="?", help="the managed server (default: the only one)")
    tuner.add_argument("--finding", help="rule id to act on (default: the primary finding)")
    tuner.add_argument("--window", type=float, default=30.0, help="seconds of load per side")
    tuner.add_argument("-c", "--concurrency", type=int, default=24, help="closed-loop clients")
    tuner.add_argument("--prompt-tokens", type=int, default=96, help="tokens per prompt")
    tuner.add_argument("--output-tokens", type=int, default=300, help="tokens per output")
    tuner.add_argument("--no-rollback", action="store_true", help="keep the change whatever")
    tuner.add_argument("--interval", type=float, help="seconds between scrapes (1)")
    tuner.add_argument("--timeout", type=float, help="whole-scrape deadline in seconds (5)")
    add_rules_option(tuner)
    return tuner


def tune_main(argv: list[str]) -> int:
    """Run `vtop tune`."""
    args = tune_parser().parse_args(argv)
    settings = settings_from(args)
    rules = rules_of(settings)
    state = pick_server(args.name)
    if not is_alive(state):
        raise CliError(f"{state.name} is not running (pid {state.pid})")

    def load(url: str) -> BenchConfig:
        prompt, output = (
            Lengths(args.prompt_tokens, args.prompt_tokens),
            Lengths(args.output_tokens, args.output_tokens),
        )
        return BenchConfig(
            url,
            concurrency=args.concurrency,
            num_requests=None,
            duration_s=args.window,
            prompt_tokens=prompt,
            output_tokens=output,
        )

    def warmup(url: str) -> BenchConfig:
        return BenchConfig(url=url, concurrency=4, num_requests=8, stream=False)

    options = TuneOptions(
        rules,
        state_dir(),
        load,
        settings,
        args.finding,
        not args.no_rollback,
        warmup,
        step_profiles_of(),
    )
    result = asyncio.run(tune(state, options))
    if options.profiles is not None:
        warn_unkept(options.profiles)
    print("\n".join(tune_report(result)))
    return tune_exit_code(result)


def tune_report(result: Applied | NotApplied) -> list[str]:
    """What was tried, the figures side by side, and the outcome."""
    if isinstance(result, NotApplied):
        return [f"nothing applied: {result.reason}", *baseline_lines(result)]
    lines = [f"finding: {result.finding.key} {result.finding.rule.title}", *result.diff]
    if result.after is not None:
        lines += comparison_lines(result.before, result.after)
    if result.verdict is not None:
        outcome = "improved" if result.verdict.improved else "not improved"
        lines.append(f"verdict: {outcome}, {result.verdict.reason}")
    if result.problem:
        lines.append(result.problem)
    lines.append("rolled back to the previous flags" if result.rolled_back else "change kept")
    return lines


def baseline_lines(result: NotApplied) -> list[str]:
    """The baseline's figures the triage judged."""
    return measurement_table([(f"{result.window_s:.0f} s load", result.before)])


def tune_exit_code(result: Applied | NotApplied) -> int:
    """0 kept, 1 rolled back, 2 nothing applied."""
    if isinstance(result, NotApplied):
        return EXIT_NOTHING
    return EXIT_ROLLED_BACK if result.rolled_back else 0
