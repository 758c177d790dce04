"""GPUs of remote replicas from dcgm-exporter, joined by pod to the vLLM servers that use them,
read as vtop's `nvml:*` series: the GPU rules judge the right pod, the GPU panel shows them."""

from __future__ import annotations

from tests.support.dcgm_exporter import HW_SLOWDOWN, Gpu, dcgm_exposition
from tests.support.router import EngineMetrics
from vtop.core.frame import Frame
from vtop.core.ingest.exposition import reference_samples
from vtop.core.ingest.sources.prometheus import Point, names_of, scrapes_from
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions, diagnose_fleet
from vtop.core.session.remote_gpus import own_gpus
from vtop.core.session.session import Session

SERVERS = {"10.1.0.5:8000": ("llm", "vllm-a-0"), "10.1.0.6:8000": ("llm", "vllm-b-0")}
EXPORTER = "10.1.0.9:9400"
GPUS = [
    Gpu(0, "llm", "vllm-a-0", 97.0, throttle_reasons=HW_SLOWDOWN),
    Gpu(1, "llm", "vllm-b-0", 96.0),
    Gpu(2, "training", "trainer-0", 99.0, throttle_reasons=HW_SLOWDOWN),
]
"""A throttled GPU in pod a, a healthy one in pod b, and one of another workload."""


def answered(text: str, instance: str, job: str, extra: dict[str, str]) -> list[Point]:
    """An exposition as Prometheus answers a query for it: target labels added."""
    return [
        Point(
            {
                **dict(s.series.labels),
                **extra,
                "__name__": s.series.name,
                "instance": instance,
                "job": job,
            },
            0.0,
            s.value,
        )
        for s in reference_samples(text)
    ]


def fleet_points(engines: dict[str, EngineMetrics], gpus: list[Gpu]) -> list[Point]:
    points: list[Point] = []
    for instance, engine in engines.items():
        namespace, pod = SERVERS[instance]
        engine.served(2, 2.0, running=4)
        labels = {"namespace": namespace, "pod": pod}
        points += answered(engine.text(), instance, "vllm", labels)
    # scraped without honor_labels: the exporter's own pod is `pod`, the GPU's `exported_pod`
    exporter = {"namespace": "gpu-operator", "pod": "dcgm-exporter-x7k2p"}
    for point in answered(dcgm_exposition(gpus), EXPORTER, "dcgm", {}):
        labels = dict(point.labels)
        labels["exported_namespace"], labels["exported_pod"] = labels["namespace"], labels["pod"]
        points.append(Point({**labels, **exporter}, 0.0, point.value))
    return points


def frames(seconds: int = 40) -> list[Frame]:
    engines = {instance: EngineMetrics() for instance in SERVERS}
    names = names_of({("vllm", instance) for instance in SERVERS})
    return [
        Frame(1000.0 + tick, scrapes_from(fleet_points(engines, GPUS), names, {}))
        for tick in range(seconds)
    ]


def test_each_server_gets_the_gpus_of_its_own_pod_in_nvml_units() -> None:
    [frame] = frames(1)
    scrapes = {scrape.target: scrape for scrape in frame.scrapes}
    assert sorted(scrapes) == sorted(SERVERS)  # the exporter is no server
    gpus = {
        target: {
            (
                s.series.name,
                dict(s.series.labels).get("gpu"),
                dict(s.series.labels).get("reason"),
            ): s.value
            for s in scrape.samples
            if s.series.name.startswith("nvml:")
        }
        for target, scrape in scrapes.items()
    }
    a, b = gpus["10.1.0.5:8000"], gpus["10.1.0.6:8000"]
    assert {gpu for _, gpu, _ in a} == {"0"} and {gpu for _, gpu, _ in b} == {"1"}
    assert a[("nvml:utilization_percent", "0", None)] == 97.0
    assert a[("nvml:memory_used_bytes", "0", None)] == 70_000 * 1024 * 1024
    assert a[("nvml:memory_total_bytes", "0", None)] == 80_000 * 1024 * 1024
    assert a[("nvml:throttle", "0", "hw_slowdown")] == 1.0
    assert b[("nvml:throttle", "1", "hw_slowdown")] == 0.0


def test_the_gpu_rules_judge_the_pod_whose_gpu_throttles() -> None:
    fleet = diagnose_fleet(frames(), load_rules(), DiagnoseOptions(30.0, read_gpus=False))
    found = {
        d.target: {f.rule.id for f in d.triage.findings} if d.triage else set()
        for d in fleet.servers
    }
    assert "G1" in found["10.1.0.5:8000"], found
    assert "G1" not in found["10.1.0.6:8000"], found


def test_the_gpu_panel_shows_the_focused_server_s_own_gpus() -> None:
    session = Session(load_rules(), DiagnoseOptions(15.0, read_gpus=False))
    recorded = frames(3)
    for frame in recorded:
        session.ingest(frame)
    snapshot = own_gpus(session.store, "10.1.0.5:8000", recorded[-1].timestamp)
    assert snapshot is not None
    [gpu] = snapshot.gpus
    assert gpu.index == 0 and gpu.utilization_pct == 97.0
    assert gpu.throttle_reasons == ("hardware slowdown",)
    assert gpu.memory_total_bytes == 80_000 * 1024 * 1024
    assert own_gpus(session.store, "nowhere:1", recorded[-1].timestamp) is None
