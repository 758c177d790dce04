"""The lint contract: vtop.core never imports Textual, plotext or vtop.ui (checked two ways)."""

from __future__ import annotations

import ast
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
