"""Generated exposition pieces and an order-free comparison form of samples."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hypothesis import strategies as st

from vtop.core.frame import Sample


def canonical(samples: Sequence[Sample]) -> list[tuple[object, ...]]:
    """Order-free, NaN-safe comparison form."""
    return sorted(
        (s.series, "nan" if math.isnan(s.value) else s.value, s.timestamp) for s in samples
    )


NAME = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,20}", fullmatch=True)
LABEL = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,10}", fullmatch=True)
LABEL_VALUE = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"))
    | st.sampled_from(['"', "\\", "\n", "}", "{", ",", "=", " "]),
    max_size=12,
)
VALUE = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**12), 10**12))
