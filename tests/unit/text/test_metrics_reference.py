"""The metrics reference: one row per catalogued family, its fate, and the rules reading it."""

from __future__ import annotations

from vtop.core.catalog import FAMILIES
from vtop.core.rules.loader import load_rules
from vtop.text.metrics_reference import metrics_reference


def test_every_family_has_a_row_with_its_fate_and_its_readers() -> None:
    page = metrics_reference(load_rules())
    rows = {
        line.split(" | ")[0].strip("| `"): line for line in page.splitlines() if "`vllm:" in line
    }
    assert set(rows) >= {info.name for info in FAMILIES}
    old = rows["vllm:gpu_cache_usage_perc"]
    assert "removed 0.12" in old and "read as `vllm:kv_cache_usage_perc`" in old
    assert "[M1](rules.md#m1)" in rows["vllm:num_preemptions_total"]
    assert rows["vllm:num_requests_swapped"].endswith(" |  |")  # no rule reads it
