"""LoRA demand counted from `vllm:lora_requests_info`'s labels, for the rules to compare."""

from __future__ import annotations

from tests.support.frames import frame_from_text
from vtop.core.frame import TargetScrape
from vtop.core.store.lora_series import IN_DEMAND, MAX_ADAPTERS, with_lora_series

INFO = (
    "# TYPE vllm:lora_requests_info gauge\n"
    'vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,b,c",'
    'waiting_lora_adapters="a,b,c"} 1.75e9\n'
    'vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,b,c,d,e",'
    'waiting_lora_adapters=""} 1.70e9\n'
)


def scrape_of(text: str) -> TargetScrape:
    [scrape] = frame_from_text(0.0, text).scrapes
    return scrape


def derived(scrape: TargetScrape) -> dict[str, float]:
    names = (IN_DEMAND.name, MAX_ADAPTERS.name)
    return {s.series.name: s.value for s in scrape.samples if s.series.name in names}


def test_the_newest_adapter_set_is_the_demand_beside_the_slots() -> None:
    assert derived(with_lora_series(scrape_of(INFO))) == {
        "lora:adapters_in_demand": 3.0,
        "lora:max_adapters": 2.0,
    }


def test_a_server_without_lora_is_passed_through_untouched() -> None:
    scrape = scrape_of("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n")
    assert with_lora_series(scrape) is scrape


def test_ray_names_empty_sets_and_a_bad_slot_count_are_read_without_error() -> None:
    text = (
        "# TYPE ray_vllm_lora_requests_info gauge\n"
        'ray_vllm_lora_requests_info{max_lora="many",running_lora_adapters=" , ",'
        'waiting_lora_adapters=""} 1.0\n'
    )
    assert derived(with_lora_series(scrape_of(text))) == {"lora:adapters_in_demand": 0.0}


def test_sets_from_the_last_seconds_add_up_as_vllm_sets_one_per_step() -> None:
    """vLLM 0.32 with three adapters on one slot: a series per adapter, set two seconds apart."""
    text = "# TYPE vllm:lora_requests_info gauge\n" + "".join(
        f'vllm:lora_requests_info{{max_lora="1",running_lora_adapters="{name}",'
        f'waiting_lora_adapters="{name}"}} {1.7963e9 - lag}\n'
        for name, lag in (("a", 0), ("b", 1), ("c", 2), ("", 0), ("old", 60))
    )
    assert derived(with_lora_series(scrape_of(text))) == {
        "lora:adapters_in_demand": 3.0,
        "lora:max_adapters": 1.0,
    }
