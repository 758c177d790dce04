"""Damaged files, bad rules, bad config: an error naming the file, non-zero, no traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.vtop_cli import Ran, vtop
from vtop.core.rules.loader import PACKAGED

FAST_S = 5.0
"""Python and vtop's imports; a 1 GB file is refused without reading it."""


def refused(ran: Ran, *needles: str, code: int | None = None) -> None:
    """Non-zero (or exactly `code`), every needle in the output, no traceback."""
    assert "Traceback" not in ran.text, ran.text
    assert ran.code != 0 if code is None else ran.code == code, (ran.code, ran.text)
    for needle in needles:
        assert needle in ran.text, (needle, ran.text)


def files(tmp_path: Path) -> dict[str, Path]:
    """Files that are not recordings."""
    empty = tmp_path / "empty.vtoprec"
    empty.write_bytes(b"")
    text = tmp_path / "notes.txt"
    text.write_text("incident notes\n")
    big = tmp_path / "big.bin"
    with big.open("wb") as file:
        file.truncate(1024**3)
    garbage = tmp_path / "garbage.vtoprec"
    garbage.write_bytes(b"VTOPREC 1\n" + os.urandom(200_000))
    return {"empty": empty, "text": text, "1 GB": big, "header + garbage": garbage}


@pytest.mark.parametrize("command", ["diagnose", "replay"])
def test_a_file_that_is_not_a_recording_is_refused_at_once(tmp_path: Path, command: str) -> None:
    for name, path in files(tmp_path).items():
        ran = vtop(command, str(path), *(["--no-gpu"] if command == "diagnose" else []))
        refused(ran, str(path))
        assert ran.seconds < FAST_S, (name, ran.seconds)
    for path in (tmp_path, tmp_path / "missing.vtoprec"):
        refused(vtop(command, str(path)), str(path))


def rules_dir(tmp_path: Path, files: dict[str, bytes]) -> Path:
    directory = tmp_path / "rules"
    (directory / "tests").mkdir(parents=True)
    for name, content in files.items():
        (directory / name).write_bytes(content)
    return directory


RULE = b"""rules:
  - id: X1
    title: something
    phase: queue
    severity: warning
    expr: vllm:num_requests_waiting > 1
    diagnosis: waiting
"""


def test_a_rule_file_that_is_not_utf8_is_named_with_its_line(tmp_path: Path) -> None:
    directory = rules_dir(tmp_path, {"a.yaml": RULE.replace(b"something", b"caf\xe9")})
    refused(vtop("rules", "check", str(directory)), "a.yaml:3: not UTF-8", code=1)


def test_a_duplicate_rule_id_names_both_places(tmp_path: Path) -> None:
    one_file = rules_dir(tmp_path / "one", {"a.yaml": RULE + RULE[len(b"rules:\n") :]})
    refused(vtop("rules", "check", str(one_file)), "a.yaml:8: duplicate rule id 'X1'", "a.yaml:2")
    two_files = rules_dir(tmp_path / "two", {"a.yaml": RULE, "b.yaml": RULE})
    refused(vtop("rules", "check", str(two_files)), "b.yaml:2: duplicate rule id", "a.yaml:2")


def test_broken_rule_tests_are_named_with_their_line(tmp_path: Path) -> None:
    broken = b"rule_file: a.yaml\ntests:\n  - name: [unclosed\n"
    directory = rules_dir(tmp_path, {"a.yaml": RULE})
    (directory / "tests" / "a_test.yaml").write_bytes(broken)
    refused(vtop("rules", "test", str(directory)), "a_test.yaml:", "invalid YAML", code=1)
    no_expect = b"rule_file: a.yaml\ntests:\n  - name: lonely\n    series: {'vllm:x': 1x3}\n"
    (directory / "tests" / "a_test.yaml").write_bytes(no_expect)
    refused(
        vtop("rules", "test", str(directory)), "a_test.yaml:3: test case 'lonely' has no 'expect'"
    )


def test_rules_commands_on_a_missing_or_empty_directory_exit_64(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for directory in (tmp_path / "missing", empty):
        for action in ("check", "test"):
            refused(vtop("rules", action, str(directory)), str(directory), code=64)
        refused(vtop("rules", "export", "--rules", str(directory)), str(directory), code=64)


def test_export_reports_a_bad_rule_with_its_line(tmp_path: Path) -> None:
    directory = rules_dir(tmp_path, {"a.yaml": RULE.replace(b"> 1", b"> > 1")})
    refused(vtop("rules", "export", "--rules", str(directory)), "a.yaml:6: rule X1 expr", code=1)


def test_rules_path_prints_the_shipped_rules() -> None:
    ran = vtop("rules", "path")
    assert (
        ran.code == 0 and Path(ran.out.strip()) == PACKAGED and (PACKAGED / "queue.yaml").is_file()
    )


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"interval_s = true\n", "config.toml:1: interval_s = True: expected float"),
        (b"rules_dir = 42\n", "config.toml:1: rules_dir = 42: expected a list of strings"),
        (b"history_s = -5\n", "config.toml:1: history_s = -5"),
        (b"urls = ['\xff']\n", "config.toml:1: not UTF-8"),
    ],
)
def test_a_bad_config_file_is_named(tmp_path: Path, content: bytes, needle: str) -> None:
    config = tmp_path / "config.toml"
    config.write_bytes(content)
    ran = vtop("demo", env={"VTOP_CONFIG": str(config)})
    refused(ran, needle)


def test_a_config_path_that_is_a_directory_or_missing_is_an_error(tmp_path: Path) -> None:
    refused(vtop("demo", env={"VTOP_CONFIG": str(tmp_path)}), f"{tmp_path}: not a file")
    missing = tmp_path / "nope.toml"
    refused(vtop("demo", env={"VTOP_CONFIG": str(missing)}), f"{missing}: no such file")
