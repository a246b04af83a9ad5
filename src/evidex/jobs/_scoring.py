"""Moved to :mod:`evidex.judges.scoring` (scoring judges are judges); re-exported here until
the importers in ``evidex.jobs`` use the new path. Add nothing here."""

from __future__ import annotations

from evidex.judges.scoring import Scorer, ScoringJudge

__all__ = ["Scorer", "ScoringJudge"]
