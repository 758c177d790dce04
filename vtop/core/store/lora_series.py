"""LoRA adapter demand as numbers: `vllm:lora_requests_info` carries its facts in labels (the
adapters with live requests, comma-joined, and `max_lora`), which PromQL cannot count, so the
store writes them beside it as `lora:adapters_in_demand` and `lora:max_adapters` on the same
server, for the rules to compare.

vLLM keeps one series per adapter set it has seen, each valued at the time it was last set
(`set_to_current_time`), and sets it per engine step from that step's statistics, so one series
names the adapters of one moment: on vLLM 0.32 with three adapters in demand and one slot, the
series `a`, `b`, `c` and `` were each set within two seconds of each other, none naming more
than one. The demand is therefore the union of the sets whose time is within RECENT_S of the
newest (the server's own clock on both sides, so no skew between hosts enters). The running and
waiting labels list the same adapters (`LoRARequestStates.update_scheduler_stats`); both are
read.
"""

from __future__ import annotations

import dataclasses
import math

from vtop.core.frame import Sample, Series, TargetScrape
from vtop.core.histogram import optional_float

LORA_INFO = "lora_requests_info"
"""The family's name after `vllm:` (or Ray's `ray_vllm:` / `ray_vllm_`)."""
LORA_INFO_NAMES = frozenset(
    f"{prefix}{LORA_INFO}" for prefix in ("vllm:", "ray_vllm:", "ray_vllm_")
)
"""Its declared names: looked up, not searched for, on every scrape of every server."""
ADAPTER_LABELS = ("running_lora_adapters", "waiting_lora_adapters")
RECENT_S = 15.0
"""How far behind the newest an adapter set still counts as live demand."""
IN_DEMAND = Series("lora:adapters_in_demand", ())
MAX_ADAPTERS = Series("lora:max_adapters", ())


def with_lora_series(scrape: TargetScrape) -> TargetScrape:
    """The scrape with its LoRA demand written as numbers (itself when it has no LoRA info)."""
    if LORA_INFO_NAMES.isdisjoint(scrape.metric_types):
        return scrape
    infos = [s for s in scrape.samples if s.series.name.endswith(LORA_INFO)]
    if not infos:
        return scrape
    newest = max(infos, key=lambda sample: sample.value)
    adapters = {
        name.strip()
        for info in infos
        if info.value >= newest.value - RECENT_S
        for label in ADAPTER_LABELS
        for name in (info.series.label(label) or "").split(",")
        if name.strip()
    }
    derived = [Sample(IN_DEMAND, float(len(adapters)))]
    slots = optional_float(newest.series.label("max_lora"))
    if slots is not None and math.isfinite(slots) and slots >= 0:
        derived.append(Sample(MAX_ADAPTERS, slots))
    return dataclasses.replace(scrape, samples=(*scrape.samples, *derived))
