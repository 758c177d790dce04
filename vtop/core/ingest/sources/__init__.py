"""Floor 5, the sources: the only code that does I/O on the world, every read bounded in time and
bytes. vLLM"s `/metrics` and what it says over HTTP (`VllmHttpSource`, server_facts), NVML
(`NvmlSource`), Prometheus"s API (`PrometheusClient`, `PrometheusFeed`) and a managed server"s
log (`LogTail`), the canaries through the front door (`ProbeSource`) and the one reader of an
OpenAI event stream they and `vtop bench` share (openai_stream), dcgm-exporter's GPU fields
read as a server's own (dcgm), and vLLM's per-request OTLP spans with the receiver that takes
them (otlp, otlp_receiver), the requests in flight vtop's middleware in vLLM lists
(in_flight); the fleet judged inside Prometheus (prometheus_judged: the queries a judge
writes, their answers as alerts). Imports config and the leaves; never touches a widget.
"""

__all__ = [
    "bounded_http",
    "dcgm",
    "fast_http",
    "in_flight",
    "nvml",
    "openai_stream",
    "otlp",
    "otlp_receiver",
    "probe",
    "process_log",
    "prometheus",
    "prometheus_judged",
    "server_facts",
    "tls",
    "vllm_http",
]
