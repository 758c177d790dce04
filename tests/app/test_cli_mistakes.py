"""No command lies and none surprises: each mistake a user can make, typed as a user types it
(a subprocess), with the exit code a script sees and the message a person reads."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.vtop_cli import ROOT, vtop

DEMO = ROOT / "vtop" / "demo" / "storm.vtoprec"


def refused(ran_code: int, err: str) -> bool:
    """An error said once as `vtop: error: ...` (or argparse's usage error), no traceback."""
    return ran_code != 0 and "Traceback" not in err and "error:" in err


def test_help_cmd_shows_the_commands_help_and_dash_v_the_version() -> None:
    helped = vtop("help", "diagnose")
    assert helped.code == 0 and helped.out.startswith("usage: vtop diagnose"), helped.text
    version = vtop("-V")
    assert version.code == 0 and version.out.startswith("vtop "), version.text


@pytest.mark.parametrize("word", ["foo", "gpu-host", "status"])
def test_a_bare_word_that_is_no_host_is_refused_and_never_port_80(word: str) -> None:
    ran = vtop(word, "--once", "--samples", "1", "--no-gpu")
    assert ran.code == 64 and refused(ran.code, ran.err), ran.text
    assert "is not a command, and no host of that name resolves" in ran.err
    assert "http://" + word + "/" not in ran.text and f"http://{word}:80" not in ran.text


def test_a_bare_host_name_that_resolves_is_a_server_on_vllms_port() -> None:
    host = socket.gethostname()  # resolves through /etc/hosts, as a cluster's node17 does
    assert "." not in host and socket.getaddrinfo(host, None), host
    ran = vtop(host, "--once", "--samples", "1", "--no-gpu", "--timeout", "1")
    assert f"http://{host}:8000 " in ran.out and ran.code == 3, ran.text
    helped = vtop("help", "nosuch")
    assert helped.code == 64 and "no command 'nosuch'" in helped.err, helped.text


def test_a_bare_host_gets_vllms_port_and_a_scheme_must_be_http() -> None:
    ran = vtop("127.0.0.1", "--once", "--samples", "1", "--no-gpu", "--timeout", "1")
    assert "http://127.0.0.1:8000 " in ran.out, ran.text
    ftp = vtop("diagnose", "ftp://127.0.0.1:8000", "--no-gpu")
    assert ftp.code == 64 and "unsupported scheme 'ftp'" in ftp.err, ftp.text


@pytest.mark.parametrize(
    ("args", "meant"),
    [
        (("kv", "--model", "x"), "--model-config"),
        (("diagnose", "--windw", "3"), "--window"),
        (("rules", "export", "--seting", "a=1"), "--setting"),
    ],
)
def test_flags_are_never_abbreviated_and_a_near_miss_gets_a_did_you_mean(
    args: tuple[str, ...], meant: str
) -> None:
    ran = vtop(*args)
    assert ran.code == 64 and "unrecognized arguments" in ran.err, ran.text
    assert f"did you mean {meant}?" in ran.err


def test_a_closed_pipe_dies_by_sigpipe_never_exit_0_by_chance() -> None:
    script = f'{sys.executable} -m vtop rules export | true; echo "rc=${{PIPESTATUS[0]}}"'
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert "rc=141" in done.stdout, done.stdout + done.stderr  # 128 + SIGPIPE
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    judged = subprocess.run(
        [
            "bash",
            "-c",
            f"{sys.executable} -m vtop diagnose {DEMO} --to 80 | head -1; "
            'echo "rc=${PIPESTATUS[0]}"',
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert "rc=2" in judged.stdout or "rc=141" in judged.stdout, judged.stdout


def test_without_a_terminal_the_dashboard_prints_plain_lines() -> None:
    ran = vtop("replay", str(DEMO), "--speed", "0")
    assert ran.code == 0, ran.text
    assert "stdout is not a terminal: printing plain lines" in ran.err
    assert len(ran.out.splitlines()) > 50 and "run " in ran.out.splitlines()[0]


def test_replay_plain_prints_the_lines_the_live_plain_does() -> None:
    ran = vtop("replay", str(DEMO), "--plain")
    lines = ran.out.splitlines()
    assert ran.code == 0 and lines, ran.text
    stormy = [line for line in lines if "CRITICAL M1" in line]
    assert stormy and " run " in stormy[0] and "preempt/s" in stormy[0], lines[:5]


def test_record_and_bundle_of_a_server_that_never_answered_exit_non_zero(tmp_path: Path) -> None:
    recorded = vtop("record", "127.0.0.1:1", "-o", str(tmp_path / "x.rec"), "--duration", "2")
    assert recorded.code == 3 and "no server answered" in recorded.err, recorded.text
    assert (tmp_path / "x.rec").exists()  # what was recorded is kept
    bundled = vtop("bundle", "127.0.0.1:1", "--duration", "2", "-o", str(tmp_path / "b.tgz"))
    assert bundled.code == 3 and "no server answered" in bundled.err, bundled.text


@pytest.mark.parametrize(
    "args",
    [
        ("--layers", "0", "--kv-heads", "8", "--head-dim", "128"),
        ("--layers", "32", "--kv-heads", "-8", "--head-dim", "128"),
        ("--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--kv-memory-gib", "0"),
        ("--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--seq-len", "-1"),
        (
            "--layers",
            "32",
            "--kv-heads",
            "8",
            "--head-dim",
            "128",
            "--gpu-memory-gib",
            "10",
            "--weights-gib",
            "16",
        ),
    ],
)
def test_kv_refuses_sizes_at_or_below_zero(args: tuple[str, ...]) -> None:
    ran = vtop("kv", *args)
    assert ran.code == 64 and refused(ran.code, ran.err), ran.text
    assert "capacity" not in ran.out


def test_ps_lists_servers_only_and_serve_without_vllm_says_what_to_do(tmp_path: Path) -> None:
    env = {"VTOP_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    whatif = vtop("whatif", str(DEMO), "--to", "75", "--set", "max_num_seqs=2", env=env)
    assert whatif.code == 0, whatif.text  # the spelling the report's config uses
    assert list((tmp_path / "state").rglob("step-profiles.json")), "the profile was kept"
    listed = vtop("ps", env=env)
    assert listed.code == 0 and listed.out.strip() == "no managed servers", listed.text
    served = vtop("serve", "--no-dashboard", "--", "some-model", env=env)
    assert served.code == 64 and "is not installed here" in served.err, served.text
    assert "--command" in served.err and "pip install" in served.err


def test_diagnose_of_a_refused_port_fails_at_once() -> None:
    started = time.monotonic()
    ran = vtop("diagnose", "127.0.0.1:1", "--no-gpu", "--json")
    assert ran.code == 3 and json.loads(ran.out)["verdict"] == "unknown", ran.text
    assert "connection failed" in json.loads(ran.out)["reason"]
    assert time.monotonic() - started < 10, "waited the 15 s window for a refused port"


def test_a_window_of_a_recording_keeps_its_flags_and_log() -> None:
    judged = vtop("diagnose", str(DEMO), "--from", "20", "--to", "75", "--json")
    config = json.loads(judged.out)["config"]
    assert config["max_num_seqs"] == {"value": 16, "source": "log"}, config
    modelled = vtop("whatif", str(DEMO), "--from", "20", "--to", "75", "--json")
    assert modelled.code == 0, modelled.text
    assert json.loads(modelled.out)["model"]["max_num_seqs"] == 16


def test_rules_list_prints_every_rule_with_phase_severity_and_title() -> None:
    ran = vtop("rules", "list")
    rows = ran.out.splitlines()
    assert ran.code == 0 and rows[0].split() == ["id", "phase", "severity", "title"], ran.text
    ids = {row.split()[0] for row in rows[1:]}
    assert {"M1", "Q0", "Q1-cap", "S1", "K1-block", "B1"} <= ids
    for row in rows[1:]:
        _, phase, severity, *title = row.split()
        assert phase in {
            "path",
            "queue",
            "memory",
            "compute",
            "latency",
            "config",
            "gpu",
            "streaming",
        }
        assert severity in {"info", "warning", "critical"} and title, row


def test_rules_export_points_runbooks_at_the_reference_only_when_told(tmp_path: Path) -> None:
    plain = vtop("rules", "export")
    assert plain.code == 0 and "runbook_url" not in plain.out
    base = "https://wiki.example/vtop/docs/rules.md"
    told = vtop("rules", "export", "--runbook-base", base)
    assert f"runbook_url: {base}#m1" in told.out, told.out[:2000]
    config = tmp_path / "config.toml"
    config.write_text(f'runbook_base = "{base}"\n')
    configured = vtop("rules", "export", env={"VTOP_CONFIG": str(config)})
    assert f"runbook_url: {base}#m1" in configured.out


def test_every_anchor_the_export_names_exists_in_the_rules_reference() -> None:
    reference = (ROOT / "docs" / "rules.md").read_text()
    told = vtop("rules", "export", "--runbook-base", "https://x/rules.md")
    anchors = {line.split("#", 1)[1] for line in told.out.splitlines() if "runbook_url" in line}
    headings = {
        line[4:].strip().lower() for line in reference.splitlines() if line.startswith("### ")
    }
    assert anchors and anchors <= headings, sorted(anchors - headings)
