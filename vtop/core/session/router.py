"""A router in front of the fleet: recognised by its own series, kept out of the servers, and
read as its view of each backend.

vLLM's production-stack router exports `vllm:`-prefixed series too (running, waiting, QPS,
latency, errors), one per backend under a `server` label (the backend's URL). Taken for a
server it would be judged as one (a queue with no limiter, an engine with no steps) and
counted among the replicas. Its figures are the other side of each backend's: the latency a
request meets at the router against the engine's own says whether time goes in the engine or
on the path between them (network, a proxy, the router's own queue).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from vtop.core.frame import Labels
from vtop.core.store.store import INSTANCE, Store

ROUTER_ONLY = (
    "vllm:current_qps",
    "vllm:num_incoming_requests_total",
    "vllm:routing_decisions_total",
    "vllm:healthy_pods_total",
    "vllm:avg_latency",
    "vllm:avg_itl",
    "vllm:request_errors_total",
    "vllm:request_latency_seconds_count",
)
"""Series only the production-stack router exports (no vLLM engine has them)."""
BACKEND = "server"
"""The label naming the backend (its URL) on the router's series."""
ROUTER_LATENCY = "vllm:request_latency_seconds"
ENGINE_LATENCY = "vllm:e2e_request_latency_seconds"
PATH_SHARE = 2.0
"""The router's p99 this many times the engine's own (and a second more) is time spent on the
path between them, not in the engine."""
PATH_MARGIN_S = 1.0


def is_router(store: Store, target: str) -> bool:
    """True when the target exposes series only a router exports."""
    return any(store.select(name, {INSTANCE: target}) for name in ROUTER_ONLY)


@dataclass(frozen=True)
class BackendView:
    """One backend as the router sees it, beside its engine's own figure where vtop reads it."""

    backend: str
    """The backend's URL as the router names it."""
    target: str | None
    """The server vtop reads for it (None: not among the servers read)."""
    qps: float | None
    running: float | None
    waiting: float | None
    errors_per_s: float | None
    router_p99_s: float | None
    """Request latency at the router, p99 over the window."""
    engine_p99_s: float | None
    """The engine's own end-to-end latency, p99 over the window."""

    @property
    def slow_on_the_path(self) -> bool:
        """Slow at the router while its engine is not: the time goes between them."""
        if self.router_p99_s is None or self.engine_p99_s is None:
            return False
        return (
            self.router_p99_s >= PATH_SHARE * self.engine_p99_s
            and self.router_p99_s >= self.engine_p99_s + PATH_MARGIN_S
        )


@dataclass(frozen=True)
class RouterView:
    """A router's view of every backend it routes to."""

    target: str
    backends: list[BackendView]


def router_view(
    store: Store, target: str, servers: Iterable[str], now: float, window: float
) -> RouterView:
    """The router's figures per backend over the window ending at `now`, each joined to the
    server vtop reads at the same host and port."""
    where, by = {INSTANCE: target}, (BACKEND,)
    latest = {
        name: _by_backend(store.latest_by(name, now, where, by))
        for name in ("vllm:current_qps", "vllm:num_requests_running", "vllm:num_requests_waiting")
    }
    errors = _by_backend(
        store.sum_by(store.rate, "vllm:request_errors_total", now, window, where, by)
    )
    p99 = _by_backend(store.histogram_quantile(0.99, ROUTER_LATENCY, now, window, where, by))
    backends = sorted(set().union(*latest.values(), errors, p99))
    known = list(servers)
    views = []
    for backend in backends:
        server = _server_of(backend, known)
        engine_p99 = None
        if server is not None:
            engine = store.histogram_quantile(0.99, ENGINE_LATENCY, now, window, {INSTANCE: server})
            engine_p99 = engine.get((), None)
        views.append(
            BackendView(
                backend,
                server,
                latest["vllm:current_qps"].get(backend),
                latest["vllm:num_requests_running"].get(backend),
                latest["vllm:num_requests_waiting"].get(backend),
                errors.get(backend),
                p99.get(backend),
                engine_p99,
            )
        )
    return RouterView(target, views)


def _by_backend(values: Mapping[Labels, float | None]) -> dict[str, float]:
    """Grouped values by the backend URL (groups without one, or without a value, left out)."""
    found: dict[str, float] = {}
    for labels, value in values.items():
        backend = dict(labels).get(BACKEND)
        if backend and value is not None:
            found[backend] = value
    return found


def _server_of(backend: str, servers: list[str]) -> str | None:
    """The server vtop reads at the backend's host and port: a target named by its URL, by
    `host:port` (Prometheus's instance) or `job/host:port` (two jobs sharing an instance)."""
    wanted = _host_port(backend)
    if wanted is None:
        return None
    return next(
        (s for s in servers if _host_port(s.rpartition("/")[2] if "//" not in s else s) == wanted),
        None,
    )


def _host_port(address: str) -> str | None:
    """`host:port` of a URL or of a bare `host:port` (the scheme's port when none is given)."""
    parts = urlsplit(address if "//" in address else f"//{address}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return None if parts.hostname is None else f"{parts.hostname}:{port}"
