"""The replies of ``local:minilm``, in the tasks' JSON shapes so the harness validates them.

The shapes and the tier rule are the encoder judges' shared ones (:mod:`evidex.judges._grades`);
this module words a tier justification: it names the heuristic and its numbers, and
``key_evidence_snippet`` is the best-matching sentence, copied from the passage.
"""

from __future__ import annotations

from typing import Any

from evidex.judges import _grades
from evidex.judges._grades import rerank_reply, scores_reply
from evidex.judges.minilm._matching import Match
from evidex.judges.minilm._thresholds import Thresholds

__all__ = ["rerank_reply", "scores_reply", "tier_reply"]


def tier_reply(
    thresholds: Thresholds, ids: list[str], matches: list[Match], tiers: list[str]
) -> dict[str, Any]:
    """Each passage in the first tier whose cut point its combined score reaches, else the
    last (see :func:`evidex.judges._grades.tier_reply`)."""

    def explain(i: int, spread: str, verdict: str) -> str:
        m = matches[i]
        return (
            f"heuristic (MiniLM cosine{spread}): best-matching sentence (the snippet) "
            f"scores {m.sentence.score:.2f}, passage {m.passage_score:.2f}, "
            f"combined {m.score:.2f} {verdict}"
        )

    return _grades.tier_reply(
        thresholds.cut_points,
        ids,
        [m.score for m in matches],
        [m.sentence.text for m in matches],
        tiers,
        explain,
    )
