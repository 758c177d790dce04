"""`vtop rules export` is accepted by the real promtool (Debian package prometheus)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

RUNBOOKS = "https://wiki.example.com/vtop/rules.md"


def test_exported_rules_pass_promtool(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool missing: apt-get install prometheus (scripts/test does)")
    out = subprocess.run(
        [sys.executable, "-m", "vtop", "rules", "export", "--runbook-base", RUNBOOKS],
        capture_output=True,
        text=True,
        check=True,
    )
    document = yaml.safe_load(out.stdout)
    rules = [rule for group in document["groups"] for rule in group["rules"]]
    alerts = {rule["alert"] for rule in rules if "alert" in rule}
    assert {"VllmPreemptionStorm", "VllmKVCacheMemoryIsTheBindingLimit"} <= alerts
    assert "VllmTTFTIsDominatedByQueueing" in alerts
    # Q2 needs vtop:max_num_seqs, which Prometheus does not have
    assert "VllmMaxNumSeqsIsTheLimiterNotMemory" not in alerts
    assert not any("nvml:" in rule["expr"] or "vtop:" in rule["expr"] for rule in rules)
    records = [rule["record"] for rule in rules if "record" in rule]
    assert "engine:request_queue_time_seconds:rate1m" in records
    first_alert = next(i for i, rule in enumerate(rules) if "alert" in rule)
    assert all("record" in rule for rule in rules[:first_alert])  # records ahead of the alerts
    for rule in rules:
        if "alert" in rule:
            assert rule["labels"]["severity"] in ("info", "warning", "critical")
            assert "{{ $value }}" in rule["annotations"]["description"]
            anchor = rule["labels"]["rule_id"].lower()
            assert rule["annotations"]["runbook_url"] == f"{RUNBOOKS}#{anchor}"
    path = tmp_path / "vtop.rules.yml"
    path.write_text(out.stdout)
    check = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(rules)} rules found" in check.stdout


def test_settings_given_to_the_export_make_more_rules_exportable(tmp_path: Path) -> None:
    def alerts(*argv: str) -> set[str]:
        out = subprocess.run(
            [sys.executable, "-m", "vtop", "rules", "export", *argv],
            capture_output=True,
            text=True,
            check=True,
        )
        groups = yaml.safe_load(out.stdout)["groups"]
        return {rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule}

    plain = alerts()
    settings = ("max_num_seqs=256", "block_size=16", "kv_capacity_tokens=500000", "num_engines=1")
    given = alerts(*(arg for setting in settings for arg in ("--setting", setting)))
    assert plain < given and "VllmMaxNumSeqsIsTheLimiterNotMemory" in given
    bad = subprocess.run(
        [sys.executable, "-m", "vtop", "rules", "export", "--setting", "max_num_seqs"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 64 and "NAME=NUMBER" in bad.stderr


def test_rules_check_reports_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("rules:\n  - id: X\n    title: t\n    phase: nope\n")
    out = subprocess.run(
        [sys.executable, "-m", "vtop", "rules", "check", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1
    assert f"{tmp_path / 'bad.yaml'}:2: rule is missing 'severity'" in out.stderr


def test_the_exported_rules_pass_the_rule_tests_in_promtool(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool missing: apt-get install prometheus (scripts/test does)")
    out = subprocess.run(
        [sys.executable, "-m", "vtop", "rules", "export", "--tests", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    checked = int(out.stdout.split()[0])
    assert checked >= 70 and "error:" not in out.stderr
    test_file = tmp_path / "vtop.rules_test.yml"
    ran = subprocess.run(
        [promtool, "test", "rules", str(test_file)], capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    assert "SUCCESS" in ran.stdout
    # the tests can fail: a storm threshold Prometheus would read differently breaks them
    rules = tmp_path / "vtop.rules.yml"
    rules.write_text(rules.read_text().replace("> (0.01 *", "> (1000 *", 1))
    broken = subprocess.run(
        [promtool, "test", "rules", str(test_file)], capture_output=True, text=True
    )
    assert broken.returncode == 1 and "VllmPreemptionStorm" in broken.stdout + broken.stderr
