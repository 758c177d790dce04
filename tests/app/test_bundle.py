"""Incident bundles from a recording and from the dashboard; replay and diagnose open them."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.support.app import replay_app, wait_for
from tests.support.demo import FRAMES
from tests.support.storm import storm
from vtop.cli.frames import read_frames
from vtop.core.config.settings import Settings
from vtop.core.ingest.bundle import is_bundle
from vtop.core.ingest.recorder import RecordingWriter
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions, diagnose_frames
from vtop.text.report import json_report


def vtop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args], capture_output=True, text=True, timeout=120
    )


def test_bundle_from_a_recording_holds_everything_and_opens(tmp_path: Path) -> None:
    recording = tmp_path / "storm.vtoprec"
    with RecordingWriter(recording) as writer:
        for frame in FRAMES:
            writer.write(frame)
    bundle = tmp_path / "incident.tar.gz"
    done = vtop("bundle", str(recording), "-o", str(bundle), "--minutes", "2")
    assert done.returncode == 0, done.stderr
    assert is_bundle(bundle) and not is_bundle(recording)
    with tarfile.open(bundle) as tar:
        names = set(tar.getnames())
        findings = json.loads(tar.extractfile("findings.json").read())  # type: ignore[union-attr]
        log = tar.extractfile("server.log").read().decode()  # type: ignore[union-attr]
        versions = json.loads(tar.extractfile("versions.json").read())  # type: ignore[union-attr]
    assert {"recording.vtoprec", "README.txt", "gpus.json", "argv.txt"} - names == {"argv.txt"}
    assert "non-default args" in log and versions["vllm"] == "0.32.0"
    kept = read_frames(bundle)
    assert kept is not None and kept[-1].timestamp == FRAMES[-1].timestamp
    assert kept[-1].timestamp - kept[0].timestamp <= 120
    target = kept[0].scrapes[0].target
    direct = json_report(diagnose_frames(target, kept, load_rules(), DiagnoseOptions()))
    assert findings["primary"] == direct["primary"] and findings["primary"] is not None
    diagnosed = vtop("diagnose", str(bundle), "--json")
    assert json.loads(diagnosed.stdout)["primary"]["id"] == direct["primary"]["id"]


def test_bundle_of_a_broken_recording_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.vtoprec"
    broken.write_bytes(b"VTOPREC\x00garbage")
    done = vtop("bundle", str(broken), "-o", str(tmp_path / "x.tar.gz"))
    assert done.returncode == 3 and "vtop: error:" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x.tar.gz").exists()


async def test_dashboard_b_key_writes_a_bundle(tmp_path: Path) -> None:
    app = replay_app([storm(t) for t in range(20)], Settings(bundle_dir=str(tmp_path)))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.target is not None and app.target.triage is not None)
        await pilot.press("b")
        await wait_for(pilot, lambda: any(tmp_path.glob("vtop-bundle-*.tar.gz")))
        await pilot.pause(0.5)
    [bundle] = tmp_path.glob("vtop-bundle-*.tar.gz")
    frames = read_frames(bundle)
    assert frames is not None and len(frames) == 20
    with tarfile.open(bundle) as tar:
        findings = json.loads(tar.extractfile("findings.json").read())  # type: ignore[union-attr]
    assert findings["primary"]["id"] == "M1"
