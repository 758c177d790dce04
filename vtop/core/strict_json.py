"""JSON a strict parser accepts: no NaN or Infinity tokens."""

from __future__ import annotations

import json
import math
from typing import Any


def strict_json(document: Any) -> str:
    """JSON without NaN or Infinity tokens (strict parsers refuse them): each such number is
    null, and `non_finite` lists where they were and what they were."""
    found: list[str] = []
    clean = _finite(document, "$", found)
    if found and isinstance(clean, dict):
        clean["non_finite"] = found
    return json.dumps(clean, indent=2, allow_nan=False)


def _finite(value: Any, path: str, found: list[str]) -> Any:
    """A copy with non-finite floats replaced by None (their paths noted)."""
    if isinstance(value, float) and not math.isfinite(value):
        found.append(f"{path}: {value}")
        return None
    if isinstance(value, dict):
        return {k: _finite(v, f"{path}.{k}", found) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value
