"""Hypothesis strategies for the PromQL conformance test: series in promtool's notation and
expressions inside vtop's documented subset, typed so that every expression is valid PromQL."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

INTERVAL_S = 15
SAMPLES = 16
EVAL_TIMES_S = (61, 151, 196, 301)
"""Early (ranges that start before the series do), after the widest range with its offset
(2m offset 30s) has data, inside it, and after the series end (lookback). One second past the
samples' grid, so no sample lies exactly on a range's or the lookback's edge: there Prometheus
2.42 (the oracle) includes it and Prometheus 3, which vtop follows, does not (the promqltest
cases check those edges)."""
EXACT_TIMES_S = frozenset({61})
"""Times evaluated as the export's tests evaluate (`from_first_sample=False`): a range reaching
back before the first sample is extrapolated as Prometheus does. At the other times vtop's own
default (the range starts at the first sample vtop saw) gives the same answer."""
NAMES = ("m_a", "m_b")
RANGES = ("45s", "1m", "2m")
RANGE_FUNCTIONS = (
    "rate",
    "increase",
    "delta",
    "avg_over_time",
    "sum_over_time",
    "min_over_time",
    "max_over_time",
    "count_over_time",
    "last_over_time",
)
ELEMENTWISE = ("abs", "floor", "ceil", "sqrt", "round")
AGGREGATIONS = ("sum", "avg", "min", "max", "count")
ARITHMETIC = ("+", "-", "*", "/", "%", "^")
COMPARISONS = ("==", "!=", ">", "<", ">=", "<=")
SET_OPERATIONS = ("and", "or", "unless")
GROUPING_LABELS = ("instance", "k", "j", "__name__")
SPECIAL_TERMS = ("_", "stale", "NaN", "Inf", "-Inf")


@dataclass(frozen=True)
class Case:
    """One example: input series (promtool head -> values) and one expression."""

    series: tuple[tuple[str, str], ...]
    expr: str


def _keyword(draw: st.DrawFn, word: str) -> str:
    """A keyword in the case Prometheus accepts it in (any)."""
    return draw(st.sampled_from((word, word.upper(), word.capitalize())))


@st.composite
def series_values(draw: st.DrawFn) -> str:
    """A gauge or a counter with resets, with gaps, staleness markers, NaN and +-Inf."""
    counter = draw(st.booleans())
    terms, level = [], draw(st.integers(0, 5))
    for _ in range(draw(st.integers(SAMPLES - 4, SAMPLES))):
        if draw(st.integers(0, 9)) == 0:
            terms.append(draw(st.sampled_from(SPECIAL_TERMS)))
            continue
        if counter:
            level = 0 if draw(st.integers(0, 11)) == 0 else level + draw(st.integers(0, 7))
        else:
            level = draw(st.integers(-5, 20))
        terms.append(str(level))
    return " ".join(terms)


@st.composite
def label_sets(draw: st.DrawFn) -> tuple[str, ...]:
    """2 to 5 distinct series heads over two names, two instances and labels k, j."""
    heads: set[str] = set()
    for _ in range(draw(st.integers(2, 5))):
        name = draw(st.sampled_from(NAMES))
        labels = [f'instance="{draw(st.sampled_from(("h1", "h2")))}"']
        labels.append(f'k="{draw(st.sampled_from(("1", "2")))}"')
        j = draw(st.sampled_from(("", "x", "y")))
        if j:
            labels.append(f'j="{j}"')
        heads.add(name + "{" + ", ".join(labels) + "}")
    return tuple(sorted(heads))


@st.composite
def selectors(draw: st.DrawFn) -> str:
    """Instant selectors: names, matchers of all four kinds, `__name__` selectors."""
    name = draw(st.sampled_from(NAMES))
    matcher = draw(
        st.sampled_from(
            (
                "",
                '{k="1"}',
                '{k!="1"}',
                '{j=~"x|y"}',
                '{j!~"x"}',
                '{j=""}',
                '{instance="h2", k="2"}',
                '{k=~"1|nope"}',
                '{j=~"(?i)x"}',
                '{j=~"y|(?i)X"}',
            )
        )
    )
    if draw(st.integers(0, 5)) == 0:
        return draw(
            st.sampled_from(
                (
                    '{__name__=~"m_.*"}',
                    '{__name__="m_a", k="2"}',
                    '{__name__=~"m_b"}',
                    '{k="1"}',
                    '{j=~"(?i)X|Y"}',
                    '{__name__=~"(?i)M_A"}',
                    '{__name__=~"m_((?i)A)"}',
                )
            )
        )
    return name + matcher


@st.composite
def scalars(draw: st.DrawFn, depth: int) -> str:
    """Scalar expressions: literals (NaN and Inf too), scalar(v), scalar arithmetic."""
    choice = draw(st.integers(0, 5 if depth > 0 else 1))
    if choice <= 1:
        return draw(st.sampled_from(("0", "1", "2", "3", "0.5", "-1", "10", "NaN", "Inf", "-Inf")))
    if choice == 2:
        return f"scalar({draw(vectors(depth - 1))})"
    left, right = draw(scalars(depth - 1)), draw(scalars(depth - 1))
    if choice == 3:
        return f"({left} {draw(st.sampled_from(COMPARISONS))} {_keyword(draw, 'bool')} {right})"
    return f"({left} {draw(st.sampled_from(ARITHMETIC))} {right})"


def _matching(draw: st.DrawFn) -> str:
    """on(...) / ignoring(...) or nothing."""
    labels = draw(st.lists(st.sampled_from(GROUPING_LABELS), max_size=2, unique=True))
    kind = draw(st.sampled_from(("", "on", "ignoring")))
    if not kind:
        return ""
    return f"{_keyword(draw, kind)}({', '.join(labels)}) "


@st.composite
def vectors(draw: st.DrawFn, depth: int) -> str:
    """Vector expressions built from every function and operator of the subset."""
    choice = draw(st.integers(0, 11 if depth > 0 else 1))
    if choice == 0:
        return draw(selectors())
    if choice == 1:
        function, window = draw(st.sampled_from(RANGE_FUNCTIONS)), draw(st.sampled_from(RANGES))
        offset = draw(st.sampled_from(("", "", " offset 30s")))
        return f"{function}({draw(selectors())}[{window}]{offset})"
    inner = draw(vectors(depth - 1))
    if choice == 2:
        aggregation = _keyword(draw, draw(st.sampled_from(AGGREGATIONS)))
        labels = draw(st.lists(st.sampled_from(GROUPING_LABELS), max_size=2, unique=True))
        grouping = draw(st.sampled_from(("", "by", "without")))
        clause = f" {_keyword(draw, grouping)} ({', '.join(labels)})" if grouping else ""
        return f"{aggregation}{clause} ({inner})"
    if choice == 3:
        function = draw(st.sampled_from(ELEMENTWISE))
        if function == "round" and draw(st.booleans()):
            return f"round({inner}, {draw(st.sampled_from(('0.5', '2', '3', '0.3')))})"
        return f"{function}({inner})"
    if choice == 4:
        low, high = draw(st.integers(-3, 10)), draw(st.integers(-3, 10))
        return draw(
            st.sampled_from(
                (
                    f"clamp_min({inner}, {low})",
                    f"clamp_max({inner}, {high})",
                    f"clamp({inner}, {low}, {high})",
                )
            )
        )
    if choice in (5, 6):
        scalar, op = draw(scalars(depth - 1)), draw(st.sampled_from(ARITHMETIC + COMPARISONS))
        modifier = f" {_keyword(draw, 'bool')}" if op in COMPARISONS and draw(st.booleans()) else ""
        if draw(st.booleans()):
            return f"({inner} {op}{modifier} {scalar})"
        return f"({scalar} {op}{modifier} {inner})"
    if choice in (7, 8):
        op = draw(st.sampled_from(ARITHMETIC + COMPARISONS))
        modifier = f" {_keyword(draw, 'bool')}" if op in COMPARISONS and draw(st.booleans()) else ""
        matching = _matching(draw)
        if matching and draw(st.integers(0, 2)) == 0:
            side = _keyword(draw, draw(st.sampled_from(("group_left", "group_right"))))
            include = draw(st.sampled_from(("", "(j)", "(k)")))
            matching += f"{side}{include} "
        right = draw(vectors(depth - 1))
        return f"({inner} {op}{modifier} {matching}{right})"
    if choice == 9:
        op = _keyword(draw, draw(st.sampled_from(SET_OPERATIONS)))
        matching = _matching(draw) if draw(st.booleans()) else ""
        return f"({inner} {op} {matching}{draw(vectors(depth - 1))})"
    if choice == 10:
        return draw(
            st.sampled_from(
                (
                    f"absent({inner})",
                    'absent(m_c{k="1", j=~"x"})',
                    f"absent({draw(selectors())})",
                    f"vector({draw(scalars(depth - 1))})",
                )
            )
        )
    return f"-{inner}" if draw(st.booleans()) else f"({inner})"


BUCKETS = ("0.1", "0.5", "1", "+Inf")
QUANTILES = ("0", "0.5", "0.9", "0.99", "1", "-1", "2", "NaN")


@st.composite
def histogram_series(draw: st.DrawFn) -> tuple[tuple[str, str], ...]:
    """Cumulative bucket counters for one or two instances, at times not monotonic across
    buckets, without the +Inf bucket or with a reset."""
    series = []
    for instance in draw(st.sampled_from((("h1",), ("h1", "h2")))):
        buckets = BUCKETS if draw(st.integers(0, 5)) else BUCKETS[:-1]
        counts = [0] * len(buckets)
        columns: list[list[str]] = [[] for _ in buckets]
        for _ in range(SAMPLES):
            if draw(st.integers(0, 15)) == 0:
                counts = [0] * len(buckets)
            running = 0
            for index in range(len(buckets)):
                running += draw(st.integers(0, 4))
                counts[index] = max(counts[index], running)
            if draw(st.integers(0, 9)) == 0:
                counts[0] += draw(st.integers(1, 9))
            for index, count in enumerate(counts):
                columns[index].append(str(count))
        for le, column in zip(buckets, columns, strict=True):
            series.append((f'h_bucket{{instance="{instance}", le="{le}"}}', " ".join(column)))
    return tuple(series)


@st.composite
def histogram_cases(draw: st.DrawFn) -> Case:
    """histogram_quantile over bucket rates, per instance or summed."""
    quantile, window = draw(st.sampled_from(QUANTILES)), draw(st.sampled_from(RANGES))
    inner = f"rate(h_bucket[{window}])"
    if draw(st.booleans()):
        inner = f"sum by (le) ({inner})"
    return Case(draw(histogram_series()), f"histogram_quantile({quantile}, {inner})")


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """Series and an expression over them."""
    if draw(st.integers(0, 9)) == 0:
        return draw(histogram_cases())
    heads = draw(label_sets())
    series = tuple((head, draw(series_values())) for head in heads)
    return Case(series, draw(vectors(3)) if draw(st.integers(0, 7)) else draw(scalars(2)))
