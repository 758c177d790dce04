"""The same frames read alike wherever they are shown: `vtop diagnose`, the dashboard's `d`,
`--plain` lines and an incident bundle all go through one `diagnosis(session, target)`, so they
give the same verdict, primary finding and values (here on the real storm of the demo)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from tests.support.app import wait_for
from tests.support.demo import STORM, app_on, loaded
from tests.support.vtop_cli import vtop
from vtop.core.ingest.recorder import RecordingWriter
from vtop.ui.screens.text_screen import TextScreen


def storm_recording(tmp_path: Path) -> Path:
    """The demo's storm part as a recording of its own."""
    path = tmp_path / "storm.vtoprec"
    with RecordingWriter(path) as writer:
        for frame in STORM:
            writer.write(frame)
    return path


async def test_diagnose_the_dashboards_d_plain_and_a_bundle_agree(tmp_path: Path) -> None:
    recording = storm_recording(tmp_path)
    judged = vtop("diagnose", str(recording), "--json", "--no-predict")
    report = json.loads(judged.out)
    primary = report["primary"]
    assert (report["verdict"], primary["id"], judged.code) == ("critical", "M1", 2), judged.text
    proposed = {c["flag"]: c["proposed"] for c in primary["changes"]}

    text = vtop("diagnose", str(recording), "--no-predict").out
    app = app_on(STORM)
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, TextScreen))
        assert isinstance(app.screen, TextScreen)
        shown = str(app.screen.body)
    # the dashboard's d is vtop diagnose, word for word (the command folds it to 80 columns)
    assert shown.split() == text.split()

    plain = vtop("replay", str(recording), "--plain").out.splitlines()
    assert f"| CRITICAL {primary['id']}" in plain[-1], plain[-1]
    assert plain[-1].endswith(f"{primary['title']}: --max-num-seqs {proposed['--max-num-seqs']:g}")

    bundled = vtop("bundle", str(recording), "-o", str(tmp_path / "b.tar.gz"))
    assert bundled.code == 0, bundled.text
    with tarfile.open(tmp_path / "b.tar.gz") as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("findings.json"))
        extracted = archive.extractfile(member)
        assert extracted is not None
        findings = json.loads(extracted.read())
    assert findings["verdict"] == report["verdict"]
    assert findings["primary"]["id"] == primary["id"]
    assert findings["primary"]["evidence"] == primary["evidence"]
    assert {c["flag"]: c["proposed"] for c in findings["primary"]["changes"]} == proposed
