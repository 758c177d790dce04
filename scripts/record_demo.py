"""Record the demo shipped in the package: a real vLLM (CPU, tiny random model) in a preemption
storm, the fix vtop suggests applied by a restart, and the recovery under the same load.

Run: VTOP_VLLM_PYTHON=.venv-vllm/bin/python python -m scripts.record_demo [OUTPUT]
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from pathlib import Path

from tests.support.scenarios import warm_up
from tests.support.vllm_harness.server import CACHE, ServerSpec, VllmServer
from vtop.core.frame import Event, EventKind, Frame
from vtop.core.ingest.poller import poll
from vtop.core.ingest.recorder import RecordingWriter
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.manage.bench import Bench, BenchConfig, Lengths
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions, diagnose_frames

DEMO = Path(__file__).resolve().parents[1] / "vtop" / "demo" / "storm.vtoprec"
STORM = ServerSpec(num_gpu_blocks_override=8, block_size=128, max_num_seqs=16)
LOAD_S = 45.0


def storm_load(url: str) -> BenchConfig:
    """24 closed-loop streams of 96 prompt + 300 output tokens for LOAD_S seconds."""
    return BenchConfig(
        url=url,
        concurrency=24,
        num_requests=None,
        duration_s=LOAD_S,
        prompt_tokens=Lengths(96, 96),
        output_tokens=Lengths(300, 300),
        stall_timeout_s=120,
    )


class Recorder:
    """Writes one frame per second with the server log lines that appeared since the last one."""

    def __init__(self, writer: RecordingWriter, server: VllmServer) -> None:
        self.writer = writer
        self.server = server
        self.source = VllmHttpSource(server.url, ScrapeOptions(timeout_s=5))
        self.frames: list[Frame] = []
        self.log_offset = 0

    def new_log_lines(self) -> tuple[str, ...]:
        """Lines appended to the server log since the last call."""
        text = self.server.log_path.read_text(errors="replace")
        fresh, self.log_offset = text[self.log_offset :], len(text)
        return tuple(fresh.splitlines())

    async def tick(self, events: tuple[Event, ...] = ()) -> None:
        """Poll once and write the frame."""
        frame = await poll([self.source], None, time.time())
        frame = dataclasses.replace(frame, log_lines=self.new_log_lines(), events=events)
        self.writer.write(frame)
        self.frames.append(frame)

    async def during(self, seconds: float, load: BenchConfig | None) -> None:
        """Record for `seconds` while `load` (if any) runs."""
        task = asyncio.ensure_future(Bench(load).run()) if load is not None else None
        started = time.time()
        while time.time() - started < seconds or (task is not None and not task.done()):
            tick = time.time()
            await self.tick()
            await asyncio.sleep(max(0.0, 1.0 - (time.time() - tick)))


def suggested_max_num_seqs(recorder: Recorder) -> int:
    """The --max-num-seqs vtop's M1 finding proposes for the recorded storm."""
    options = DiagnoseOptions(vllm_log=recorder.server.log_text())
    diagnosis = diagnose_frames(recorder.source.target, recorder.frames, load_rules(), options)
    assert diagnosis.triage is not None and diagnosis.triage.primary is not None, diagnosis.reason
    primary = diagnosis.triage.primary
    [change] = [c for c in primary.changes if c.flag == "--max-num-seqs"]
    assert isinstance(change.proposed, float), change
    print(f"primary finding {primary.key}: --max-num-seqs {change.proposed:.0f}", file=sys.stderr)
    return int(change.proposed)


async def record(path: Path) -> None:
    """Storm, fix, recovery."""
    server = VllmServer(STORM, CACHE / "logs" / f"demo-{time.time():.0f}.log")
    server.start()
    try:
        await Bench(warm_up(server.url, STORM.max_num_seqs)).run()
        with RecordingWriter(path) as writer:
            recorder = Recorder(writer, server)
            await recorder.during(10, None)
            await recorder.during(LOAD_S, storm_load(server.url))
            await recorder.during(5, None)
            fixed = dataclasses.replace(STORM, max_num_seqs=suggested_max_num_seqs(recorder))
            server = await restart(recorder, server, fixed)
            await recorder.during(5, None)
            await recorder.during(LOAD_S, storm_load(server.url))
            await recorder.during(10, None)
    finally:
        server.stop()


async def restart(recorder: Recorder, old: VllmServer, spec: ServerSpec) -> VllmServer:
    """Restart on the same port with the new spec; frames are not written while it warms up."""
    note = f"--max-num-seqs {old.spec.max_num_seqs} -> {spec.max_num_seqs} (suggested by M1)"
    await recorder.tick((Event(time.time(), EventKind.APPLIED, recorder.source.target, note),))
    old.stop()
    new = VllmServer(spec, old.log_path.with_suffix(".fixed.log"))
    new.port = old.port
    await asyncio.to_thread(new.start)
    await Bench(warm_up(new.url, spec.max_num_seqs)).run()
    recorder.server, recorder.log_offset = new, 0
    return new


def main() -> None:
    """Record to the path given, or over the shipped demo."""
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEMO
    path.parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(record(path))
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)", file=sys.stderr)


if __name__ == "__main__":
    main()
