"""The catalogue against the installed vLLM's own source: every family vLLM defines is
catalogued with vLLM's type, every family the catalogue says vLLM still exports is defined
there, every family it says was removed is not, and no whole `vllm:` name in the source escapes
the catalogue (names built at run time included)."""

from __future__ import annotations

import pytest

from tests.support.vllm_source import vllm_definitions, vllm_names, vllm_source_dir
from vtop.core.catalog import BY_NAME

pytestmark = pytest.mark.vllm

BUILT_AT_RUN_TIME = {"vllm:cache_config_info": "log_metrics_info names it by the config's type"}
"""Families whose constructor is given a variable: named in the source, typed here by hand."""


def test_the_catalogue_is_the_installed_vllm_s_surface() -> None:
    root = vllm_source_dir()
    defined = vllm_definitions(root)
    assert len(defined) >= 100, f"only {len(defined)} definitions found: is the reader stale?"
    lacking = sorted(set(defined) - set(BY_NAME))
    assert not lacking, f"defined by vLLM, not catalogued: {lacking}"
    wrong = {n: (BY_NAME[n].type, kind) for n, kind in defined.items() if BY_NAME[n].type != kind}
    assert not wrong, f"catalogue type, vLLM's type: {wrong}"
    exported = {name for name, info in BY_NAME.items() if not info.removed}
    missing = sorted(exported - set(defined) - set(BUILT_AT_RUN_TIME))
    assert not missing, f"catalogued as exported, defined nowhere in vLLM: {missing}"
    gone = sorted(name for name in defined if BY_NAME[name].removed)
    assert not gone, f"catalogued as removed, still defined: {gone}"
    named = vllm_names(root)
    unknown = sorted(n for n in named if n not in BY_NAME and f"{n}_total" not in BY_NAME)
    assert not unknown, f"named in vLLM's source, not catalogued: {unknown}"
    assert set(BUILT_AT_RUN_TIME) <= named
