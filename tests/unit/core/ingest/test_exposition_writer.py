"""Samples written as text read back as the same samples and types (Prometheus frames)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.exposition import LABEL, LABEL_VALUE, NAME, VALUE, canonical
from vtop.core.catalog import family_of
from vtop.core.frame import Sample, ScrapeStatus, Series, TargetScrape
from vtop.core.ingest.exposition import ExpositionParser, reference_samples
from vtop.core.ingest.exposition_writer import exposition_text, render

LABEL_SETS = st.lists(
    st.dictionaries(LABEL, LABEL_VALUE, max_size=3).map(lambda d: tuple(sorted(d.items()))),
    min_size=1,
    max_size=3,
    unique=True,
)
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "counter": ("_total",)}


def stem(name: str) -> str:
    """A name without the suffixes families add (families with equal stems could collide)."""
    for suffix in ("_bucket", "_sum", "_count", "_total"):
        name = name.removesuffix(suffix)
    return name


@st.composite
def typed_samples(draw: st.DrawFn) -> tuple[list[Sample], dict[str, str]]:
    """Samples of a few families, shuffled, typed by sample name as a Prometheus query gives."""
    samples: list[Sample] = []
    types: dict[str, str] = {}
    for family in draw(st.lists(NAME, min_size=1, max_size=4, unique_by=stem)):
        kind = draw(st.sampled_from(["gauge", "counter", "histogram", "untyped"]))
        for name in [family + suffix for suffix in SUFFIXES.get(kind, ("",))]:
            types[name] = kind
            samples += [Sample(Series(name, ls), float(draw(VALUE))) for ls in draw(LABEL_SETS)]
    return draw(st.permutations(samples)), types


@settings(max_examples=300, deadline=None)
@given(typed_samples())
def test_written_text_parses_back_to_the_same_samples(
    drawn: tuple[list[Sample], dict[str, str]],
) -> None:
    samples, types = drawn
    text = render(samples, types)
    parsed = ExpositionParser().parse(text)
    assert parsed.errors == []
    assert canonical(parsed.samples) == canonical(samples) == canonical(reference_samples(text))
    for sample in samples:
        assert family_of(sample.series.name, parsed.types)[1] == types[sample.series.name]


def test_a_scrape_with_text_keeps_its_text() -> None:
    text = "# TYPE x gauge\nx 1\n"
    sample = Sample(Series("x", ()), 2.0)
    scrape = TargetScrape("a", ScrapeStatus.OK, raw_text=text, samples=(sample,))
    assert exposition_text(scrape) == text
    assert exposition_text(TargetScrape("b", ScrapeStatus.UNREACHABLE)) == ""


def test_a_histogram_is_one_family_under_its_own_name() -> None:
    ttft = "vllm:time_to_first_token_seconds"
    samples = [
        Sample(Series(ttft + "_bucket", (("le", "+Inf"),)), 3.0),
        Sample(Series("vllm:num_requests_running", ()), 1.0),
        Sample(Series(ttft + "_count", ()), 3.0),
        Sample(Series(ttft + "_sum", (("model_name", 'a"b\\c'),)), float("inf")),
    ]
    types = {s.series.name: "histogram" for s in samples} | {"vllm:num_requests_running": "gauge"}
    assert render(samples, types).splitlines() == [
        f"# TYPE {ttft} histogram",
        f'{ttft}_bucket{{le="+Inf"}} 3.0',
        f"{ttft}_count 3.0",
        f'{ttft}_sum{{model_name="a\\"b\\\\c"}} +Inf',
        "# TYPE vllm:num_requests_running gauge",
        "vllm:num_requests_running 1.0",
    ]
