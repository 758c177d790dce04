"""Real processes read by the real py-spy: a listener on a loopback port with a child titled as
vLLM titles its engine core, found by URL, and what the child does: spinning in a function of
its own file, waiting for work, stopped by SIGSTOP. (The real vLLM's are in tests/e2e.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.vllm_harness.server import free_port
from vtop.core.forensics.classify import Activity
from vtop.core.forensics.look import look_at
from vtop.core.forensics.processes import NotVisible, Role

SERVER = textwrap.dedent(
    """
    import http.server, subprocess, sys
    child = subprocess.Popen([sys.executable, sys.argv[2], "VLLM::EngineCore_DP0"])
    address = ("127.0.0.1", int(sys.argv[1]))
    http.server.HTTPServer(address, http.server.BaseHTTPRequestHandler).serve_forever()
    """
)
BLOCKED_CHILD = textwrap.dedent(
    """
    import time
    def wait_in_my_plugin():
        time.sleep(3600)

    wait_in_my_plugin()
    """
)
SPINNING_CHILD = textwrap.dedent(
    """
    def spin_in_my_plugin():
        turns = 0
        while True:
            turns += 1

    spin_in_my_plugin()
    """
)
IDLE_CHILD = textwrap.dedent(
    """
    import queue
    queue.Queue().get()
    """
)


def serving(tmp_path: Path, child: str, child_file: str) -> Iterator[str]:
    """A listener whose child runs `child` from `child_file` (a path under tmp_path: under a
    `vllm/` folder it reads as vLLM's own code)."""
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / child_file).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / child_file).write_text(child)
    port = free_port()
    argv = [sys.executable, str(tmp_path / "server.py"), str(port), str(tmp_path / child_file)]
    process = subprocess.Popen(argv, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while not isinstance(found := look_at_processes(url), list) or len(found) < 2:
            assert time.monotonic() < deadline, f"the test server never listened: {found}"
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def look_at_processes(url: str) -> list[int] | str:
    from vtop.core.forensics.processes import processes_of_url

    found = processes_of_url(url)
    return found.reason if isinstance(found, NotVisible) else [p.pid for p in found.processes]


@pytest.fixture
def spinning(tmp_path: Path) -> Iterator[str]:
    yield from serving(tmp_path, SPINNING_CHILD, "child_plugin.py")


@pytest.fixture
def idle(tmp_path: Path) -> Iterator[str]:
    yield from serving(tmp_path, IDLE_CHILD, "vllm/v1/engine/core.py")


def test_a_spinning_engine_core_is_named_by_its_function_and_a_stopped_one_is_stopped(
    spinning: str,
) -> None:
    found = look_at(spinning)
    assert not isinstance(found, NotVisible), found.reason
    roles = sorted(str(a.process.role) for a in found.processes)
    assert roles == [Role.API_SERVER, Role.ENGINE_CORE], roles
    assert found.activity is Activity.SPINNING and found.stuck, found
    assert found.speaker is not None and found.speaker.where is not None
    assert found.speaker.where.function == "spin_in_my_plugin"
    assert "child_plugin.py" in found.owner
    os.kill(found.speaker.process.pid, signal.SIGSTOP)
    try:
        stopped = look_at(spinning)
        assert not isinstance(stopped, NotVisible) and stopped.activity is Activity.STOPPED
    finally:
        os.kill(found.speaker.process.pid, signal.SIGCONT)


def test_vllm_code_waiting_on_its_queue_is_idle_not_stuck(idle: str) -> None:
    found = look_at(idle)
    assert not isinstance(found, NotVisible), found.reason
    assert found.activity is Activity.WAITING_FOR_WORK and not found.stuck, found


@pytest.fixture
def blocked(tmp_path: Path) -> Iterator[str]:
    yield from serving(tmp_path, BLOCKED_CHILD, "child_plugin.py")


def test_custom_code_waiting_is_blocked_where_it_waits(blocked: str) -> None:
    found = look_at(blocked)
    assert not isinstance(found, NotVisible), found.reason
    assert found.activity is Activity.BLOCKED and found.stuck, found
    assert found.speaker is not None and found.speaker.where is not None
    assert found.speaker.where.function == "wait_in_my_plugin"


def test_a_port_nobody_listens_on_is_said_so() -> None:
    found = look_at(f"http://127.0.0.1:{free_port()}")
    assert isinstance(found, NotVisible) and "nothing listens" in found.reason
    elsewhere = look_at("http://192.0.2.1:8000")
    assert isinstance(elsewhere, NotVisible) and "another host" in elsewhere.reason
