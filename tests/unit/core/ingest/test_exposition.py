"""The fast parser agrees with prometheus_client (the reference) and survives bad lines."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.exposition import LABEL, LABEL_VALUE, NAME, VALUE, canonical
from tests.support.payloads import FIXTURES, fixture, lora_payload, multi_engine
from vtop.core.catalog import family_of
from vtop.core.frame import Sample
from vtop.core.ingest.exposition import ExpositionParser, reference_samples


def assert_same_as_reference(text: str, openmetrics: bool = False) -> None:
    parser = ExpositionParser()
    for _ in range(2):  # cold, then warm (cached series heads)
        parsed = parser.parse(text, openmetrics)
        assert parsed.errors == []
        assert canonical(parsed.samples) == canonical(reference_samples(text, openmetrics))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_real_vllm_fixtures_match_reference(path: Path) -> None:
    assert_same_as_reference(path.read_text())


def test_fixture_sample_count_and_types() -> None:
    parsed = ExpositionParser().parse(fixture("underload"))
    assert len(parsed.samples) == 420
    assert parsed.types["vllm:num_preemptions_total"] == "counter"
    assert family_of("vllm:time_to_first_token_seconds_bucket", parsed.types) == (
        "vllm:time_to_first_token_seconds",
        "histogram",
    )


def test_multi_engine_payload_matches_reference() -> None:
    text = multi_engine(fixture("underload"), 8)
    assert_same_as_reference(text)
    engines = {s.series.label("engine") for s in ExpositionParser().parse(text).samples}
    assert engines >= {str(e) for e in range(8)}


def test_lora_labels_with_escapes_match_reference() -> None:
    assert_same_as_reference(lora_payload())
    parsed = ExpositionParser().parse(lora_payload())
    adapters = {s.series.label("running_lora_adapters") for s in parsed.samples}
    assert adapters == {'sql-lora,chat "v2"', "a\\b\nc"}


def test_timestamps_are_seconds() -> None:
    text = '# TYPE x gauge\nx{a="1"} 2.5 1700000000000\n'
    assert_same_as_reference(text)
    assert ExpositionParser().parse(text).samples[0].timestamp == 1_700_000_000.0


OPENMETRICS = """# TYPE vllm:num_preemptions counter
# HELP vllm:num_preemptions Preemptions.
vllm:num_preemptions_total{model_name="m",engine="4"} 17.0
vllm:num_preemptions_created{model_name="m",engine="4"} 1.7e+09
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{model_name="m",engine="4",le="0.1"} 3 # {t="ab"} 0.05 1
vllm:time_to_first_token_seconds_bucket{model_name="m",engine="4",le="+Inf"} 5
vllm:time_to_first_token_seconds_count{model_name="m",engine="4"} 5
vllm:time_to_first_token_seconds_sum{model_name="m",engine="4"} 1.25
# EOF
"""


def test_openmetrics_with_unsorted_labels_and_exemplar_matches_reference() -> None:
    assert_same_as_reference(OPENMETRICS, openmetrics=True)
    parsed = ExpositionParser().parse(OPENMETRICS, openmetrics=True)
    assert family_of("vllm:num_preemptions_total", parsed.types) == (
        "vllm:num_preemptions",
        "counter",
    )


def test_malformed_lines_are_reported_and_the_rest_kept() -> None:
    good = fixture("underload").splitlines()
    broken = [*good[:60], 'vllm:bad{engine="0" 1.0', "vllm:novalue{}", *good[60:], "9bad 1"]
    parsed = ExpositionParser().parse("\n".join(broken))
    assert len(parsed.samples) == 420
    assert [e.line_number for e in parsed.errors] == [61, 62, len(broken)]
    assert "line 61" in str(parsed.errors[0])


def test_quoted_utf8_metric_and_label_names_are_read() -> None:
    parser = ExpositionParser()
    parsed = parser.parse('# TYPE "my.metric" gauge\n{"my.metric", "a.b"="x # }"} 3\nok 1\n')
    assert parsed.errors == []
    assert [(s.series.name, s.series.labels) for s in parsed.samples] == [
        ("my.metric", (("a.b", "x # }"),)),
        ("ok", ()),
    ]
    assert parsed.types == {"my.metric": "gauge"}
    assert parser.fallback_lines == 0


EXEMPLARS = """# TYPE h histogram
h_bucket{le="1"} 5 # {trace_id="a # b"} 0.5 123
h_bucket{le="2"} 6 # {trace_id="c}d"} 1.5
h_bucket{le="+Inf"} 7 # {trace_id="e"} 3
h_count 7
h_sum 9.5
# EOF
"""


def test_an_exemplar_with_a_hash_or_brace_in_its_labels_keeps_the_bucket() -> None:
    assert_same_as_reference(EXEMPLARS, openmetrics=True)
    parsed = ExpositionParser().parse(EXEMPLARS, openmetrics=True)
    assert [s.value for s in parsed.samples][:3] == [5.0, 6.0, 7.0]


def test_type_lines_separated_by_tabs_are_read() -> None:
    parsed = ExpositionParser().parse("#\tTYPE\tq_seconds\tcounter\nq_seconds_total 3\n")
    assert parsed.types == {"q_seconds": "counter"} and parsed.errors == []
    assert family_of("q_seconds_total", parsed.types) == ("q_seconds", "counter")


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_value(value: float | int) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


@st.composite
def exposition(draw: st.DrawFn) -> str:
    lines = []
    for name in draw(
        st.lists(NAME, min_size=1, max_size=5, unique_by=lambda n: n.removesuffix("_total"))
    ):
        kind = draw(st.sampled_from(["gauge", "counter", "untyped"]))
        if kind == "counter" and not name.endswith("_total"):
            name += "_total"  # what prometheus_client writes on the wire
        lines.append(f"# HELP {name} some help text")
        lines.append(f"# TYPE {name} {kind}")
        for labels in draw(
            st.lists(
                st.dictionaries(LABEL, LABEL_VALUE, max_size=3),
                max_size=4,
                unique_by=lambda d: tuple(sorted(d.items())),
            )
        ):
            body = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
            braces = bool(labels) or draw(st.booleans())
            head = f"{name}{{{body}}}" if braces else name
            lines.append(f"{head} {render_value(draw(VALUE))}")
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None)
@given(exposition())
def test_generated_exposition_matches_reference(text: str) -> None:
    assert_same_as_reference(text)


NEXT_VALUE = st.one_of(
    VALUE.map(render_value),
    st.sampled_from(["1_000", "bad", "1.5 1700000000000", "2\r", "", "0x10", "nan", "  7"]),
)


@st.composite
def next_scrape(draw: st.DrawFn, text: str) -> str:
    """`text` with new values on its sample lines (sometimes odd ones), or a reshaped copy."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if line and not line.startswith("#"):
            lines[index] = f"{line.rpartition(' ')[0]} {draw(NEXT_VALUE)}"
    reshape = draw(st.sampled_from(["none", "none", "drop", "type", "extra"]))
    if reshape == "drop" and len(lines) > 2:
        del lines[draw(st.integers(0, len(lines) - 2))]
    elif reshape == "type":
        lines = [line.replace(" counter", " gauge") for line in lines]
    elif reshape == "extra":
        lines.insert(draw(st.integers(0, len(lines))), "extra_metric 1")
    return "\n".join(lines)


