"""The time of an engine step, fitted to what the server's counters show: slices of a window
(and busy slices of earlier windows of the same model on the same host), each a mean
number of requests per step, tokens per step, tokens of context held in the KV cache and
seconds per step."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from vtop.core.whatif.scheduler import StepCost

SPREAD = 0.2
"""A figure must vary by this much (standard deviation over mean) to identify a cost per unit
of it..."""
IDENTIFIED = 0.8
"""...and the richer line must cut the simpler one's error by a fifth."""
COLLINEAR = 0.9
"""Two figures (requests, tokens or context per step) correlated beyond this cannot be told
apart."""
WINDOW_FIT = 0.1
"""Earlier windows are used only if the fit through them and the window still fits the window
within this (or twice the window's own fit)..."""
AGREE = 0.15
"""...and each of them within this."""
PARTS = 3
"""Requests, tokens and tokens of context per step."""
TERMS = ("per request", "per token", "per token of context")


@dataclass(frozen=True)
class StepPoint:
    """One slice: mean requests per step, tokens per step and seconds per step, and the mean
    tokens of context the engine held in its KV cache (None where the slice does not say: a
    window kept before vtop read it, or a server without a KV usage gauge)."""

    requests: float
    tokens: float
    seconds: float
    context: float | None = None

    def regressors(self) -> tuple[float, float, float | None]:
        return self.requests, self.tokens, self.context


@dataclass(frozen=True)
class StepFit:
    """The step cost, its mean relative error over the window's slices, the parts the points
    identified, and the range of batches they cover."""

    cost: StepCost
    error: float
    terms: tuple[str, ...]
    earlier_points: int
    """Slices of earlier windows the fit used (0: the window alone)."""
    largest_batch: float
    """The most requests per step any slice the fit used showed."""


def fit_step_cost(
    window: Sequence[StepPoint], earlier: Sequence[Sequence[StepPoint]] = ()
) -> StepFit:
    """The cost that fits the window, with those earlier windows that agree with it: a
    constant unless the points identify a cost per request, per token or per token of context
    that fits clearly better. A cost per token read off slices of one mix would charge a
    400-token prefill like 400 decodes, so a part is only fitted where its figure varies. While
    the joint line misses an earlier window by over AGREE, or the window itself by over
    WINDOW_FIT, the earlier window it misses most is left out (another load on another day:
    streamed or not, other neighbours on the host)."""
    if not window:
        raise ValueError("no slices to fit")
    slices = [[p] for p in window]
    alone = _best(slices)
    tolerance = max(WINDOW_FIT, 2 * _error(alone, window))
    kept = [list(w) for w in earlier if w]
    while kept:
        joint = _best([*slices, *kept])
        errors = [_error(joint, w) for w in kept]
        if joint[1] and _error(joint, window) <= tolerance and max(errors) <= AGREE:
            used = [*window, *(p for w in kept for p in w)]
            return _result(joint, window, sum(len(w) for w in kept), used)
        kept.pop(errors.index(max(errors)))
    return _result(alone, window, 0, window)


def _result(
    chosen: tuple[StepCost, tuple[str, ...]],
    window: Sequence[StepPoint],
    earlier: int,
    used: Sequence[StepPoint],
) -> StepFit:
    cost, terms = chosen
    largest = max(p.requests for p in used)
    return StepFit(cost, _error(chosen, window), terms, earlier, largest)


def _best(groups: list[list[StepPoint]]) -> tuple[StepCost, tuple[str, ...]]:
    """The simplest cost the groups (an earlier window, or one slice of this one) support, a
    part at a time: each part added must be identified, keep every part a cost (none negative)
    and cut the error by a fifth. One part is a slope, and two operating points (this window
    and one earlier at another batch) are what the profile is kept for. A second or third part
    must also stay identified without any one group: with as many groups as unknowns a surface
    passes through them all whatever the step really costs, and its parts trade against each
    other (a dear context against a cheap fixed part) far from the points, so a shape only one
    window pins down is that window's noise as much as a cost."""
    points = [p for g in groups for p in g]
    total = _Sums.of(points)
    parts_of = [_Sums.of(g) for g in groups]
    best: tuple[StepCost, tuple[str, ...]] = (_constant(total), ())
    chosen: tuple[int, ...] = ()
    while len(chosen) < PARTS:
        richer = [
            (f, parts)
            for part in range(PARTS)
            if part not in chosen
            and (f := _line(total, parts := tuple(sorted((*chosen, part))))) is not None
            and (
                len(parts) == 1 or all(_line(total - held, parts) is not None for held in parts_of)
            )
        ]
        if not richer:
            break
        candidate, parts = min(richer, key=lambda c: _error(c[0], points))
        if _error(candidate, points) >= IDENTIFIED * _error(best, points):
            break
        best, chosen = candidate, parts
    return best


def _error(chosen: tuple[StepCost, tuple[str, ...]], points: Sequence[StepPoint]) -> float:
    """Mean relative error of a step cost over the points."""
    cost = chosen[0]
    return sum(
        abs(cost.seconds(p.tokens, p.requests, p.context or 0.0) - p.seconds) / p.seconds
        for p in points
    ) / len(points)


