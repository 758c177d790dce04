"""GPUs of remote replicas through a real Prometheus: dcgm-exporter scraped beside two vLLM
servers (each with its pod as target labels, as Kubernetes service discovery gives them);
`vtop diagnose --prometheus` joins each GPU to the server of its pod, and the GPU rule fires
for the pod whose GPU throttles, not for the other, nor for the exporter (no server)."""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_prometheus_router import engine_text, metrics_handler
from tests.support.dcgm_exporter import HW_SLOWDOWN, Gpu, dcgm_exposition
from tests.support.http_server import serving_handler
from tests.support.prometheus_harness import (
    SCRAPE_INTERVAL_S,
    prometheus_process,
    wait_for_samples,
)
from tests.support.router import EngineMetrics
from vtop.cli import main

WINDOW_S = 35.0
EXPORTER_POD = {"namespace": "gpu-operator", "pod": "dcgm-exporter-x7k2p"}


def scrape_config(servers: dict[str, dict[str, str]], exporter: str) -> str:
    """Each server with its pod's labels; the exporter with its own (so Prometheus, without
    honor_labels, keeps the GPUs' pods as exported_namespace and exported_pod)."""
    entries = "".join(
        f"      - targets: ['{target}']\n"
        f"        labels: {{namespace: {labels['namespace']}, pod: {labels['pod']}}}\n"
        for target, labels in servers.items()
    )
    return (
        "global:\n"
        f"  scrape_interval: {SCRAPE_INTERVAL_S}s\n"
        "scrape_configs:\n"
        "  - job_name: vllm\n"
        "    static_configs:\n"
        f"{entries}"
        "  - job_name: dcgm\n"
        "    static_configs:\n"
        f"      - targets: ['{exporter}']\n"
        f"        labels: {{namespace: {EXPORTER_POD['namespace']}, pod: {EXPORTER_POD['pod']}}}\n"
    )


def test_the_gpu_rule_judges_the_pod_whose_gpu_throttles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gpus = [
        Gpu(0, "llm", "vllm-a-0", 97.0, throttle_reasons=HW_SLOWDOWN),
        Gpu(1, "llm", "vllm-b-0", 96.0),
    ]
    with ExitStack() as stack:
        a = stack.enter_context(serving_handler(metrics_handler(engine_text(EngineMetrics()))))
        b = stack.enter_context(serving_handler(metrics_handler(engine_text(EngineMetrics()))))
        exporter = stack.enter_context(
            serving_handler(metrics_handler(lambda: dcgm_exposition(gpus)))
        )
        names = {url.removeprefix("http://"): url for url in (a, b, exporter)}
        a_name, b_name, exporter_name = names
        pods = {a_name: {"namespace": "llm", "pod": "vllm-a-0"}}
        pods[b_name] = {"namespace": "llm", "pod": "vllm-b-0"}
        config = scrape_config(pods, exporter_name)
        url, _ = stack.enter_context(prometheus_process([], tmp_path / "prometheus", None, config))
        wait_for_samples(url, "DCGM_FI_DEV_GPU_UTIL", 2)
        # the precondition: Prometheus kept the GPUs' pods as exported_pod, its own as pod
        answer = httpx.get(f"{url}/api/v1/query", params={"query": "DCGM_FI_DEV_GPU_UTIL"})
        stored = [item["metric"] for item in answer.json()["data"]["result"]]
        assert {(m["pod"], m.get("exported_pod")) for m in stored} == {
            (EXPORTER_POD["pod"], "vllm-a-0"),
            (EXPORTER_POD["pod"], "vllm-b-0"),
        }, stored
        time.sleep(WINDOW_S + 1)  # G1 holds for 30 s before it is judged
        since = f"{WINDOW_S:.0f}s"
        code = main(["diagnose", "--prometheus", url, "--since", since, "--step", "1s", "--json"])
    report = json.loads(capsys.readouterr().out)
    servers = {s["target"]: s for s in report["servers"]}
    assert sorted(servers) == sorted([a_name, b_name])  # the exporter is no server
    found = {
        target: {f["id"] for f in [*s["findings"], *([s["primary"]] if s["primary"] else [])]}
        for target, s in servers.items()
    }
    assert "G1" in found[a_name], found
    assert "G1" not in found[b_name], found
    assert code == report["exit_code"] == 2  # G1 is critical