@settings(max_examples=300, deadline=None)
@given(st.data(), exposition())
def test_a_warm_parser_reads_a_next_scrape_like_a_cold_one(data: st.DataObject, text: str) -> None:
    """Whether or not the next scrape keeps the last one's layout, and whatever its values
    are, the warm parser's result equals a fresh parser's."""
    warm = ExpositionParser()
    warm.parse(text)
    following = data.draw(next_scrape(text))
    got, expected = warm.parse(following), ExpositionParser().parse(following)
    assert canonical(got.samples) == canonical(expected.samples)
    assert [s.series for s in got.samples] == [s.series for s in expected.samples]
    assert got.types == expected.types
    assert [(e.line_number, e.message) for e in got.errors] == [
        (e.line_number, e.message) for e in expected.errors
    ]


def test_a_scrape_with_the_same_lines_is_read_through_the_layout() -> None:
    parser = ExpositionParser()
    text = fixture("underload")
    parser.parse(text)
    head = 'vllm:num_requests_waiting{engine="0",model_name="./model"}'
    following = text.replace(f"{head} 10.0", f"{head} 12.0")
    again = parser.parse(following)
    assert parser.layout_hits == 1
    assert canonical(again.samples) == canonical(ExpositionParser().parse(following).samples)
    assert [s.value for s in again.samples if s.series.name == "vllm:num_requests_waiting"] == [12]
    third = parser.parse(following.replace(f"{head} 12.0", f"{head} 13.0"))
    assert parser.layout_hits == 2
    assert third.types is again.types and again.types == ExpositionParser().parse(text).types


GOOD = fixture("underload").splitlines()
HOSTILE_LINE = st.one_of(
    st.text(max_size=80),
    st.sampled_from(["# TYPE", "# TYPE ", "# HELP", "#", "# TYPE x", "# TYPE x y z", "{", "}"]),
    st.sampled_from(GOOD).flatmap(lambda line: st.integers(0, len(line)).map(lambda n: line[:n])),
)


def samples_of_lines(lines: list[str]) -> list[Sample]:
    """The samples the lines give on their own, each read alone."""
    return [s for line in lines for s in ExpositionParser().parse(line).samples]


