"""Floor 2, catalogue: vLLM's metric surface as data (every family from 0.6 to today, its type,
unit, labels, version and renames) and the names on the wire read through it (old names as
the current family, Ray's names, a sample's type when none was declared). Imports the leaves
only.

Offers `FAMILIES`, `GROUPS` and `MetricInfo` (families); `BY_NAME`, `canonical_name`, `Normalizer`,
`sample_type`, `family_of`, `is_vllm` and `ALERTS` (names).
"""

from vtop.core.catalog.families import FAMILIES, GROUPS, MetricInfo
from vtop.core.catalog.names import (
    ALERTS,
    ALERTS_FOR_STATE,
    BY_NAME,
    Normalizer,
    canonical_name,
    family_of,
    is_vllm,
    sample_type,
)

__all__ = [
    "ALERTS",
    "ALERTS_FOR_STATE",
    "BY_NAME",
    "FAMILIES",
    "GROUPS",
    "MetricInfo",
    "Normalizer",
    "canonical_name",
    "family_of",
    "is_vllm",
    "sample_type",
]
