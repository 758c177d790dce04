"""`vtop rules export` is accepted by the real promtool (Debian package prometheus)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml


def test_exported_rules_pass_promtool(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool missing: apt-get install prometheus (scripts/test does)")
    out = subprocess.run(
        [sys.executable, "-m", "vtop", "rules", "export"],
        capture_output=True,
        text=True,
        check=True,
    )
    document = yaml.safe_load(out.stdout)
    alerts = {rule["alert"] for group in document["groups"] for rule in group["rules"]}
    assert {"vtop_M1", "vtop_Q1", "vtop_L1", "vtop_ST2"} <= alerts
    assert "vtop_Q2" not in alerts  # needs vtop:max_num_seqs, which Prometheus does not have
    assert not any(
        "nvml:" in rule["expr"] or "vtop:" in rule["expr"]
        for group in document["groups"]
        for rule in group["rules"]
    )
    path = tmp_path / "vtop.rules.yml"
    path.write_text(out.stdout)
    check = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(alerts)} rules found" in check.stdout


def test_rules_check_reports_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("rules:\n  - id: X\n    title: t\n    phase: nope\n")
    out = subprocess.run(
        [sys.executable, "-m", "vtop", "rules", "check", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1
    assert f"{tmp_path / 'bad.yaml'}:2: rule is missing 'severity'" in out.stderr
