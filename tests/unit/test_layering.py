"""The import contracts: vtop.core never imports Textual, plotext or vtop.ui (checked two ways),
and the floors hold (every import runs down the stack in pyproject.toml)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("textual", "textual_plotext", "plotext", "vtop.ui")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_sources_import_no_ui_module() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "vtop" / "core").rglob("*.py")
        for name in imported_modules(path)
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN)
    ]
    assert offenders == []


def test_importing_core_loads_no_ui_module() -> None:
    code = (
        "import sys, vtop.core.store.store, vtop.core.ingest.sources.vllm_http,"
        " vtop.core.ingest.sources.nvml;"
        "print([m for m in sys.modules"
        " if m.split('.')[0] in ('textual', 'plotext', 'textual_plotext')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


WATCHING_NEEDS_NOT = (
    "vtop.core.whatif",
    "vtop.core.manage.apply",
    "prometheus_client",
    "grpc",
    "google.protobuf",
    "opentelemetry",
)
"""Loaded by the keys that predict or apply, by a payload the fast parser cannot read, and by
listening for vLLM's spans (`--otlp`, the requests screen): a dashboard that only watches does
not pay their resident memory (grpcio and protobuf: about 12 MiB; docs/benchmarks.md)."""


def test_a_watching_dashboard_loads_neither_the_model_nor_the_reference_parser() -> None:
    code = (
        "import sys, vtop.cli.commands, vtop.cli.dashboard, vtop.ui.app;"
        f"print([m for m in sys.modules if m.startswith({WATCHING_NEEDS_NOT!r})])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_floors_contract_breaks_on_an_import_that_runs_up(tmp_path: Path) -> None:
    """The layers contract is real: a copy of the tree with one import from the store up into
    the session is refused (and the tree itself is kept)."""
    shutil.copytree(ROOT / "vtop", tmp_path / "vtop", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    wrong = tmp_path / "vtop" / "core" / "store" / "upward.py"
    wrong.write_text("from vtop.core.session.session import Session\n\n__all__ = ['Session']\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    lint = [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"]
    broken = subprocess.run(lint, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert broken.returncode != 0, broken.stdout
    assert "vtop.core.store.upward -> vtop.core.session.session" in broken.stdout, broken.stdout
    wrong.unlink()
    kept = subprocess.run(lint, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert kept.returncode == 0, kept.stdout


UNIT = ROOT / "tests" / "unit"
TESTED_BY_RUNNING = {
    "vtop/cli": "tests/app and tests/install run its commands",
    "vtop/ui/screens": "tests/app drives them in the real app (Pilot)",
    "vtop/ui/widgets": "tests/app drives them in the real app (Pilot)",
}
"""Packages whose tests drive them from outside rather than one module at a time."""


def test_unit_tests_mirror_the_packages_they_test() -> None:
    """tests/unit/<path>/ holds the tests of vtop/<path>/: every package of modules has its
    folder (or is named with where its tests are), every folder is a package, and every test
    file there imports from the package it sits under."""
    packages = {
        path.parent.relative_to(ROOT).as_posix()
        for path in (ROOT / "vtop").rglob("*.py")
        if path.name != "__init__.py"
    }
    folders = {
        "vtop/" + path.parent.relative_to(UNIT).as_posix()
        for path in UNIT.rglob("test_*.py")
        if path.parent != UNIT
    }
    untested = sorted(packages - folders - set(TESTED_BY_RUNNING) - {"vtop"})
    assert untested == [], f"packages without a tests/unit folder: {untested}"
    assert sorted(folders - packages) == [], "tests/unit folders that mirror no package"
    misplaced = []
    for path in UNIT.rglob("test_*.py"):
        if path.parent == UNIT:
            continue
        package = "vtop." + path.parent.relative_to(UNIT).as_posix().replace("/", ".")
        if not any(name.startswith(package + ".") for name in imported_modules(path)):
            misplaced.append(f"{path.relative_to(ROOT)} imports nothing of {package}")
    assert misplaced == []
