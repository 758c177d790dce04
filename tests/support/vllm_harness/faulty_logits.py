"""A custom logits processor for vLLM (loaded with `--logits-processors
faulty_logits:FaultWhenAsked`, this file's folder on PYTHONPATH) that misbehaves on request:
a request whose `vllm_xargs` hold {"vtop_fault": "spin", "vtop_release": PATH} makes the next
step spin in `spin_until_released` until the file PATH exists; {"vtop_fault": "raise"} makes it
raise `InjectedFaultError` in `raise_on_request`. Every other request is untouched. Runs inside
vLLM's worker process, never imported by the tests themselves."""

from __future__ import annotations

import os
from typing import Any

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor


class InjectedFaultError(RuntimeError):
    """The failure a "raise" request asks for."""


def spin_until_released(release: str) -> None:
    """Busy in pure Python (holding the GIL) until the file `release` exists."""
    turns = 0
    while not os.path.exists(release):
        for _ in range(1_000_000):
            turns += 1


def raise_on_request() -> None:
    raise InjectedFaultError("vtop test fault: a logits processor raised on request")


class FaultWhenAsked(LogitsProcessor):  # type: ignore[misc]  # vLLM is not in this venv
    """Spins or raises in `apply` once a request asking for it is in the batch."""

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.asked: str | None = None
        self.release = ""

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for _, params, _, _ in batch_update.added:
            asked = (params.extra_args or {}) if params is not None else {}
            if asked.get("vtop_fault") in ("spin", "raise"):
                self.asked = str(asked["vtop_fault"])
                self.release = str(asked.get("vtop_release", ""))

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if self.asked == "spin":
            self.asked = None
            spin_until_released(self.release)
        if self.asked == "raise":
            raise_on_request()
        return logits
