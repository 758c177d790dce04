"""Names on the wire: old names read as the current family, Ray's names, the type of a sample."""

from __future__ import annotations

from collections.abc import Mapping

from vtop.core.catalog.families import FAMILIES, MetricInfo
from vtop.core.frame import Series

FAMILY_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_gcount", "_gsum", "_info")
"""The suffixes of a family's samples (a histogram's `_bucket`, a counter's `_total`, ...)."""


CANONICAL_BY_ALIAS: dict[str, str] = {
    info.name + suffix: info.renamed_to + suffix
    for info in FAMILIES
    if info.renamed_to
    for suffix in ("", "_bucket", "_sum", "_count", "_created")
}
"""An old wire name (and its histogram's samples) -> the family that carries its observations."""
MAX_CACHED = 200_000
BY_NAME: dict[str, MetricInfo] = {info.name: info for info in FAMILIES}


RAY_PREFIXES = ("ray_vllm:", "ray_vllm_")
"""Ray Serve exports vLLM's metrics through Ray's own exporter: `ray_` ahead of the name, and
the `:` turned into `_` by vLLM's Ray wrappers (`vllm/v1/metrics/ray_wrappers.py`)."""


def canonical_name(name: str) -> str:
    """The current wire name for `name` (itself when it is not an old alias or a Ray name)."""
    for prefix in RAY_PREFIXES:
        if name.startswith(prefix):
            name = "vllm:" + name[len(prefix) :]
            break
    return CANONICAL_BY_ALIAS.get(name, name)


ALERTS = "ALERTS"
"""Prometheus's series of active alerts (read for the exported rules' alerts)."""
ALERTS_FOR_STATE = "ALERTS_FOR_STATE"
"""Prometheus's companion of ALERTS: its value is when the alert's condition began to hold."""


def is_vllm(name: str) -> bool:
    """True for a vLLM engine metric (`vllm:`, or Ray Serve's `ray_vllm:` / `ray_vllm_`)."""
    return name.startswith(("vllm:", *RAY_PREFIXES))


class Normalizer:
    """Maps raw series to canonical names, caching per series; new metrics pass through."""

    def __init__(self) -> None:
        self._canonical: dict[Series, tuple[Series, bool]] = {}

    def normalize(self, series: Series) -> tuple[Series, bool]:
        """The canonical series and whether the raw name was an old alias."""
        known = self._canonical.get(series)
        if known is None:
            if len(self._canonical) >= MAX_CACHED:
                self._canonical.clear()
            name = canonical_name(series.name)
            known = (Series(name, series.labels), name != series.name)
            self._canonical[series] = known
        return known


def sample_type(name: str) -> str:
    """The exposition type of a sample name when none was declared: the catalogue's, else by
    suffix (counters end in _total)."""
    for suffix in ("_bucket", "_sum", "_count"):
        family = name.removesuffix(suffix)
        if family != name and family in BY_NAME and BY_NAME[family].type == "histogram":
            return "histogram"
    if name in BY_NAME:
        return BY_NAME[name].type
    return "counter" if name.endswith("_total") else "gauge"


def family_of(sample_name: str, types: Mapping[str, str]) -> tuple[str, str]:
    """The family a sample belongs to and its declared type ('untyped' when undeclared)."""
    declared = types.get(sample_name)
    if declared is not None:
        return sample_name, declared
    for suffix in FAMILY_SUFFIXES:
        if sample_name.endswith(suffix):
            family = sample_name[: -len(suffix)]
            if family in types:
                return family, types[family]
    return sample_name, "untyped"
