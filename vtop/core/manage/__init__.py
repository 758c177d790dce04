"""Floor 7, manage: the vLLM process vtop starts and signals (by pid, never by name), the load
generator, the one apply -> verify -> roll back and its audit log. Imports session, whatif and
everything below.

Offers `start`, `stop`, `restart` (process), `apply_and_verify` and `switch` (apply), `Bench`
(bench), `measure` and the verdict (verdict), `audit` (audit), the argv edits (flag_edits),
the in-flight middleware vtop loads into vLLM (`vtop_inflight`, standard library only) and
the flags that load it (in_flight).
"""

__all__ = [
    "apply",
    "audit",
    "bench",
    "bench_report",
    "flag_edits",
    "in_flight",
    "process",
    "verdict",
    "vtop_inflight",
]
