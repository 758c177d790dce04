"""The managed process misbehaving: vtop finds and stops what it started, never another."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.support import fake_server
from tests.support.fake_server import Handler
from tests.support.vllm_harness.server import free_port
from tests.support.vtop_cli import Ran, vtop
from vtop.core.managed_server import kernel_start_time

FAKE = Path(fake_server.__file__)


def serve_fake(
    tmp_path: Path, name: str, mode: str, *extra: str, timeout: str = "20"
) -> tuple[Ran, int]:
    """`vtop serve --no-dashboard` of the fake server; its port."""
    port = free_port()
    ran = vtop(
        "serve",
        "--no-dashboard",
        "--name",
        name,
        "--ready-timeout",
        timeout,
        "--command",
        f"{sys.executable} {FAKE}",
        "--",
        "--port",
        str(port),
        "--mode",
        mode,
        *extra,
        env={"VTOP_STATE_DIR": str(tmp_path)},
    )
    return ran, port


def port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_for(condition: object, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("mode", ["setsid-child", "parent-exits"])
def test_vtop_stop_stops_an_engine_that_left_the_session_or_its_parent(
    tmp_path: Path, mode: str
) -> None:
    ran, port = serve_fake(tmp_path, "fake", mode, timeout="5")
    try:
        assert wait_for(lambda: port_taken(port)), ran.text
        stopped = vtop("stop", "fake", env={"VTOP_STATE_DIR": str(tmp_path)})
        assert stopped.code == 0 and "stopped" in stopped.out, stopped.text
        assert wait_for(lambda: not port_taken(port), 10), "the engine still holds the port"
    finally:
        vtop("stop", "fake", env={"VTOP_STATE_DIR": str(tmp_path)})


def test_serve_is_not_ready_when_another_process_answers_on_its_port(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "vtop", "serve", "--no-dashboard", "--name", "slow"]
    command += ["--ready-timeout", "8", "--command", f"{sys.executable} {FAKE}", "--"]
    command += ["--port", str(port), "--mode", "never-listens"]
    env = {**os.environ, "VTOP_STATE_DIR": str(tmp_path)}
    serving = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        started = wait_for(lambda: (tmp_path / "slow.json").exists(), 20)
        assert started, "vtop never started its server"  # it checked the port was free first
        impostor = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        try:
            import threading

            threading.Thread(target=impostor.serve_forever, daemon=True).start()
            assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
            _, err = serving.communicate(timeout=30)
        finally:
            impostor.shutdown()
            impostor.server_close()
        assert serving.returncode == 1, err
        assert "ready" not in err.split("answered")[0].split(":")[-1], err
        assert f"port {port} is answered by pid {os.getpid()}" in err, err
    finally:
        vtop("stop", "slow", env={"VTOP_STATE_DIR": str(tmp_path)})


def test_serve_refuses_a_port_that_is_already_taken(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ran = vtop(
            "serve",
            "--no-dashboard",
            "--command",
            f"{sys.executable} {FAKE}",
            "--",
            "--port",
            str(port),
            env={"VTOP_STATE_DIR": str(tmp_path)},
        )
    assert ran.code == 64 and f"port {port} is already in use" in ran.err, ran.text


def test_a_state_file_without_the_kernel_start_time_is_never_trusted(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state = {
            "name": "old",
            "pid": sleeper.pid,
            "pgid": sleeper.pid,
            "argv": ["x"],
            "port": 1,
            "log_path": str(tmp_path / "old.log"),
            "started_at": 0,
            "kernel_start": None,
        }
        (tmp_path / "old.json").write_text(json.dumps(state))
        ran = vtop("stop", "old", env={"VTOP_STATE_DIR": str(tmp_path)})
        assert "nothing signalled" in ran.out, ran.text
        time.sleep(0.5)
        assert sleeper.poll() is None and kernel_start_time(sleeper.pid) is not None
    finally:
        sleeper.kill()
        sleeper.wait()


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_state_is_private_and_secrets_never_leave(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    ran, port = serve_fake(
        state_dir,
        "keyed",
        "normal",
        "--api-key",
        "sk-topsecret-4711",
    )
    try:
        assert ran.code == 0, ran.text
        assert mode_of(state_dir) == 0o700
        for name in ("keyed.json", "keyed.log"):
            assert mode_of(state_dir / name) == 0o600, name
        state = json.loads((state_dir / "keyed.json").read_text())
        [pid] = [state["pid"]]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert b"sk-topsecret-4711" not in cmdline  # not in `ps`
        assert b"VLLM_API_KEY=sk-topsecret-4711" in environ  # given through the environment
        ran = vtop(
            "diagnose",
            f"http://127.0.0.1:{port}",
            "--window",
            "1",
            "--json",
            "--no-gpu",
            "--vllm-log",
            state["log_path"],
            "--vllm-args",
            "--api-key sk-topsecret-4711",
        )
        written = [p.read_bytes() for p in state_dir.rglob("*") if p.is_file()]
        assert all(b"sk-topsecret-4711" not in content for content in written)
        assert "sk-topsecret-4711" not in ran.text
    finally:
        vtop("stop", "keyed", env={"VTOP_STATE_DIR": str(state_dir)})
