"""vLLM's own metric definitions, read from the installed vLLM's source (parsed, not imported:
the test suite's interpreter has no vLLM). Two forms define a family:

- a constructor given `name="vllm:..."`: prometheus_client's `Counter`/`Gauge`/`Histogram`
  or vLLM's `_counter_cls`/`_gauge_cls`/`_histogram_cls` wrappers;
  (the name a keyword, the first argument, or a module constant holding it);
- the offloading connector's tables, `{Names.X: OffloadingCounterMetadata(...)}` or
  `metrics[Names.X] = OffloadingGaugeMetadata(...)`, where `Names.X = "vllm:..."` is a class
  constant (in another module, as often as not);
- a list of `("vllm:...", "help")` pairs bound to a name that says the kind
  (`counter_specs = [...]`, turned into counters in a loop).

A counter's wire name carries `_total` (prometheus_client appends it). Every other string that
is a whole `vllm:` name (one built at run time, as `cache_config_info`) is listed by
`vllm_names`, so that nothing vLLM's source names escapes the catalogue.
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.support.vllm_harness.server import vllm_python

KINDS = ("counter", "gauge", "histogram")
WHOLE_NAME = re.compile(r"vllm:[a-z0-9_]+")


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


def _trees(root: Path) -> list[ast.Module]:
    """The modules that name or define metrics (vLLM's benchmarks, which only read names, left
    out)."""
    trees = []
    for path in root.rglob("*.py"):
        text = path.read_text(errors="replace")
        if "benchmarks" not in path.relative_to(root).parts and (
            "vllm:" in text or "Metadata(" in text
        ):
            trees.append(ast.parse(text))
    return trees


def vllm_names(root: Path) -> set[str]:
    """Every string in vLLM's source that is a whole `vllm:` metric name, as written (a
    counter's without the `_total` the wire adds, as often as not)."""
    return {
        node.value
        for tree in _trees(root)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and WHOLE_NAME.fullmatch(node.value)
    }


def vllm_definitions(root: Path) -> dict[str, str]:
    """Wire family name -> counter, gauge or histogram, as vLLM's source defines it."""
    trees = _trees(root)
    constants: dict[str, str] = {}
    for tree in trees:
        constants |= _name_constants(tree)
    kinds: dict[str, str] = {}
    for tree in trees:
        for name, kind in _definitions(tree, constants):
            wire = name if kind != "counter" or name.endswith("_total") else f"{name}_total"
            kinds[wire] = kind
    return kinds


def _name_constants(tree: ast.Module) -> dict[str, str]:
    """`Class.NAME` (and a module's bare `NAME`) -> the `vllm:` string assigned to it."""
    found: dict[str, str] = {}
    scopes: list[tuple[str, list[ast.stmt]]] = [("", tree.body)]
    scopes += [(f"{node.name}.", node.body) for node in tree.body if isinstance(node, ast.ClassDef)]
    for prefix, body in scopes:
        for statement in body:
            if (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
                and statement.value.value.startswith("vllm:")
            ):
                found[prefix + statement.targets[0].id] = statement.value.value
    return found


def _definitions(tree: ast.Module, constants: dict[str, str]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (kind := _constructor_kind(node.func)):
            named = [k.value for k in node.keywords if k.arg == "name"] + node.args[:1]
            found += [(name, kind) for name in map(_name_in(constants), named) if name]
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            found += _spec_list(node.targets[0].id, node.value)
        pairs: list[tuple[ast.expr | None, ast.expr]] = []
        if isinstance(node, ast.Dict):
            pairs += zip(node.keys, node.values, strict=True)
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            pairs.append((node.targets[0].slice, node.value))
        for key, value in pairs:
            if (name := _constant_of(key, constants)) and (kind := _metadata_kind(value)):
                found.append((name, kind))
    return found


def _name_in(constants: dict[str, str]) -> Callable[[ast.expr], str]:
    """The `vllm:` name an argument holds: a string, or a module constant holding one."""

    def name(value: ast.expr) -> str:
        if isinstance(value, ast.Name):
            return constants.get(value.id, "")
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value if value.value.startswith("vllm:") else ""
        return ""

    return name


def _spec_list(bound_to: str, value: ast.expr) -> list[tuple[str, str]]:
    """`counter_specs = [("vllm:a", "help"), ...]`: the names, of the kind the name says."""
    kind = next((k for k in KINDS if k in bound_to.lower()), "")
    if not kind or not isinstance(value, ast.List):
        return []
    return [
        (pair.elts[0].value, kind)
        for pair in value.elts
        if isinstance(pair, ast.Tuple)
        and pair.elts
        and isinstance(pair.elts[0], ast.Constant)
        and isinstance(pair.elts[0].value, str)
        and pair.elts[0].value.startswith("vllm:")
    ]


def _constructor_kind(func: ast.expr) -> str:
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    lowered = called.lower().strip("_")
    for kind in KINDS:
        if lowered in (kind, f"{kind}_cls"):
            return kind
    return ""


def _metadata_kind(value: ast.expr) -> str:
    while isinstance(value, ast.Tuple) and len(value.elts) == 1:
        value = value.elts[0]
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        for kind in KINDS:
            if value.func.id == f"Offloading{kind.title()}Metadata":
                return kind
    return ""


def _constant_of(key: ast.expr | None, constants: dict[str, str]) -> str:
    if isinstance(key, ast.Attribute) and isinstance(key.value, ast.Name):
        return constants.get(f"{key.value.id}.{key.attr}", "")
    if isinstance(key, ast.Name):
        return constants.get(key.id, "")
    return ""
