"""Bootstrap intervals: how far a figure may move when the golden items are drawn again.

Kept apart from :mod:`evidex.evaluate.metrics` (which re-exports them) because every report
and the run-against-run comparison (:mod:`evidex.evaluate.compare`) share them: a figure's
interval and the paired interval of a difference come from the same resampling.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

__all__ = ["Interval", "bootstrap_ci", "bootstrap_cis"]

T = TypeVar("T")


@dataclass(frozen=True)
class Interval:
    """A percentile bootstrap interval around ``value``."""

    value: float
    low: float
    high: float
    level: float
    samples: int


def bootstrap_ci(
    units: Sequence[T],
    statistic: Callable[[Sequence[T]], float],
    *,
    samples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap: resample ``units`` with replacement ``samples`` times.

    ``units`` are what is independent (items for kappa, queries for nDCG). Resamples where the
    statistic is undefined (``nan``, e.g. kappa on one label) are skipped; when all are, the
    bounds are ``nan``. Seeded, so a report is reproducible.
    """
    found = bootstrap_cis(
        units, lambda s: {"": statistic(s)}, samples=samples, level=level, seed=seed
    )
    return found[""]


def bootstrap_cis(
    units: Sequence[T],
    statistics: Callable[[Sequence[T]], Mapping[str, float]],
    *,
    samples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Interval]:
    """:func:`bootstrap_ci` of several figures at once, each resample feeding every figure.

    A report's figures come from one pass over each resample rather than one bootstrap per
    figure, and the same ``seed`` draws the same resamples as :func:`bootstrap_ci`, so each
    interval is the one it would give alone. For a paired difference between two runs the
    units are the pairs and the statistics the differences: both runs see the same resample.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    values = dict(statistics(units))
    if not units:
        return {k: Interval(v, math.nan, math.nan, level, 0) for k, v in values.items()}
    rng = np.random.default_rng(seed)
    n = len(units)
    drawn: dict[str, list[float]] = {k: [] for k in values}
    for _ in range(samples):
        picked = rng.integers(0, n, size=n)
        stats = statistics([units[i] for i in picked])
        for key, found in drawn.items():
            stat = stats[key]
            if not math.isnan(stat):
                found.append(stat)
    tail = (1.0 - level) / 2 * 100
    out = {}
    for key, value in values.items():
        stats_of = drawn[key]
        if not stats_of:
            out[key] = Interval(value, math.nan, math.nan, level, 0)
            continue
        low, high = np.percentile(stats_of, [tail, 100 - tail])
        out[key] = Interval(value, float(low), float(high), level, len(stats_of))
    return out
