"""Expositions of a production-stack router and of the engines behind it, written by
prometheus_client from the router's own metric definitions (names, types, labels, buckets as in
vllm-project/production-stack's src/vllm_router/services/metrics_service): no router runs
here, its exposition is what the library writes for those definitions."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

ROUTER_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


@dataclass
class RouterMetrics:
    """The router's series, one set per backend (`server` label)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r, by_server = self.registry, ["server"]
        self.running = Gauge("vllm:num_requests_running", "running", by_server, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "waiting", by_server, registry=r)
        self.qps = Gauge("vllm:current_qps", "Current Queries Per Second", by_server, registry=r)
        self.healthy = Gauge("vllm:healthy_pods_total", "healthy pods", by_server, registry=r)
        self.avg_latency = Gauge("vllm:avg_latency", "avg latency", by_server, registry=r)
        self.incoming = Counter(
            "vllm:num_incoming_requests", "incoming requests", ["model"], registry=r
        )
        self.errors = Counter(
            "vllm:request_errors_total", "errors", ["server", "model", "error_type"], registry=r
        )
        self.latency = Histogram(
            "vllm:request_latency_seconds",
            "End-to-end request latency observed at the router",
            ["server", "model", "status"],
            buckets=ROUTER_LATENCY_BUCKETS,
            registry=r,
        )

    def served(self, backend: str, requests: int, latency_s: float, running: float) -> None:
        """`requests` answered by `backend` in `latency_s` each, as the router saw them."""
        for _ in range(requests):
            self.latency.labels(backend, "medium", "200").observe(latency_s)
        self.incoming.labels("medium").inc(requests)
        self.qps.labels(backend).set(requests)
        self.running.labels(backend).set(running)
        self.waiting.labels(backend).set(0)
        self.healthy.labels(backend).set(1)
        self.avg_latency.labels(backend).set(latency_s)
        self.errors.labels(backend, "medium", "timeout").inc(0)

    def text(self) -> str:
        return generate_latest(self.registry).decode()


@dataclass
class EngineMetrics:
    """The few series of a vLLM engine the router's view is set beside."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r, labels = self.registry, ["model_name", "engine"]
        self.running = Gauge("vllm:num_requests_running", "running", labels, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "waiting", labels, registry=r)
        self.generated = Counter("vllm:generation_tokens", "tokens", labels, registry=r)
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds",
            "e2e",
            labels,
            buckets=(
                0.3,
                0.5,
                0.8,
                1.0,
                1.5,
                2.0,
                2.5,
                5.0,
                10.0,
                15.0,
                20.0,
                30.0,
                40.0,
                50.0,
                60.0,
            ),
            registry=r,
        )

    def served(self, requests: int, latency_s: float, running: float) -> None:
        for _ in range(requests):
            self.e2e.labels("medium", "0").observe(latency_s)
        self.generated.labels("medium", "0").inc(requests * 64)
        self.running.labels("medium", "0").set(running)
        self.waiting.labels("medium", "0").set(0)

    def text(self) -> str:
        return generate_latest(self.registry).decode()