@dataclass(frozen=True)
class _Sums:
    """What a line's fit and its checks need of a set of slices, as sums (so a group is taken
    out of a fit by subtraction, not by fitting again over every slice): over the row
    (1, requests, tokens, context) of each slice, plain sums and products for the spread and
    correlation of each figure, the same weighted by 1 / seconds^2 with the products by the
    step time for least squares in relative error, the sum of 1 / seconds for the constant, and
    how many slices do not know each figure."""

    count: int
    plain: tuple[float, ...]
    products: tuple[tuple[float, ...], ...]
    weighted: tuple[tuple[float, ...], ...]
    targets: tuple[float, ...]
    inverse_seconds: float
    unknown: tuple[int, ...]

    @classmethod
    def of(cls, points: Sequence[StepPoint]) -> _Sums:
        rows = [(1.0, p.requests, p.tokens, p.context or 0.0) for p in points]
        weights = [1.0 / p.seconds**2 for p in points]
        size = range(PARTS + 1)
        return cls(
            len(points),
            tuple(sum(r[i] for r in rows) for i in size),
            tuple(tuple(sum(r[i] * r[j] for r in rows) for j in size) for i in size),
            tuple(
                tuple(
                    sum(w * r[i] * r[j] for r, w in zip(rows, weights, strict=True)) for j in size
                )
                for i in size
            ),
            tuple(
                sum(w * r[i] * p.seconds for r, w, p in zip(rows, weights, points, strict=True))
                for i in size
            ),
            sum(1.0 / p.seconds for p in points),
            tuple(sum(1 for p in points if p.regressors()[i] is None) for i in range(PARTS)),
        )

    def __sub__(self, other: _Sums) -> _Sums:
        def minus(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, ...]:
            return tuple(x - y for x, y in zip(a, b, strict=True))

        return _Sums(
            self.count - other.count,
            minus(self.plain, other.plain),
            tuple(minus(a, b) for a, b in zip(self.products, other.products, strict=True)),
            tuple(minus(a, b) for a, b in zip(self.weighted, other.weighted, strict=True)),
            minus(self.targets, other.targets),
            self.inverse_seconds - other.inverse_seconds,
            tuple(a - b for a, b in zip(self.unknown, other.unknown, strict=True)),
        )

    def mean(self, part: int) -> float:
        return self.plain[part + 1] / self.count

    def covariance(self, a: int, b: int) -> float:
        return self.products[a + 1][b + 1] / self.count - self.mean(a) * self.mean(b)


def _constant(sums: _Sums) -> StepCost:
    """The step time of all the slices' steps together (a slice of few steps, mostly idle,
    would weigh as much as a busy one in a plain mean of step times)."""
    return StepCost(sums.count / sums.inverse_seconds, 0.0)


def _line(sums: _Sums, parts: tuple[int, ...]) -> tuple[StepCost, tuple[str, ...]] | None:
    """Least squares (in relative error) of the step time on a fixed part and the chosen
    regressors; None when one is unknown for a slice, does not vary enough, two are collinear,
    or a part comes out negative."""
    if sums.count < len(parts) + 2 or any(sums.unknown[i] for i in parts):
        return None
    if not all(_varies(sums, i) for i in parts):
        return None
    pairs = [(a, b) for n, a in enumerate(parts) for b in parts[n + 1 :]]
    if any(abs(_correlation(sums, a, b)) > COLLINEAR for a, b in pairs):
        return None
    index = [0, *(i + 1 for i in parts)]
    matrix = [[sums.weighted[i][j] for j in index] for i in index]
    solved = _solve(matrix, [sums.targets[i] for i in index])
    if solved is None or any(v < 0 for v in solved):
        return None
    per = dict(zip(parts, solved[1:], strict=True))
    cost = StepCost(solved[0], per.get(1, 0.0), per.get(0, 0.0), per.get(2, 0.0))
    return cost, tuple(TERMS[i] for i in parts)


def _varies(sums: _Sums, part: int) -> bool:
    mean = sums.mean(part)
    spread = math.sqrt(max(sums.covariance(part, part), 0.0))
    return mean > 0 and spread >= SPREAD * mean


def _correlation(sums: _Sums, a: int, b: int) -> float:
    var_a, var_b = sums.covariance(a, a), sums.covariance(b, b)
    if var_a <= 0 or var_b <= 0:
        return 1.0
    return sums.covariance(a, b) / math.sqrt(var_a * var_b)


def _solve(matrix: list[list[float]], targets: list[float]) -> list[float] | None:
    """The x of matrix . x = targets (the normal equations of at most four unknowns: not
    worth a linear-algebra dependency), None when singular."""
    size = len(matrix)
    rows = [[*matrix[i], targets[i]] for i in range(size)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(rows[r][col]))
        if abs(rows[pivot][col]) < 1e-18:
            return None
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(size):
            if r != col:
                factor = rows[r][col] / rows[col][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col], strict=True)]
    return [rows[i][size] / rows[i][i] for i in range(size)]
