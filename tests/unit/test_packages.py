"""Every package says what it offers truly: `from PACKAGE import *` works for each, and a
package whose `__all__` names its modules names every one of them."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import vtop

PACKAGES = [
    "vtop",
    *sorted(name for _, name, ok in pkgutil.walk_packages(vtop.__path__, "vtop.") if ok),
]


def modules_of(package: str) -> set[str]:
    """The modules and subpackages in a package's folder."""
    folder = Path(importlib.import_module(package).__file__ or "").parent
    return {info.name for info in pkgutil.iter_modules([str(folder)])}


@pytest.mark.parametrize("package", PACKAGES)
def test_a_star_import_of_every_package_works(package: str) -> None:
    exec(f"from {package} import *", {})


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_that_lists_its_modules_lists_them_all(package: str) -> None:
    listed = set(getattr(importlib.import_module(package), "__all__", []))
    modules = modules_of(package)
    if listed & modules:
        assert listed == modules, (package, sorted(modules - listed), sorted(listed - modules))
