"""What a stranger installs: the sdist and the wheel built from this checkout (the wheel from
the sdist), the wheel installed into a fresh virtual environment outside the checkout (not
editable), and the installed `vtop` run from a directory that is not the checkout.

`scripts/test` builds the environment in the background while it lints (`VTOP_WHEEL_DIR`);
run alone, this module builds it with `scripts/install-wheel`.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.support.terminal import run_in_terminal

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
SHIPPED_DATA = ("*.yaml", "*.tcss", "*.vtoprec", "py.typed")

pytestmark = pytest.mark.xdist_group("installed-wheel")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory holding dist/ (sdist and wheel) and venv/ (the wheel installed)."""
    given = os.environ.get("VTOP_WHEEL_DIR")
    where = Path(given) if given else tmp_path_factory.mktemp("wheel")
    if not (where / "venv" / "bin" / "vtop").exists():
        built = subprocess.run(
            [str(ROOT / "scripts" / "install-wheel"), str(where)], capture_output=True, text=True
        )
        assert built.returncode == 0, built.stderr[-3000:]
    return where


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory (and HOME) that is not the checkout."""
    return tmp_path_factory.mktemp("stranger")


def user_env(installed: Path, home: Path) -> dict[str, str]:
    """A user's environment: the new venv's bin first on PATH, no PYTHONPATH, a fresh HOME."""
    return {
        "PATH": f"{installed / 'venv' / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
    }


def vtop(installed: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `vtop` with these arguments, from outside the checkout."""
    return subprocess.run(
        [str(installed / "venv" / "bin" / "vtop"), *args],
        capture_output=True,
        text=True,
        cwd=home,
        env=user_env(installed, home),
        timeout=120,
    )


def source_files() -> set[str]:
    """Every module and data file of the source tree, by the path it has in the wheel."""
    package = {
        str(p.relative_to(ROOT))
        for pattern in ("*.py", *SHIPPED_DATA)
        for p in (ROOT / "vtop").rglob(pattern)
        if "__pycache__" not in p.parts
    }
    rules = {
        f"vtop/rules/{p.relative_to(ROOT / 'rules')}" for p in (ROOT / "rules").rglob("*.yaml")
    }
    return package | rules


def test_the_wheel_holds_every_module_and_data_file_of_the_tree(installed: Path) -> None:
    (wheel,) = (installed / "dist").glob("vtop_vllm-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    packaged = {n for n in names if not n.startswith("vtop_vllm-")}
    assert sorted(source_files() - packaged) == []
    assert sorted(packaged - source_files()) == []
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_sdist_holds_the_tree_the_wheel_is_built_from(installed: Path) -> None:
    (sdist,) = (installed / "dist").glob("vtop_vllm-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    expected = {p.replace("vtop/rules/", "rules/", 1) for p in source_files()}
    assert sorted(expected - names) == []
    assert {"README.md", "LICENSE", "pyproject.toml", "setup.py"} <= names


def test_the_installed_vtop_answers_help_and_version(installed: Path, outside: Path) -> None:
    helped = vtop(installed, outside, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "commands (vtop COMMAND --help for each)" in helped.stdout
    for flag in ("--version", "-V"):
        version = vtop(installed, outside, flag)
        assert (version.returncode, version.stdout.strip()) == (0, f"vtop {VERSION}"), version


def packaged(installed: Path, home: Path, package: str, name: str) -> Path:
    """Where the installed package keeps one of its data files."""
    python = installed / "venv" / "bin" / "python"
    code = f"from importlib import resources; print(resources.files({package!r}) / {name!r})"
    out = subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=home,
        env=user_env(installed, home),
    )
    path = Path(out.stdout.strip())
    assert installed in path.parents, path
    return path


def test_the_installed_vtop_diagnoses_the_packaged_demo_as_json(
    installed: Path, outside: Path
) -> None:
    recording = packaged(installed, outside, "vtop.demo", "storm.vtoprec")
    judged = vtop(installed, outside, "diagnose", str(recording), "--to", "80", "--json")
    report = json.loads(judged.stdout)
    assert report["verdict"] == "critical" and judged.returncode == 2, judged.stderr
    assert report["primary"]["id"] == "M1"


def test_the_installed_vtop_checks_its_shipped_rules(installed: Path, outside: Path) -> None:
    where = vtop(installed, outside, "rules", "path")
    assert where.returncode == 0 and installed in Path(where.stdout.strip()).parents, where
    checked = vtop(installed, outside, "rules", "check", where.stdout.strip())
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = vtop(installed, outside, "rules", "test", where.stdout.strip())
    assert tested.returncode == 0, tested.stdout[-2000:] + tested.stderr


def test_the_installed_vtop_sizes_the_kv_cache_of_a_known_model(
    installed: Path, outside: Path
) -> None:
    # Llama-3-8B: 32 layers x 8 KV heads x head_dim 128, K and V, 2 bytes each
    sized = vtop(installed, outside, "kv", "--layers", "32", "--kv-heads", "8", "--head-dim", "128")
    assert sized.returncode == 0, sized.stderr
    assert "KV bytes per token per GPU: 131,072 B" in sized.stdout


def test_the_installed_dashboard_runs_the_demo_in_a_terminal(
    installed: Path, outside: Path
) -> None:
    demo = run_in_terminal(
        [str(installed / "venv" / "bin" / "vtop"), "demo", "--seek", "40"],
        env=user_env(installed, outside),
        cwd=outside,
        keys=[(6.0, b"q")],
    )
    assert demo.returncode == 0, demo.text[-2000:]
    assert "REPLAY" in demo.text and "M1" in demo.text, demo.text[-2000:]


def test_the_installed_vtop_reads_a_spinning_process_s_stacks_with_its_own_py_spy(
    installed: Path, outside: Path
) -> None:
    """py-spy comes with the wheel's dependencies: `vtop stacks PID` from the new venv alone."""
    code = "def spin_here():\n    while True:\n        pass\n\nspin_here()\n"
    spinning = subprocess.Popen(["python3", "-c", code], start_new_session=True)
    try:
        read = vtop(installed, outside, "stacks", str(spinning.pid))
        assert read.returncode == 2, read.stdout + read.stderr
        assert "SPINNING" in read.stdout and "at spin_here (<string>:" in read.stdout, read.stdout
    finally:
        spinning.kill()
        spinning.wait()
