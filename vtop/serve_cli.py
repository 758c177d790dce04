"""`vtop serve`, `ps`, `stop`, `attach`, `tune`: vLLM servers that vtop starts and manages."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time

from vtop.core.bench import BenchConfig, Lengths
from vtop.core.process import (
    ProcessError,
    ServerState,
    forget,
    is_alive,
    keep_reaped,
    load_states,
    managed,
    port_of,
    start,
    state_dir,
    stop,
)
from vtop.core.rules import PACKAGED, RuleFileError, load_rules
from vtop.core.tuner import TuneOptions, TuneResult, tune, wait_ready
from vtop.core.tuning import comparison_lines

DEFAULT_COMMAND = "vllm serve"


def serve_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop serve [options] -- VLLM ARGS`."""
    from vtop.dashboard_cli import add_view_options

    parser = argparse.ArgumentParser(
        prog="vtop serve", description="start vLLM (never through a shell) and watch it"
    )
    parser.add_argument("--name", help="a name for this server (default vllm-PORT)")
    parser.add_argument("--command", default=DEFAULT_COMMAND, help=f"default '{DEFAULT_COMMAND}'")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--stop-on-exit", action="store_true", help="stop vLLM when vtop quits")
    parser.add_argument("--readonly", action="store_true", help="no restart/apply from the UI")
    parser.add_argument("--no-dashboard", action="store_true", help="start, wait, print, exit")
    parser.add_argument("--ready-timeout", type=float, default=900.0)
    parser.add_argument("--interval", type=float)
    add_view_options(parser)
    return parser


def split_vllm_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """vtop's options before `--`, vLLM's arguments after."""
    if "--" not in argv:
        return argv, []
    at = argv.index("--")
    return argv[:at], argv[at + 1 :]


def running(name: str) -> ServerState | None:
    """A live managed server with this name."""
    return next((s for s in managed(state_dir()) if s.name == name and is_alive(s)), None)


def serve_main(argv: list[str]) -> int:
    """Run `vtop serve`."""
    own, vllm_args = split_vllm_args(argv)
    args = serve_parser().parse_args(own)
    command = shlex.split(args.command) + vllm_args
    env = dict(item.split("=", 1) for item in args.env)
    name = args.name or f"vllm-{port_of(command)}"
    if running(name) is not None:
        print(f"vtop serve: {name} is already running; `vtop attach {name}`", file=sys.stderr)
        return 2
    try:
        state, child = start(name, command, state_dir(), env)
    except ProcessError as error:
        print(f"vtop serve: {error}", file=sys.stderr)
        return 2
    keep_reaped(state, child)
    print(f"{name}: pid {state.pid}, log {state.log_path}, {state.url}", file=sys.stderr)
    if args.no_dashboard:
        return report_ready(state, args.ready_timeout)
    code = watch(state, args)
    if args.stop_on_exit:
        print(stop(state), file=sys.stderr)
    else:
        print(f"{name} keeps running (pid {state.pid}); `vtop attach {name}`", file=sys.stderr)
    return code


def report_ready(state: ServerState, timeout: float) -> int:
    """Wait for /health; print ready or why it failed."""
    problem = asyncio.run(wait_ready(state, timeout))
    if problem is None:
        print(f"{state.name}: ready at {state.url}", file=sys.stderr)
        return 0
    print(f"{state.name}: {problem} (log: {state.log_path})", file=sys.stderr)
    return 1


def watch(state: ServerState, args: argparse.Namespace) -> int:
    """The dashboard on a managed server, with its log."""
    from vtop.core.feeds import LiveFeed
    from vtop.core.settings import SettingsError, load_settings
    from vtop.core.sources.nvml import NvmlSource
    from vtop.core.sources.process_log import LogTail
    from vtop.core.sources.vllm_http import ScrapeOptions, VllmHttpSource
    from vtop.dashboard_cli import run_dashboard, view_flags

    flags = view_flags(args) | {"urls": (state.url,), "interval_s": args.interval}
    flags["vllm_args"] = flags["vllm_args"] or shlex.join(state.argv)
    try:
        settings = load_settings(flags)
    except SettingsError as error:
        print(f"vtop: {error}", file=sys.stderr)
        return 2
    source = VllmHttpSource(state.url, ScrapeOptions(timeout_s=settings.timeout_s))
    feed = LiveFeed([source], NvmlSource(), settings.interval_s, LogTail(state), state)
    return run_dashboard(settings, feed, server=state, readonly=args.readonly)


