"""The catalogue against the installed vLLM's own source: every family vLLM defines with a
Counter, Gauge or Histogram constructor that the catalogue lists has the catalogue's type."""

from __future__ import annotations

import pytest

from tests.support.vllm_source import vllm_definitions, vllm_source_dir
from vtop.core.catalog import BY_NAME

pytestmark = pytest.mark.vllm


def test_the_catalogue_types_every_family_as_vllm_s_source_defines_it() -> None:
    defined = vllm_definitions(vllm_source_dir())
    assert len(defined) >= 50, f"only {len(defined)} definitions found: is the pattern stale?"
    located = {name: kind for name, kind in defined.items() if name in BY_NAME}
    assert len(located) >= 40, sorted(located)  # the catalogue is checked, not skipped
    wrong = {n: (BY_NAME[n].type, kind) for n, kind in located.items() if BY_NAME[n].type != kind}
    assert not wrong, wrong
