"""vtop's packages, found rather than listed.

Every package under `vtop/` is discovered; the top-level `rules/` folder ships inside the package
as `vtop.rules`. setuptools' discovery in pyproject.toml (`[tool.setuptools.packages.find]`) cannot
add a package whose folder lies outside the tree it searches, so that one mapping is made here and
everything else stays in pyproject.toml.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["vtop", "vtop.*"]), "vtop.rules"],
    package_dir={"vtop.rules": "rules"},
)
