"""The distribution: a name of its own on PyPI, its licence and metadata, and a wheel that holds
the rules, the demo recording and the stylesheet."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_metadata_names_a_free_distribution_its_licence_and_bounds() -> None:
    assert PROJECT["name"] == "vtop-vllm" and PROJECT["scripts"]["vtop"] == "vtop.cli:main"
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
    assert PROJECT["license"] == "Apache-2.0" and PROJECT["keywords"] and PROJECT["urls"]
    assert any(c.startswith("Topic :: System :: Monitoring") for c in PROJECT["classifiers"])
    pinned = {Requirement(r).name: Requirement(r) for r in PROJECT["optional-dependencies"]["test"]}
    for requirement in map(Requirement, PROJECT["dependencies"]):
        if requirement.name in ("textual", "textual-plotext", "plotext"):
            assert any(s.operator == "<" for s in requirement.specifier), requirement
            version = next(iter(pinned[requirement.name].specifier)).version
            assert requirement.specifier.contains(version), (requirement, version)


def test_the_wheel_holds_rules_demo_stylesheet_and_licence(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("vtop_vllm-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped_rules = {p.name for p in (ROOT / "rules").glob("*.yaml")}
    assert {f"vtop/rules/{name}" for name in shipped_rules} <= names
    assert {"vtop/demo/storm.vtoprec", "vtop/ui/vtop.tcss", "vtop/py.typed"} <= names
    assert any(name.endswith("licenses/LICENSE") for name in names)
