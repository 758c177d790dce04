"""The time of an engine step, fitted to what the server's counters show: slices of a window
(and saturated slices of earlier windows of the same model on the same host), each a mean
number of requests per step, tokens per step and seconds per step."""

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
"""Requests and tokens per step correlated beyond this cannot be told apart."""
WINDOW_FIT = 0.1
"""Earlier windows are used only if the fit through them and the window still fits the window
within this (or twice the window's own fit)..."""
AGREE = 0.15
"""...and each of them within this."""
TERMS = ("per request", "per token")


@dataclass(frozen=True)
class StepPoint:
    """One slice: mean requests per step, tokens per step and seconds per step."""

    requests: float
    tokens: float
    seconds: float

    def regressors(self) -> tuple[float, float]:
        return self.requests, self.tokens


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
    constant unless the points identify a cost per request or per token that fits clearly
    better. A cost per token read off slices of one mix would charge a 400-token prefill like
    400 decodes, so a part is only fitted where its figure varies. While the joint line misses
    an earlier window by over AGREE, or the window itself by over WINDOW_FIT, the earlier window
    it misses most is left out (another load on another day: streamed or not, other neighbours
    on the host)."""
    if not window:
        raise ValueError("no slices to fit")
    alone = _best(list(window))
    tolerance = max(WINDOW_FIT, 2 * _error(alone, window))
    kept = [list(w) for w in earlier if w]
    while kept:
        used = [*window, *(p for w in kept for p in w)]
        joint = _best(used)
        errors = [_error(joint, w) for w in kept]
        if joint[1] and _error(joint, window) <= tolerance and max(errors) <= AGREE:
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


def _best(points: list[StepPoint]) -> tuple[StepCost, tuple[str, ...]]:
    """The simplest cost the points support: each richer line must be identified, a cost
    (no negative part) and cut the error by a fifth."""
    best: tuple[StepCost, tuple[str, ...]] = (_constant(points), ())
    singles = [f for f in (_line(points, (0,)), _line(points, (1,))) if f is not None]
    for candidate in sorted(singles, key=lambda f: _error(f, points))[:1]:
        if _error(candidate, points) < IDENTIFIED * _error(best, points):
            best = candidate
    both = _line(points, (0, 1)) if best[1] else None
    if both is not None and _error(both, points) < IDENTIFIED * _error(best, points):
        best = both
    return best


def _error(chosen: tuple[StepCost, tuple[str, ...]], points: Sequence[StepPoint]) -> float:
    """Mean relative error of a step cost over the points."""
    cost = chosen[0]
    return sum(
        abs(
            cost.fixed_s
            + cost.per_sequence_s * p.requests
            + cost.per_token_s * p.tokens
            - p.seconds
        )
        / p.seconds
        for p in points
    ) / len(points)


def _constant(points: Sequence[StepPoint]) -> StepCost:
    """The step time of all the slices' steps together (a slice of few steps, mostly idle,
    would weigh as much as a busy one in a plain mean of step times)."""
    return StepCost(len(points) / sum(1.0 / p.seconds for p in points), 0.0)


def _line(
    points: Sequence[StepPoint], parts: tuple[int, ...]
) -> tuple[StepCost, tuple[str, ...]] | None:
    """Least squares (in relative error) of the step time on a fixed part and the chosen
    regressors; None when they do not vary enough, are collinear, or a part comes out negative."""
    columns = [[p.regressors()[i] for p in points] for i in parts]
    if len(points) < len(parts) + 2 or not all(_varies(c) for c in columns):
        return None
    if len(columns) == 2 and abs(_correlation(columns[0], columns[1])) > COLLINEAR:
        return None
    rows = [[1.0, *(c[k] for c in columns)] for k in range(len(points))]
    weights = [1.0 / p.seconds**2 for p in points]
    solved = _weighted_least_squares(rows, [p.seconds for p in points], weights)
    if solved is None or any(v < 0 for v in solved):
        return None
    per = dict(zip(parts, solved[1:], strict=True))
    cost = StepCost(solved[0], per.get(1, 0.0), per.get(0, 0.0))
    return cost, tuple(TERMS[i] for i in parts)


def _varies(values: Sequence[float]) -> bool:
    mean = sum(values) / len(values)
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return mean > 0 and spread >= SPREAD * mean


def _correlation(a: Sequence[float], b: Sequence[float]) -> float:
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - mean_a) * (y - mean_b) for x, y in zip(a, b, strict=True))
    var_a = sum((x - mean_a) ** 2 for x in a)
    var_b = sum((y - mean_b) ** 2 for y in b)
    return cov / math.sqrt(var_a * var_b) if var_a > 0 and var_b > 0 else 1.0


def _weighted_least_squares(
    rows: list[list[float]], targets: list[float], weights: list[float]
) -> list[float] | None:
    """The coefficients minimising sum(w * (row . x - target)^2), by the normal equations
    (at most three unknowns: not worth a linear-algebra dependency)."""
    size = len(rows[0])
    matrix = [
        [sum(w * r[i] * r[j] for r, w in zip(rows, weights, strict=True)) for j in range(size)]
        + [sum(w * r[i] * t for r, t, w in zip(rows, targets, weights, strict=True))]
        for i in range(size)
    ]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(matrix[r][col]))
        if abs(matrix[pivot][col]) < 1e-18:
            return None
        matrix[col], matrix[pivot] = matrix[pivot], matrix[col]
        for r in range(size):
            if r != col:
                factor = matrix[r][col] / matrix[col][col]
                matrix[r] = [a - factor * b for a, b in zip(matrix[r], matrix[col], strict=True)]
    return [matrix[i][size] / matrix[i][i] for i in range(size)]
