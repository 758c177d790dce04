"""Tick cost: fast parse + store update vs prometheus_client's parse of the same text.

Run: python -m benchmarks.bench_tick
Also prints the store's memory after a simulated 24 h of 1 s ticks.
"""

from __future__ import annotations

import gc
import resource
import time
from collections.abc import Callable

from tests.support.payloads import fixture, multi_engine
from vtop.core.config.cache_config import cache_configs
from vtop.core.config.server_config import assemble
from vtop.core.frame import Frame, Sample, ScrapeStatus, TargetScrape
from vtop.core.ingest.exposition import ExpositionParser, reference_samples
from vtop.core.rules.engine import Engine
from vtop.core.rules.loader import load_rules
from vtop.core.store.store import Store

TARGET = "http://127.0.0.1:8000"


def best_ms(work: Callable[[], object], repeat: int) -> float:
    """Best-of-5 mean milliseconds per call."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeat):
            work()
        best = min(best, (time.perf_counter() - started) / repeat * 1000)
    return best


def tick_runner(texts: list[str]) -> Callable[[], object]:
    """One vtop tick per call: parse the next payload, build a frame, ingest it."""
    parser, store = ExpositionParser(), Store()
    state = {"tick": 0}

    def tick() -> object:
        state["tick"] += 1
        parsed = parser.parse(texts[state["tick"] % len(texts)])
        scrape = TargetScrape(TARGET, ScrapeStatus.OK, "", tuple(parsed.samples), parsed.types, ())
        return store.ingest(Frame(float(state["tick"]), (scrape,)))

    return tick


def compare(label: str, texts: list[str], repeat: int) -> None:
    """Print vtop's tick against the reference parse alone."""
    reference = best_ms(lambda: reference_samples(texts[0]), repeat)
    vtop_tick = best_ms(tick_runner(texts), repeat)
    size_kb = len(texts[0]) / 1024
    print(
        f"{label:<22} {size_kb:7.0f} KB  reference parse {reference:7.2f} ms  "
        f"vtop parse+store {vtop_tick:6.2f} ms  ratio {reference / vtop_tick:5.1f}x"
    )


def engine_cost(texts: list[str]) -> None:
    """Time the shipped rules at successive ticks on a store holding 10 minutes of 1 s ticks
    (each tick's scrape ingested first, not timed; best of 40-tick runs), lazily as the engine
    runs and reading every operand (the exact mode), against one reference parse of the same
    payload in the same process."""
    store, parser = Store(), ExpositionParser()

    def ingest(second: int) -> list[Sample]:
        parsed = parser.parse(texts[0])
        scrape = TargetScrape(TARGET, ScrapeStatus.OK, "", tuple(parsed.samples), parsed.types)
        store.ingest(Frame(float(second), (scrape,)))
        return list(parsed.samples)

    for second in range(600):
        samples = ingest(second)
    rules = load_rules()
    config = assemble(cache_configs=cache_configs(samples)).pseudo_metrics()
    gc.collect()
    second = 600
    cost: dict[bool, float] = {}
    for lazy in (False, True, False, True):
        engine = Engine(rules, lazy=lazy)
        best = float("inf")
        for _ in range(3):
            spent = 0.0
            for _ in range(40):
                ingest(second)
                started = time.perf_counter()
                engine.evaluate(store, TARGET, float(second), config)
                spent += time.perf_counter() - started
                second += 1
            best = min(best, spent / 40 * 1000)
        cost[lazy] = min(best, cost.get(lazy, float("inf")))
    reference = best_ms(lambda: reference_samples(texts[0]), 5)
    print(
        f"rule engine, {len(rules)} rules on 10 min of history: {cost[True]:6.2f} ms per tick "
        f"({cost[True] / reference:.2f}x one reference parse; every operand read: "
        f"{cost[False]:.2f} ms, {cost[True] / cost[False]:.2f}x)"
    )


def memory_after_a_day(texts: list[str]) -> None:
    """Ingest 24 h of 1 s ticks (pre-parsed, to keep the run short) and print the memory bound."""
    parser, store = ExpositionParser(), Store()
    scrapes = []
    for text in texts:
        parsed = parser.parse(text)
        scrapes.append(
            TargetScrape(TARGET, ScrapeStatus.OK, "", tuple(parsed.samples), parsed.types)
        )
    rss_at_an_hour = 0
    for second in range(24 * 3600):
        store.ingest(Frame(float(second), (scrapes[second % len(scrapes)],)))
        if second + 1 in (60, 600, 3600, 6 * 3600, 24 * 3600):
            print(
                f"after {_span(second + 1):>5}: {store.series_count()} series, rings "
                f"{store.memory_bytes() / 2**20:4.1f} MiB (bound {store.bound_bytes() / 2**20:.1f}"
                f" MiB: 8 B x {store.capacity} ticks x series)"
            )
        if second + 1 == 3600:
            rss_at_an_hour = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_at_an_hour
    print(f"peak RSS growth from the first hour to the 24th: {growth / 1024:.1f} MiB")


def _span(seconds: int) -> str:
    """1 min, 10 min, 1 h, ..."""
    return f"{seconds // 60} min" if seconds < 3600 else f"{seconds // 3600} h"


def main() -> None:
    """Run all tick benchmarks."""
    one = [fixture("underload")]
    eight = [multi_engine(text, 8) for text in one]
    print("tick = parse one /metrics payload + ingest into the store (warm parser)")
    compare("vLLM 0.32, 1 engine", one, 200)
    compare("synthetic, 8 engines", eight, 30)
    engine_cost(one)
    memory_after_a_day(one)


if __name__ == "__main__":
    main()
