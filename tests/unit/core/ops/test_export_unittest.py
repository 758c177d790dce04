"""The exported rules' promtool unit tests: values written as Go prints them."""

from __future__ import annotations

import pytest

from vtop.core.ops.export_unittest import go_value


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e6, "1e+06"),
        (123456.0, "123456"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (1.5e-05, "1.5e-05"),
        (0.1 + 0.2, "0.30000000000000004"),
        (-2.5, "-2.5"),
        (100.0, "100"),
        (float("inf"), "+Inf"),
        (float("nan"), "NaN"),
    ],
)
def test_values_render_as_go_prints_them(value: float, text: str) -> None:
    assert go_value(value) == text
