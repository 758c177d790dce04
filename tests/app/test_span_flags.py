"""The flags `vtop serve` gives the vLLM it starts: with `--otlp ADDR` its span exporter
pointed at vtop's own receiver, over gRPC or over HTTP with the protocol vLLM's exporter needs
for it, its spans named by the server's address; and vtop's in-flight middleware, copied
beside vLLM, never exposing vtop's own packages."""

from __future__ import annotations

import stat
from pathlib import Path

from vtop.cli.spans import HTTP_PROTOCOL_ENV, RESOURCE_ENV, vllm_tracing
from vtop.core.config.settings import Settings
from vtop.core.manage.in_flight import MIDDLEWARE, in_flight_middleware

SERVER = "127.0.0.1:8000"


def test_vllm_exports_its_spans_to_the_first_receiver() -> None:
    assert vllm_tracing(Settings(), SERVER, {}) == ([], {})
    both = Settings(otlp=("grpc://127.0.0.1:4317", "http://127.0.0.1:4318"))
    grpc = vllm_tracing(both, SERVER, {})
    assert grpc == (
        ["--otlp-traces-endpoint", "127.0.0.1:4317"],
        {RESOURCE_ENV: "vtop.server=127.0.0.1:8000"},
    )
    flags, env = vllm_tracing(Settings(otlp=("http://0.0.0.0:4318",)), SERVER, {})
    assert flags == ["--otlp-traces-endpoint", "http://127.0.0.1:4318/v1/traces"]
    assert env[HTTP_PROTOCOL_ENV] == "http/protobuf"


def test_the_servers_name_follows_the_resource_attributes_already_set() -> None:
    _, env = vllm_tracing(
        Settings(otlp=("grpc://127.0.0.1:4317",)), SERVER, {RESOURCE_ENV: "team=search"}
    )
    assert env[RESOURCE_ENV] == "team=search,vtop.server=127.0.0.1:8000"


def test_the_middleware_is_a_private_copy_first_on_vllms_path(tmp_path: Path) -> None:
    flags, env = in_flight_middleware(tmp_path / "state", {"PYTHONPATH": "/opt/mine"})
    folder = tmp_path / "state" / "python"
    assert flags == ["--middleware", MIDDLEWARE]
    assert env == {"PYTHONPATH": f"{folder}:/opt/mine"}
    copied = folder / "vtop_inflight.py"
    assert stat.S_IMODE(copied.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    source = copied.read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert imports and all(" vtop" not in line for line in imports), imports
