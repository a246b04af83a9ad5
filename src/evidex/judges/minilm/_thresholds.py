"""Tier cut points of ``local:minilm``: fitted on labelled data, shipped as ``thresholds.json``.

``bench/fit_minilm_thresholds.py`` fits them; a scheme with another number of tiers than the
fit gets them re-spread by the rule of :meth:`Thresholds.for_tiers`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evidex.errors import ConfigError
from evidex.judges._grades import spread_cut_points
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
        """Cut points for a scheme of ``count`` tiers: the fitted ones when the scheme has as
        many tiers as the fit, else re-spread by the rule of
        :func:`~evidex.judges._grades.spread_cut_points` (two tiers split at the fitted middle
        cut point)."""
        return spread_cut_points(self.cut_points, count)


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
