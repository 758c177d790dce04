"""The command line as users type it (subprocesses): help, typos, errors, pipes, the config
file and VTOP_* honoured by every command, recording windows, shell completion."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.hostile import hostile, trickle
from tests.support.vtop_cli import ROOT, vtop
from vtop.cli.commands import COMMANDS
from vtop.cli.dashboard import monitor_parser

DEMO = ROOT / "vtop" / "demo" / "storm.vtoprec"


def test_help_lists_every_command_in_one_line_each() -> None:
    ran = vtop("--help")
    assert ran.code == 0
    for name, command in COMMANDS.items():
        assert any(
            line.split()[:1] == [name] and command.summary in line for line in ran.out.splitlines()
        ), name


@pytest.mark.parametrize(
    ("typo", "meant"), [("diagnoze", "diagnose"), ("demoo", "demo"), ("replya", "replay")]
)
def test_a_word_close_to_a_command_is_a_typo_not_a_host(typo: str, meant: str) -> None:
    ran = vtop(typo)
    assert ran.code == 64 and f"did you mean '{meant}'" in ran.err and "Traceback" not in ran.err
    assert ran.err.startswith("vtop: error: ")


def test_every_flag_of_every_command_has_help() -> None:
    parsers = [monitor_parser(), *(c.argument_parser() for c in COMMANDS.values())]
    for parser in parsers:
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, (parser.prog, action.option_strings)


def test_plain_and_diagnose_honour_the_config_file_and_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    with hostile(trickle(sized=True)) as url:
        config.write_text(f'urls = ["{url}"]\ntimeout_s = 1.5\n')
        plain = vtop("--plain", "--once", "--samples", "1", env={"VTOP_CONFIG": str(config)})
        assert plain.code == 3 and url in plain.out and "within 1.5 s" in plain.out, plain.text
        env = {"VTOP_CONFIG": str(config), "VTOP_TIMEOUT": "1"}
        diagnosed = vtop("diagnose", url, "--window", "1", "--no-gpu", env=env)
        assert diagnosed.code == 3 and "within 1 s" in diagnosed.out, diagnosed.text
        flagged = vtop("diagnose", url, "--window", "1", "--no-gpu", "--timeout", "2", env=env)
        assert "within 2 s" in flagged.out, flagged.text  # a flag given wins over both


def test_a_missing_vtop_config_is_an_error_for_every_command(tmp_path: Path) -> None:
    env = {"VTOP_CONFIG": str(tmp_path / "nope.toml")}
    for argv in (("diagnose", str(DEMO), "--no-gpu"), ("--plain", "--once"), ("record", "-o", "x")):
        ran = vtop(*argv, env=env)
        assert ran.code == 64 and "nope.toml: no such file" in ran.err, (argv, ran.text)


def test_diagnose_a_recording_between_from_and_to() -> None:
    ran = vtop("diagnose", str(DEMO), "--from", "10", "--to", "70", "--json", "--no-gpu")
    report = json.loads(ran.out)
    assert 55 <= report["window_s"] <= 60 and report["primary"]["id"] == "M1"
    empty = vtop("diagnose", str(DEMO), "--from", "100000", "--no-gpu")
    assert empty.code == 3 and "holds 0 frame(s)" in empty.err


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion_knows_the_commands_and_their_flags(shell: str, tmp_path: Path) -> None:
    ran = vtop("completion", shell)
    assert ran.code == 0 and "diagnose" in ran.out
    assert ("-l window" if shell == "fish" else "--window") in ran.out
    for name in COMMANDS:  # every command, and the subcommands and flags of `rules`
        assert name in ran.out, name
    assert ("-l setting" if shell == "fish" else "--setting") in ran.out and "export" in ran.out
    if shell == "bash":
        script = tmp_path / "vtop.bash"
        script.write_text(ran.out)
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
        completed = subprocess.run(
            [
                "bash",
                "-c",
                f"source {script}; COMP_WORDS=(vtop rules ex); COMP_CWORD=2; "
                "_vtop; echo ${COMPREPLY[@]}; COMP_WORDS=(vtop he); COMP_CWORD=1; _vtop; "
                "echo ${COMPREPLY[@]}",
            ],
            capture_output=True,
            text=True,
        )
        assert completed.stdout.split() == ["export", "help"], completed.stdout


def test_whatif_predicts_the_demo_fix_and_refuses_what_it_cannot_model(tmp_path: Path) -> None:
    ran = vtop("whatif", str(DEMO), "--to", "75", "--set", "max-num-seqs=1", "--json")
    assert ran.code == 0, ran.text
    report = json.loads(ran.out)
    assert report["schema"] == "vtop.whatif/1" and report["misses"] == []
    assert report["predicted"]["preemptions_per_s"] == 0
    assert report["model"]["max_num_batched_tokens"] is None  # unknown: said, not invented
    text = vtop("whatif", str(DEMO), "--to", "75", "--set", "max-num-seqs=1")
    assert "PREDICTED for --max-num-seqs 1" in text.out and "preemptions/s" in text.out
    unknown = vtop("whatif", str(DEMO), "--set", "enforce-eager=1")
    assert unknown.code == 64 and "the model changes only" in unknown.err
    idle = vtop("whatif", str(DEMO), "--to", "2", "--set", "max-num-seqs=1")
    assert idle.code == 3 and "cannot model this window" in idle.err and "Traceback" not in idle.err
    refused = vtop("whatif", str(DEMO), "--to", "2", "--set", "max-num-seqs=1", "--json")
    report = json.loads(refused.out)  # JSON on every path, a refusal included
    assert refused.code == 3 and report["exit_code"] == 3 and report["predicted"] is None
    assert "cannot model this window" in report["refused"], report
    junk = tmp_path / "notes.txt"
    junk.write_text("not a recording\n")
    wrong = vtop("whatif", str(junk))
    assert wrong.code != 0 and "Traceback" not in wrong.err


def test_whatif_on_the_demo_storm_predicts_the_first_minute_after_the_fix(tmp_path: Path) -> None:
    """The storm window of the demo (20-80 s) predicts the TTFT of the window after the fix
    (from 100 s), as measured there, within 25%: the first seconds after a restart, not the
    steady state a longer window would reach."""
    env = {"VTOP_STATE_DIR": str(tmp_path)}  # a fresh profile: the storm window alone
    demo = str(DEMO)
    storm = vtop(
        "whatif", demo, "--from", "20", "--to", "80", "--set", "max-num-seqs=1", "--json", env=env
    )
    after = vtop("whatif", str(DEMO), "--from", "100", "--json", env=env)
    assert storm.code == 0 and after.code == 0, storm.err + after.err
    predicted = json.loads(storm.out)
    measured = json.loads(after.out)["measured"]["ttft_p50_s"]
    assert measured > 10, measured  # the after window has a queue
    first = predicted["after_restart"]["ttft_p50_s"]
    assert first == pytest.approx(measured, rel=0.25), (first, measured)
    assert predicted["predicted"]["ttft_p50_s"] > 1.5 * measured  # the steady state is later


def test_whatif_keeps_the_step_profile_privately_and_a_damaged_one_is_an_error(
    tmp_path: Path,
) -> None:
    env = {"VTOP_STATE_DIR": str(tmp_path / "state")}
    before = vtop("whatif", str(DEMO), "--to", "75", "--json", env=env)
    after = vtop("whatif", str(DEMO), "--from", "105", "--json", env=env)
    assert before.code == 0 and after.code == 0, before.err + after.err
    profile = tmp_path / "state" / "profiles" / "step-profiles.json"
    assert profile.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700
    windows = next(iter(json.loads(profile.read_text()).values()))
    assert len(windows) == 2  # the storm's slices and those after the fix
    profile.write_text('{"h m tp=1": [\n  {"time": 1, "points": [[1, 2,\n')
    damaged = vtop("whatif", str(DEMO), "--to", "75", env=env)
    assert damaged.code != 0 and "Traceback" not in damaged.err
    assert f"{profile}:3: not JSON" in damaged.err
    diagnosed = vtop("diagnose", str(DEMO), "--to", "75", env=env)
    assert diagnosed.code != 0 and f"{profile}:3" in diagnosed.err


def test_diagnose_ranks_the_primary_fixes_by_prediction_unless_told_not_to() -> None:
    ran = vtop("diagnose", str(DEMO), "--to", "75", "--json")
    report = json.loads(ran.out)
    predictions = report["predictions"]
    assert predictions["finding"].startswith("M1") and predictions["reason"] is None
    assert predictions["alternatives"][0]["flag"] == "--num-gpu-blocks-override"
    text = vtop("diagnose", str(DEMO), "--to", "75")
    assert "PREDICTED (scheduler model" in text.out
    quiet = vtop("diagnose", str(DEMO), "--to", "75", "--json", "--no-predict")
    assert json.loads(quiet.out)["predictions"] is None


def test_reports_fold_to_80_columns_in_a_pipe_and_name_the_model_as_it_is_served() -> None:
    for args in (
        ("diagnose", str(DEMO), "--to", "80"),
        ("whatif", str(DEMO), "--to", "75", "--set", "max-num-seqs=1"),
    ):
        piped = vtop(*args, env={"COLUMNS": ""})
        lines = piped.out.splitlines()
        assert lines and max(map(len, lines)) <= 80, [line for line in lines if len(line) > 80]
        assert "/work/" not in piped.out and "/.cache/" not in piped.out, piped.out[:400]
    wide = vtop("diagnose", str(DEMO), "--to", "80", env={"COLUMNS": "120"}).out.splitlines()
    assert 80 < max(map(len, wide)) <= 120
    assert wide[0].endswith("(tiny) over 79 s"), wide[0]
