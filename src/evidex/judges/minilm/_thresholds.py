"""Tier cut points of ``local:minilm``: fitted on labelled data, shipped as ``thresholds.json``.

``bench/fit_minilm_thresholds.py`` fits them; a scheme with another number of tiers than the
fit gets them re-spread by the rule of :meth:`Thresholds.for_tiers`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evidex.errors import ConfigError
from evidex.judges.minilm._data import read_data


class Thresholds(BaseModel):
    """Fitted scoring parameters: ``cut_points`` are the minimum scores of every tier but the
    last, most relevant first (so they descend); ``fit`` records how they were obtained."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sentence_weight: float = Field(ge=0.0, le=1.0)
    cut_points: tuple[float, ...] = Field(min_length=1)
    tiers: tuple[str, ...] = ()
    fit: dict[str, Any] = Field(default_factory=dict)

    def for_tiers(self, count: int) -> tuple[float, ...]:
        """Cut points for a scheme of ``count`` tiers.

        The fitted points are used as they are when the scheme has as many tiers as the fit
        (matched by position: most relevant first). Otherwise they are re-spread by one rule:
        the fitted cut point ``i`` (of ``n``) sits at relevance ``1 - (i + 1) / (n + 1)`` on a
        0-1 axis; a ``count``-tier scheme needs its boundaries at ``1 - j / count``
        (j = 1..count-1), read off the piecewise-linear curve through the fitted points and
        extended linearly past its ends. Two tiers thus split at the fitted middle cut point.
        """
        n = len(self.cut_points)
        if count == n + 1:
            return self.cut_points
        if count < 2:
            raise ConfigError(f"a tier scheme needs at least two tiers, got {count}")
        positions = [1.0 - (i + 1) / (n + 1) for i in range(n)][::-1]  # ascending
        scores = list(self.cut_points)[::-1]
        wanted = [1.0 - j / count for j in range(1, count)]
        return tuple(_interp_linear(x, positions, scores) for x in wanted)


def _interp_linear(x: float, xs: Sequence[float], ys: Sequence[float]) -> float:
    if len(xs) == 1:
        return ys[0]
    if x <= xs[0]:
        i = 0
    elif x >= xs[-1]:
        i = len(xs) - 2
    else:
        i = max(k for k in range(len(xs) - 1) if xs[k] <= x)
    slope = (ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i])
    return ys[i] + slope * (x - xs[i])


def load_thresholds(path: Path | None = None) -> tuple[Thresholds, str]:
    """The thresholds (default: the shipped file) and the sha256 of their bytes."""
    raw, where = read_data(path, "thresholds.json")
    try:
        value = Thresholds.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        raise ConfigError(f"{where}: invalid MiniLM thresholds: {exc}") from exc
    cuts = value.cut_points
    if any(a <= b for a, b in itertools.pairwise(cuts)):
        raise ConfigError(f"{where}: cut_points must strictly descend, got {list(cuts)}")
    return value, hashlib.sha256(raw).hexdigest()
