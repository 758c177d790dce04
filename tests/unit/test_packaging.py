"""The distribution's metadata: a name of its own on PyPI, its licence, bounds that admit the
pinned renderers, packages found rather than listed, and no link to a page that does not exist
(what the built wheel holds is checked in tests/install/)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_metadata_names_a_free_distribution_its_licence_and_bounds() -> None:
    assert PROJECT["name"] == "vtop-vllm" and PROJECT["scripts"]["vtop"] == "vtop.cli:main"
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
    assert PROJECT["license"] == "Apache-2.0" and PROJECT["keywords"]
    assert any(c.startswith("Topic :: System :: Monitoring") for c in PROJECT["classifiers"])
    pinned = {Requirement(r).name: Requirement(r) for r in PROJECT["optional-dependencies"]["test"]}
    for requirement in map(Requirement, PROJECT["dependencies"]):
        if requirement.name in ("textual", "textual-plotext", "plotext"):
            assert any(s.operator == "<" for s in requirement.specifier), requirement
            version = next(iter(pinned[requirement.name].specifier)).version
            assert requirement.specifier.contains(version), (requirement, version)


def test_packages_are_discovered_and_no_link_points_at_the_unpublished_page() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "packages" not in setuptools, "a hand-kept package list leaves new packages out"
    assert "find_packages(" in (ROOT / "setup.py").read_text()
    assert all("pypi.org/project/vtop-vllm" not in url for url in PROJECT.get("urls", {}).values())