def ps_main(argv: list[str]) -> int:
    """`vtop ps`: managed servers."""
    argparse.ArgumentParser(prog="vtop ps", description="servers vtop started").parse_args(argv)
    found = load_states(state_dir())
    if not found:
        print("no managed servers")
    for state, path, problem in found:
        if state is None:
            print(f"{path.stem:16} {problem}")
            continue
        status = "running" if is_alive(state) else "exited (stale state file)"
        uptime = time.time() - state.started_at
        print(f"{state.name:16} pid {state.pid:<8} {status:26} {state.url}  up {uptime:.0f}s")
        print(f"{'':16} log {state.log_path}")
    return 0


def pick_server(name: str | None, prog: str) -> ServerState | None:
    """The named managed server, or the only one."""
    states = managed(state_dir())
    chosen = [s for s in states if name in (None, s.name)]
    if len(chosen) != 1:
        names = ", ".join(s.name for s in states) or "none"
        print(f"{prog}: name one server (managed: {names})", file=sys.stderr)
        return None
    return chosen[0]


def stop_main(argv: list[str]) -> int:
    """`vtop stop NAME`: SIGTERM the server's group, wait, then SIGKILL."""
    parser = argparse.ArgumentParser(prog="vtop stop", description="stop a managed server")
    parser.add_argument("name", nargs="?")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    state = pick_server(args.name, "vtop stop")
    if state is None:
        return 2
    print(stop(state, args.timeout))
    forget(state, state_dir())
    return 0


def attach_main(argv: list[str]) -> int:
    """`vtop attach [NAME]`: the dashboard on a server started earlier, with its log history."""
    from vtop.dashboard_cli import add_view_options

    parser = argparse.ArgumentParser(prog="vtop attach", description="re-attach to a server")
    parser.add_argument("name", nargs="?")
    parser.add_argument("--interval", type=float)
    parser.add_argument("--readonly", action="store_true", help="no restart/apply from the UI")
    add_view_options(parser)
    args = parser.parse_args(argv)
    state = pick_server(args.name, "vtop attach")
    if state is None:
        return 2
    if not is_alive(state):
        print(f"vtop attach: {state.name} is not running (pid {state.pid})", file=sys.stderr)
        return 2
    return watch(state, args)


def tune_main(argv: list[str]) -> int:
    """`vtop tune NAME`: baseline under load, apply the fix, verify, roll back if worse."""
    parser = argparse.ArgumentParser(prog="vtop tune", description="apply -> verify -> roll back")
    parser.add_argument("name", nargs="?")
    parser.add_argument("--finding", help="rule id to act on (default: the primary finding)")
    parser.add_argument("--window", type=float, default=30.0, help="seconds of load per side")
    parser.add_argument("-c", "--concurrency", type=int, default=24)
    parser.add_argument("--prompt-tokens", type=int, default=96)
    parser.add_argument("--output-tokens", type=int, default=300)
    parser.add_argument("--no-rollback", action="store_true")
    args = parser.parse_args(argv)
    state = pick_server(args.name, "vtop tune")
    if state is None or not is_alive(state):
        return 2
    try:
        rules = load_rules([PACKAGED])
    except RuleFileError as error:
        print(f"vtop tune: {error}", file=sys.stderr)
        return 2

    def load(url: str) -> BenchConfig:
        return BenchConfig(
            url=url,
            concurrency=args.concurrency,
            num_requests=None,
            duration_s=args.window,
            prompt_tokens=Lengths(args.prompt_tokens, args.prompt_tokens),
            output_tokens=Lengths(args.output_tokens, args.output_tokens),
        )

    def warmup(url: str) -> BenchConfig:
        return BenchConfig(url=url, concurrency=4, num_requests=8, stream=False)

    options = TuneOptions(
        rules,
        state_dir(),
        load,
        args.window,
        args.finding,
        not args.no_rollback,
        warmup=warmup,
    )
    result = asyncio.run(tune(state, options))
    print("\n".join(tune_report(result)))
    return tune_exit_code(result)


def tune_report(result: TuneResult) -> list[str]:
    """What was tried, the figures side by side, and the outcome."""
    if result.finding is None:
        return [f"nothing applied: {result.problem}"]
    lines = [f"finding: {result.finding.key} {result.finding.rule.title}", *result.diff]
    if result.before is not None and result.after is not None:
        lines += comparison_lines(result.before, result.after)
    if result.verdict is not None:
        lines.append(
            f"verdict: {'improved' if result.verdict.improved else 'not improved'}, "
            f"{result.verdict.reason}"
        )
    if result.problem:
        lines.append(result.problem)
    lines.append("rolled back to the previous flags" if result.rolled_back else "change kept")
    return lines


def tune_exit_code(result: TuneResult) -> int:
    """0 kept, 1 rolled back, 2 nothing applied or the rollback failed to start."""
    if result.finding is None:
        return 2
    return 1 if result.rolled_back else 0
