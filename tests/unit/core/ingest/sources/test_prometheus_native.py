"""Native histograms in Prometheus's query answers (Prometheus 3 stores vLLM's histograms as
native histograms with custom buckets when told `convert_classic_histograms_to_nhcb`): read as
the classic series a direct scrape gives.

No Prometheus 3 runs here (Debian's 2.42 has no custom-bucket native histograms), so the answers
are served, in the JSON shape its HTTP API documents, by a real HTTP server on loopback."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.support.http_server import Canned, serving
from vtop.core.ingest.exposition import reference_samples
from vtop.core.ingest.sources.prometheus import (
    Point,
    PrometheusClient,
    PrometheusError,
    native_histogram_points,
)
from vtop.core.ingest.sources.vllm_http import ScrapeOptions

FIXTURE = Path(__file__).parents[4] / "data" / "vllm-0.32-cpu-metrics-underload.txt"
LABELS = {"instance": "10.0.0.7:8000", "job": "vllm"}


def classic_histograms() -> dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]]:
    """The fixture's histograms: (family, labels) -> count, sum and cumulative buckets."""
    found: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]] = defaultdict(
        lambda: {"buckets": {}}
    )
    for sample in reference_samples(FIXTURE.read_text()):
        name, labels = sample.series.name, dict(sample.series.labels)
        for suffix in ("_bucket", "_count", "_sum"):
            if name.endswith(suffix) and name.startswith("vllm:"):
                le = labels.pop("le", None)
                entry = found[(name.removesuffix(suffix), tuple(sorted(labels.items())))]
                if le is not None:
                    entry["buckets"][float(le)] = sample.value
                else:
                    entry[suffix[1:]] = sample.value
    return {key: entry for key, entry in found.items() if entry["buckets"]}


def as_nhcb(entry: dict[str, Any]) -> dict[str, Any]:
    """A classic histogram as Prometheus 3's JSON writes the custom-bucket native one: buckets
    [rule, lower, upper, count-in-bucket], empty ones left out, left-open (rule 0)."""
    buckets, lower, below = [], float("-inf"), 0.0
    for upper in sorted(entry["buckets"]):
        in_bucket = entry["buckets"][upper] - below
        if in_bucket:
            buckets.append([0, str(lower), str(upper).replace("inf", "+Inf"), str(in_bucket)])
        lower, below = upper, entry["buckets"][upper]
    return {"count": str(entry["count"]), "sum": str(entry["sum"]), "buckets": buckets}


def answer(result: list[dict[str, Any]], kind: str = "vector") -> dict[str, Any]:
    """A successful API answer holding `result`."""
    return {"status": "success", "data": {"resultType": kind, "result": result}}


def asked(body: dict[str, Any], range_query: bool = False) -> list[Point]:
    """What vtop's client reads of `body`, served by a real HTTP server on loopback."""

    async def run(url: str) -> list[Point]:
        client = PrometheusClient(url, ScrapeOptions())
        try:
            if range_query:
                return await client.query_range("{}", 990, 1000, 10)
            return await client.query("{}", 1000.0)
        finally:
            await client.close()

    with serving(Canned(json.dumps(body), content_type="application/json")) as url:
        return asyncio.run(run(url))


def by_series(points: list[Point]) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(p.labels.items())): p.value for p in points}


def test_native_histograms_read_as_the_classic_series_vllm_exposed() -> None:
    histograms = classic_histograms()
    assert len(histograms) >= 10, sorted(histograms)  # TTFT, ITL, queue, prompt tokens...
    native: list[dict[str, Any]] = [
        {"metric": {**dict(labels), **LABELS, "__name__": name}, "histogram": [1000, as_nhcb(e)]}
        for (name, labels), e in histograms.items()
    ]
    read = by_series(asked(answer(native)))
    expected: dict[tuple[tuple[str, str], ...], float] = {}
    for (name, labels), entry in histograms.items():
        base = {**dict(labels), **LABELS}
        expected[tuple(sorted({**base, "__name__": f"{name}_count"}.items()))] = entry["count"]
        expected[tuple(sorted({**base, "__name__": f"{name}_sum"}.items()))] = entry["sum"]
        below = 0.0
        for upper, cumulative in sorted(entry["buckets"].items()):
            # an empty bucket of the classic histogram is no bucket of the native one: the
            # classic series keep the bounds at which the count changes, and +Inf
            if cumulative != below or upper == float("inf"):
                le = "+Inf" if upper == float("inf") else repr(upper)
                labels_of = {**base, "__name__": f"{name}_bucket", "le": le}
                expected[tuple(sorted(labels_of.items()))] = cumulative
            below = cumulative
    assert read == expected


def test_a_range_answer_of_native_histograms_reads_every_step() -> None:
    histogram = {
        "count": "3",
        "sum": "1.5",
        "buckets": [[0, "0", "0.5", "2"], [0, "0.5", "1", "1"]],
    }
    result = [
        {
            "metric": {"__name__": "vllm:time_to_first_token_seconds", **LABELS},
            "histograms": [[990, histogram], [1000, histogram]],
        }
    ]
    points = asked(answer(result, "matrix"), range_query=True)
    assert sorted({p.timestamp for p in points}) == [990.0, 1000.0]
    at_end = {
        (p.labels["__name__"], p.labels.get("le")): p.value for p in points if p.timestamp == 1000
    }
    assert at_end == {
        ("vllm:time_to_first_token_seconds_count", None): 3.0,
        ("vllm:time_to_first_token_seconds_sum", None): 1.5,
        ("vllm:time_to_first_token_seconds_bucket", "0.5"): 2.0,
        ("vllm:time_to_first_token_seconds_bucket", "1.0"): 3.0,
        ("vllm:time_to_first_token_seconds_bucket", "+Inf"): 3.0,
    }


def test_an_exponential_native_histogram_keeps_its_count_in_the_inf_bucket() -> None:
    # the zero bucket and positive buckets of a standard native histogram (schema 0)
    histogram = {
        "count": "5",
        "sum": "7",
        "buckets": [[3, "-0.001", "0.001", "1"], [0, "1", "2", "3"], [0, "2", "4", "1"]],
    }
    points = native_histogram_points({"__name__": "vllm:e2e_request_latency_seconds"}, 5, histogram)
    buckets = {p.labels["le"]: p.value for p in points if "le" in p.labels}
    assert buckets == {"0.001": 1.0, "2.0": 4.0, "4.0": 5.0, "+Inf": 5.0}


@pytest.mark.parametrize(
    "item",
    [
        {"metric": {"__name__": "vllm:x"}, "histogram": [1000, {"sum": "1"}]},
        {
            "metric": {"__name__": "vllm:x"},
            "histogram": [1000, {"count": "1", "sum": "1", "buckets": [[0, "a"]]}],
        },
        {"metric": {"__name__": "vllm:x"}, "histogram": "junk"},
        {"metric": {"__name__": "vllm:x"}, "value": [1000]},
    ],
)
def test_an_answer_of_an_unknown_shape_is_an_error_not_a_traceback(item: dict[str, Any]) -> None:
    with pytest.raises(PrometheusError, match="unknown shape"):
        asked(answer([item]))