@settings(max_examples=300, deadline=None)
@given(st.lists(HOSTILE_LINE, max_size=12), st.integers(0, len(GOOD)), st.booleans())
def test_no_line_makes_the_parser_raise_or_changes_a_good_value(
    junk: list[str], where: int, openmetrics: bool
) -> None:
    """Random text, truncated real lines and bare comment heads among a real payload: every bad
    line is a numbered error, never an exception, and every good sample keeps its value."""
    text = "\n".join([*GOOD[:where], *junk, *GOOD[where:]])
    for parser in (ExpositionParser(), ExpositionParser()):
        parser.parse(fixture("underload"))  # the second one warm, through the layout
        parsed = parser.parse(text, openmetrics)
        assert all(error.line_number >= 1 for error in parsed.errors)
        kept = {(s.series.name, s.series.labels): s.value for s in parsed.samples}
        written = {(s.series.name, s.series.labels) for s in samples_of_lines(junk)}
        for sample in ExpositionParser().parse("\n".join(GOOD)).samples:
            key = (sample.series.name, sample.series.labels)
            if key in kept and key not in written:  # a cut line can be a valid sample itself
                value = kept[key]
                assert value == sample.value or (math.isnan(value) and math.isnan(sample.value))


def test_series_not_from_vllm_past_the_cap_are_skipped_unparsed_and_vllm_s_all_kept() -> None:
    junk = "".join(f'junk_total{{shard="{n}"}} {n}\n' for n in range(50))
    text = junk + "process_start_time_seconds 1.7e9\n" + fixture("underload")
    parser = ExpositionParser(other_max=10)
    parsed = parser.parse(text)
    names = [s.series.name for s in parsed.samples]
    vllm = [n for n in names if n.startswith("vllm:")]
    assert vllm == [s.series.name for s in reference_samples(text) if s.series.name in vllm]
    assert len([n for n in names if n == "junk_total"]) == 10
    assert "process_start_time_seconds" in names
    others = len([s for s in reference_samples(text) if not s.series.name.startswith("vllm:")])
    assert parsed.skipped == others - (len(names) - len(vllm)) > 40
    assert parser.parse(text).skipped == parsed.skipped  # the next scrape likewise


def test_lines_are_split_a_block_at_a_time_as_split_gives_them() -> None:
    import vtop.core.ingest.exposition as exposition

    text = fixture("underload")
    saved = exposition.LINE_BLOCK
    try:
        for block in (1, 7, 100, 5000):
            exposition.LINE_BLOCK = block
            assert list(exposition._lines(text)) == text.split("\n")
            assert list(exposition._lines(text + "\n\nx")) == (text + "\n\nx").split("\n")
    finally:
        exposition.LINE_BLOCK = saved


def exploded(count: int) -> str:
    """`count` vLLM samples of one family, a label per sample (an exporter whose labels
    explode), with the comments a family carries."""
    lines = ["# HELP vllm:x_total x", "# TYPE vllm:x_total counter"]
    lines += [f'vllm:x_total{{i="{i}"}} {i}' for i in range(count)]
    return "\n".join([*lines, "# EOF-like trailing comment", ""])


def test_a_text_over_the_sample_limit_is_refused_before_a_series_is_made() -> None:
    parser = ExpositionParser(sample_limit=10)
    over = parser.parse(exploded(11))
    assert over.over_limit and not over.samples
    within = ExpositionParser(sample_limit=10).parse(exploded(10))
    assert not within.over_limit and len(within.samples) == 10
    huge = ExpositionParser(sample_limit=1_000).parse(exploded(200_000))
    assert huge.over_limit and not huge.samples


def test_names_the_count_misses_still_stop_the_parse_one_past_the_limit() -> None:
    quoted_late = "\n".join(f'  vllm:x_total{{i="{i}"}} {i}' for i in range(50))  # indented
    parsed = ExpositionParser(sample_limit=10).parse(quoted_late + "\n")
    assert parsed.over_limit and len(parsed.samples) == 11


def test_parsers_of_replicas_share_their_series_and_junk_is_not_shared() -> None:
    """Two servers exposing the same payload: one copy of each vLLM series (the same objects),
    equal to what a parser alone makes; a series not from vLLM stays each parser's own."""
    text = fixture("underload") + 'junk_total{path="/x"} 1\n'
    first, second = ExpositionParser().parse(text), ExpositionParser().parse(text)
    assert [s.series for s in first.samples] == [s.series for s in second.samples]
    pairs = list(zip(first.samples, second.samples, strict=True))
    shared = [a.series is b.series for a, b in pairs if a.series.name.startswith("vllm:")]
    assert shared and all(shared)
    [junk] = [(a.series, b.series) for a, b in pairs if a.series.name == "junk_total"]
    assert junk[0] == junk[1] and junk[0] is not junk[1]
    assert [s.series for s in first.samples] == [s.series for s in reference_samples(text)]
