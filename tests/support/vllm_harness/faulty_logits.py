"""A custom logits processor for vLLM (loaded with `--logits-processors
faulty_logits:FaultWhenAsked`, this file's folder on PYTHONPATH) that misbehaves on request:
a request whose `vllm_xargs` hold {"vtop_fault": "spin"} makes the next step spin forever in
`spin_until_killed`; {"vtop_fault": "raise"} makes it raise `InjectedFaultError` in
`raise_on_request`. Every other request is untouched. Runs inside vLLM's worker process, never
imported by the tests themselves."""

from __future__ import annotations

from typing import Any

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor


class InjectedFaultError(RuntimeError):
    """The failure a "raise" request asks for."""


def spin_until_killed() -> None:
    """Busy forever in pure Python (holds the GIL, never returns)."""
    turns = 0
    while True:
        turns += 1


def raise_on_request() -> None:
    raise InjectedFaultError("vtop test fault: a logits processor raised on request")


class FaultWhenAsked(LogitsProcessor):  # type: ignore[misc]  # vLLM is not in this venv
    """Spins or raises in `apply` once a request asking for it is in the batch."""

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.asked: str | None = None

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for _, params, _, _ in batch_update.added:
            fault = (params.extra_args or {}).get("vtop_fault") if params is not None else None
            if fault in ("spin", "raise"):
                self.asked = str(fault)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if self.asked == "spin":
            spin_until_killed()
        if self.asked == "raise":
            raise_on_request()
        return logits
