"""Floor 3, store: per-series rings of a bounded size written by frames, point and window queries
(rates across counter resets, histogram quantiles from bucket deltas), and the headline summary
of a target. Imports the leaves only.

Offers `Store` (store: the rings, their one writer and the window queries, composed), the rings
and their reads of one tick (`Rings`, rings), their writer (`RingWriter`, ingest) and what it
keeps per target (target_record), `TargetSummary` and `summarize` (summary); LoRA demand as the
`lora:*` numbers rules compare (lora_series).
"""

__all__ = [
    "gpu_series",
    "ingest",
    "lora_series",
    "presence",
    "probe_series",
    "rings",
    "store",
    "summary",
    "target_record",
]
