"""vLLM's own metric definitions, read from the installed vLLM's source text (no import: the
test suite's interpreter has no vLLM): each `name="vllm:..."` passed to a Counter, Gauge or
Histogram constructor (prometheus_client's, or vLLM's `_counter_cls` / `_gauge_cls` /
`_histogram_cls` wrappers), with the kind of constructor it was passed to."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support.vllm_harness.server import vllm_python

DEFINITION = re.compile(
    r"(?P<kind>counter|gauge|histogram)\w*\(\s*(?:\w+\s*=\s*[^,]*,\s*)*?name\s*=\s*"
    r"[\"'](?P<name>vllm:[a-z0-9_:]+)[\"']",
    re.IGNORECASE,
)


def vllm_source_dir() -> Path:
    """The installed vLLM package's directory (found without importing vLLM)."""
    found = subprocess.run(
        [
            str(vllm_python()),
            "-c",
            "import importlib.util as u; print(u.find_spec('vllm').submodule_search_locations[0])",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return Path(found.stdout.strip())


def vllm_definitions(root: Path) -> dict[str, str]:
    """Family name -> counter, gauge or histogram, as vLLM's source defines it; a counter's
    wire name carries `_total` (prometheus_client appends it)."""
    kinds: dict[str, str] = {}
    for path in root.rglob("*.py"):
        text = path.read_text(errors="replace")
        if "vllm:" not in text:
            continue
        for match in DEFINITION.finditer(text):
            kind, name = match["kind"].lower(), match["name"]
            wire = name if kind != "counter" or name.endswith("_total") else f"{name}_total"
            kinds[wire] = kind
    return kinds
