"""Managed processes: own session, state files, pid reuse, stop by group, crash explanations."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vtop.core.config.startup_failures import explain_failure
from vtop.core.ingest.feeds import LiveFeed
from vtop.core.ingest.sources.process_log import LogTail
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.manage.process import port_of, restart, start, stop
from vtop.core.managed_server import (
    ManagedServer,
    is_alive,
    keep_reaped,
    load_states,
    private_directory,
    state_dir,
)

SLEEPER = "import os, sys, time; print('started', os.getpid(), flush=True); time.sleep(600)"
WITH_GRANDCHILD = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
    "print('parent up', flush=True); time.sleep(600)"
)


def wait_until(condition: object, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline
        time.sleep(0.05)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) pids in a process group."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def test_start_writes_state_runs_in_own_group_and_stop_takes_the_whole_group(
    tmp_path: Path,
) -> None:
    state, child = start("t1", [sys.executable, "-c", WITH_GRANDCHILD], tmp_path, {"X": "1"})
    keep_reaped(state, child)
    try:
        wait_until(lambda: "parent up" in Path(state.log_path).read_text())
        assert state.pgid == state.pid != os.getpgid(0)
        wait_until(lambda: len(group_members(state.pgid)) == 2)
        [(loaded, _, problem)] = load_states(tmp_path)
        assert loaded == state and problem == "" and loaded.env == {"X": "1"}
        assert is_alive(state)
        assert "stopped (SIGTERM)" in stop(state, timeout=10)
        assert group_members(state.pgid) == []
        child.wait(timeout=5)
    finally:
        stop(state, timeout=1)


def test_a_reused_pid_is_never_signalled(tmp_path: Path) -> None:
    state, child = start("t2", [sys.executable, "-c", SLEEPER], tmp_path)
    try:
        # a reused pid: another process, with another start time and without the server's token
        impostor = dataclasses.replace(
            state, kernel_start=(state.kernel_start or 0) + 1, token="another-server"
        )
        assert not is_alive(impostor)
        assert "nothing signalled" in stop(impostor)
        assert child.poll() is None  # the real process was left alone
    finally:
        stop(state, timeout=5)
        child.wait(timeout=5)


def test_dead_and_broken_state_files_are_reported(tmp_path: Path) -> None:
    state, child = start("t3", [sys.executable, "-c", "print('bye')"], tmp_path)
    child.wait(timeout=10)
    assert not is_alive(state)
    (tmp_path / "junk.json").write_text("{not json")
    found = {path.stem: (loaded, problem) for loaded, path, problem in load_states(tmp_path)}
    assert found["t3"][0] == state and "unreadable state file" in found["junk"][1]
    done = subprocess.run(
        [sys.executable, "-m", "vtop", "ps"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "VTOP_STATE_DIR": str(tmp_path)},
    )
    assert "exited (stale state file)" in done.stdout and "unreadable state file" in done.stdout


def test_restart_keeps_name_log_and_environment(tmp_path: Path) -> None:
    state, child = start("t4", [sys.executable, "-c", SLEEPER], tmp_path, {"Y": "2"})
    wait_until(lambda: "started" in Path(state.log_path).read_text())
    try:
        again = restart(state, [sys.executable, "-c", SLEEPER, "--port", "9"], tmp_path)
        assert again.pid != state.pid and again.log_path == state.log_path
        assert again.env == {"Y": "2"} and again.port == 9 and not is_alive(state)
        wait_until(lambda: Path(state.log_path).read_text().count("started") == 2)
    finally:
        for each in (state, locals().get("again")):
            if isinstance(each, ManagedServer):
                stop(each, timeout=5)
    child.wait(timeout=5)


async def test_a_crashing_server_is_an_event_with_its_explanation(tmp_path: Path) -> None:
    crash = (
        "import sys; print('ERROR [Errno 98] error while attempting to bind: "
        "address already in use'); sys.exit(1)"
    )
    state, child = start("t5", [sys.executable, "-c", crash, "--port", "1"], tmp_path)
    keep_reaped(state, child)
    child.wait(timeout=10)
    source = VllmHttpSource(state.url, ScrapeOptions(timeout_s=1))
    feed = LiveFeed([source], None, 1.0, LogTail(state), state)
    [frame] = await feed.frames(time.time())
    [exited] = [e for e in frame.events if e.kind == "exited"]
    assert "port is taken" in exited.message and "log line 1" in exited.message
    assert any("address already in use" in line for line in frame.log_lines)
    assert all(e.kind != "exited" for f in await feed.frames(time.time() + 60) for e in f.events)
    await feed.close()


def test_port_and_state_dir_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    assert port_of(["vllm", "serve", "m"]) == 8000
    assert port_of(["vllm", "serve", "m", "--port", "8011"]) == 8011
    assert port_of(["vllm", "serve", "--port=9000"]) == 9000
    assert state_dir({"VTOP_STATE_DIR": "/s"}) == Path("/s")
    assert state_dir({"XDG_STATE_HOME": "/x"}) == Path("/x/vtop/servers")


LOGS = {
    "kv_too_small": "ValueError: To serve at least one request with the models's max seq len "
    "(32768), (4.00 GiB KV cache is needed, which is larger than the available KV cache memory "
    "(2.50 GiB). Based on the available memory, the estimated maximum model length is 20480.",
    "gpu_memory_taken": "ValueError: Free memory on device cuda:0 (30.5/79.1 GiB) on startup is "
    "less than desired GPU memory utilization (0.9, 71.2 GiB).",
    "out_of_memory": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "port_in_use": "OSError: [Errno 98] Address already in use",
    "offload_needs_gpu": "(EngineCore pid=4314) ERROR 12-04 06:10:01 [core.py:1510] RuntimeError: "
    "Worker failed with error 'CPU Offloading is currently only supported on CUDA-alike and XPU "
    "GPUs', please check the stack trace above for the root cause",
    "bad_flag": "vllm serve: error: unrecognized arguments: --max-num-seq 8",
    "bad_value": "ValueError: max_num_batched_tokens (64) must be greater than or equal to "
    "max_num_seqs (128).",
}


@pytest.mark.parametrize("kind", sorted(LOGS))
def test_startup_failures_are_explained_with_the_fix(kind: str) -> None:
    log = f"INFO starting\n{LOGS[kind]}\nINFO shutting down\n"
    failure = explain_failure(log)
    assert failure is not None and failure.kind == kind and failure.line_number == 2


def test_startup_failure_explanations_carry_the_numbers() -> None:
    kv = explain_failure(LOGS["kv_too_small"])
    assert kv is not None and "--max-model-len 20480" in kv.explanation
    memory = explain_failure(LOGS["gpu_memory_taken"])
    assert memory is not None and "0.38" in memory.explanation  # (30.5 - 0.5) / 79.1
    offload = explain_failure(LOGS["offload_needs_gpu"])
    assert offload is not None and "CUDA-alike and XPU GPUs): remove --kv-offloading-size" in (
        offload.explanation
    )
    assert explain_failure("INFO all good\n") is None


def test_the_state_directory_and_the_parents_it_creates_are_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    state = home / ".local" / "state" / "vtop"
    private_directory(state)
    for made in (home / ".local", home / ".local" / "state", state):
        assert made.stat().st_mode & 0o777 == 0o700, made
    assert home.stat().st_mode & 0o777 == 0o755  # what existed is not touched
