"""`vtop serve`, `ps`, `stop`, `attach`: vLLM servers that vtop starts and manages."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
import time

from vtop.cli.dashboard import run_dashboard
from vtop.cli.errors import CliError
from vtop.cli.options import add_otlp_options, add_view_options, parser, settings_from
from vtop.cli.spans import open_feed_with_spans, vllm_tracing
from vtop.core.forensics.last_words import why_it_exited
from vtop.core.manage.apply import wait_ready
from vtop.core.manage.in_flight import in_flight_middleware
from vtop.core.manage.process import ProcessError, port_of, start, stop
from vtop.core.managed_server import (
    ManagedServer,
    forget,
    is_alive,
    keep_reaped,
    load_states,
    managed,
    read_log,
    state_dir,
)

DEFAULT_COMMAND = "vllm serve"
EXIT_NOT_READY = 1


def serve_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop serve [options] -- VLLM ARGS`."""
    serve = parser(
        "vtop serve",
        "start vLLM (never through a shell, secrets through its environment) and watch it",
        epilog="everything after `--` goes to vLLM, e.g. vtop serve -- MODEL --max-num-seqs 64",
    )
    serve.add_argument("--name", help="a name for this server (default vllm-PORT)")
    serve.add_argument("--command", default=DEFAULT_COMMAND, help="how to start vLLM")
    serve.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="extra environment"
    )
    serve.add_argument("--stop-on-exit", action="store_true", help="stop vLLM when vtop quits")
    serve.add_argument("--readonly", action="store_true", help="no restart/apply from the UI")
    serve.add_argument("--no-dashboard", action="store_true", help="start, wait, print, exit")
    serve.add_argument("--ready-timeout", type=float, default=900.0, help="seconds to wait")
    serve.add_argument("--interval", type=float, help="seconds between scrapes (1)")
    serve.add_argument(
        "--no-in-flight",
        action="store_true",
        help="do not load vtop's middleware that lists vLLM's requests in flight",
    )
    add_view_options(serve)
    add_otlp_options(serve)
    return serve


def split_vllm_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """vtop's options before `--`, vLLM's arguments after."""
    if "--" not in argv:
        return argv, []
    at = argv.index("--")
    return argv[:at], argv[at + 1 :]


def running(name: str) -> ManagedServer | None:
    """A live managed server with this name."""
    return next((s for s in managed(state_dir()) if s.name == name and is_alive(s)), None)


def serve_main(argv: list[str]) -> int:
    """Run `vtop serve`."""
    own, vllm_args = split_vllm_args(argv)
    args = serve_parser().parse_args(own)
    given = dict(item.split("=", 1) for item in args.env if "=" in item)
    environ = {**os.environ, **given}
    port = port_of(vllm_args)
    tracing, tracing_env = vllm_tracing(settings_from(args), f"127.0.0.1:{port}", environ)
    listing, listing_env = (
        ([], {}) if args.no_in_flight else in_flight_middleware(state_dir(), environ)
    )
    command = shlex.split(args.command) + vllm_args + tracing + listing
    env = given | tracing_env | listing_env
    name = args.name or f"vllm-{port_of(command)}"
    if running(name) is not None:
        raise CliError(f"{name} is already running; `vtop attach {name}`")
    try:
        state, child = start(name, command, state_dir(), env)
    except ProcessError as error:
        raise CliError(str(error)) from None
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


def report_ready(state: ManagedServer, timeout: float) -> int:
    """Wait for /health; print ready or why it failed."""
    problem = asyncio.run(wait_ready(state, timeout))
    if problem is None:
        print(f"{state.name}: ready at {state.url}", file=sys.stderr)
        return 0
    print(f"{state.name}: {problem} (log: {state.log_path})", file=sys.stderr)
    return EXIT_NOT_READY


def watch(state: ManagedServer, args: argparse.Namespace) -> int:
    """The dashboard on a managed server, with its log."""
    vllm_args = args.vllm_args or shlex.join(state.argv)
    settings = settings_from(args, urls=(state.url,), vllm_args=vllm_args)
    feed = open_feed_with_spans(settings, server=state)
    return run_dashboard(settings, feed, server=state, readonly=args.readonly)


def ps_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop ps` (none)."""
    return parser("vtop ps", "the servers vtop started")


def ps_main(argv: list[str]) -> int:
    """`vtop ps`: managed servers."""
    ps_parser().parse_args(argv)
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
        why = "" if is_alive(state) else why_it_exited(read_log(state)[0])
        if why:
            print(f"{'':16} {why}")
    return 0


def pick_server(name: str | None) -> ManagedServer:
    """The named managed server, or the only one."""
    states = managed(state_dir())
    chosen = [s for s in states if name in (None, s.name)]
    if len(chosen) != 1:
        names = ", ".join(s.name for s in states) or "none"
        raise CliError(f"name one server (managed: {names})")
    return chosen[0]


def stop_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop stop`."""
    stopper = parser("vtop stop", "stop a managed server (by its pids, never by name)")
    stopper.add_argument("name", nargs="?", help="the server (default: the only one)")
    stopper.add_argument("--timeout", type=float, default=30.0, help="seconds before SIGKILL")
    return stopper


def stop_main(argv: list[str]) -> int:
    """`vtop stop NAME`: SIGTERM everything the server is, wait, then SIGKILL."""
    args = stop_parser().parse_args(argv)
    state = pick_server(args.name)
    print(stop(state, args.timeout))
    forget(state, state_dir())
    return 0


def attach_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop attach`."""
    attach = parser("vtop attach", "the dashboard on a server vtop started earlier")
    attach.add_argument("name", nargs="?", help="the server (default: the only one)")
    attach.add_argument("--interval", type=float, help="seconds between scrapes (1)")
    attach.add_argument("--readonly", action="store_true", help="no restart/apply from the UI")
    add_view_options(attach)
    return attach


def attach_main(argv: list[str]) -> int:
    """`vtop attach [NAME]`: the dashboard on a server started earlier, with its log history."""
    args = attach_parser().parse_args(argv)
    state = pick_server(args.name)
    if not is_alive(state):
        raise CliError(f"{state.name} is not running (pid {state.pid})")
    return watch(state, args)
