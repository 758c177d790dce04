"""The command table: each subcommand, its one-line purpose, and where it lives."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass

Main = Callable[[list[str]], int]


@dataclass(frozen=True)
class Command:
    """A subcommand: `module.main(argv)` runs it, `module.parser()` describes it."""

    name: str
    summary: str
    module: str
    main: str
    parser: str

    def run(self, argv: list[str]) -> int:
        """Import the module only now (keeps `vtop --help` fast) and run the command."""
        function: Main = getattr(importlib.import_module(self.module), self.main)
        return function(argv)

    def argument_parser(self) -> argparse.ArgumentParser:
        """The command's argument parser (for help and shell completion)."""
        build: Callable[[], argparse.ArgumentParser] = getattr(
            importlib.import_module(self.module), self.parser
        )
        return build()


COMMANDS = {
    command.name: command
    for command in (
        Command(
            "demo",
            "the dashboard on a recorded real incident (any machine)",
            "vtop.cli.dashboard",
            "demo_main",
            "demo_parser",
        ),
        Command(
            "diagnose",
            "one-shot triage of a server or recording; exit code by severity",
            "vtop.cli.diagnose",
            "diagnose_main",
            "diagnose_parser",
        ),
        Command(
            "replay",
            "the dashboard on a recording or incident bundle",
            "vtop.cli.dashboard",
            "replay_main",
            "replay_file_parser",
        ),
        Command(
            "record",
            "write every frame of live servers to a recording",
            "vtop.cli.record",
            "record_main",
            "record_parser",
        ),
        Command(
            "bundle",
            "an incident tarball: recording, findings, log tail, argv",
            "vtop.cli.bundle",
            "bundle_main",
            "bundle_parser",
        ),
        Command(
            "serve",
            "start vLLM, keep it running after vtop, watch it",
            "vtop.cli.serve",
            "serve_main",
            "serve_parser",
        ),
        Command(
            "attach",
            "the dashboard on a server vtop started earlier",
            "vtop.cli.serve",
            "attach_main",
            "attach_parser",
        ),
        Command("ps", "list the servers vtop started", "vtop.cli.serve", "ps_main", "ps_parser"),
        Command(
            "stop",
            "stop a server vtop started (by pid, never by name)",
            "vtop.cli.serve",
            "stop_main",
            "stop_parser",
        ),
        Command(
            "tune",
            "apply the primary fix under load, verify, roll back if worse",
            "vtop.cli.tune",
            "tune_main",
            "tune_parser",
        ),
        Command(
            "whatif",
            "predict a flag change with a calibrated model of the scheduler",
            "vtop.cli.whatif",
            "whatif_main",
            "whatif_parser",
        ),
        Command(
            "probe",
            "canaries through the URL users call: what the user sees beside the engine",
            "vtop.cli.probe",
            "probe_main",
            "probe_parser",
        ),
        Command(
            "requests",
            "which requests were slow, and where their time went (vLLM's OTLP spans)",
            "vtop.cli.requests",
            "requests_main",
            "requests_parser",
        ),
        Command(
            "stacks",
            "where the engine is stuck: its processes' Python stacks (py-spy)",
            "vtop.cli.stacks",
            "stacks_main",
            "stacks_parser",
        ),
        Command(
            "bench",
            "load generator: QPS, TTFT/TPOT/ITL percentiles",
            "vtop.cli.bench",
            "bench_main",
            "bench_parser",
        ),
        Command(
            "rules",
            "check, test, export rule files; print where they are",
            "vtop.cli.rules",
            "rules_main",
            "rules_parser",
        ),
        Command(
            "kv",
            "KV-cache calculator: bytes per token, capacity, concurrency",
            "vtop.cli.kv",
            "kv_main",
            "kv_parser",
        ),
        Command(
            "completion",
            "print a shell completion script (bash, zsh, fish)",
            "vtop.cli.completion",
            "completion_main",
            "completion_parser",
        ),
    )
}
