"""The replies of ``local:minilm``, in the tasks' JSON shapes so the harness validates them.

Each justification names the heuristic and its numbers; a tier reply's
``key_evidence_snippet`` is the best-matching sentence, copied from the passage.
"""

from __future__ import annotations

from typing import Any

from evidex.judges.minilm._matching import Match, PoolScore
from evidex.judges.minilm._thresholds import Thresholds
from evidex.types import TierScheme


def tier_reply(
    thresholds: Thresholds, ids: list[str], matches: list[Match], tiers: list[str]
) -> dict[str, Any]:
    """Each passage in the first tier whose cut point its score reaches, else the last."""
    cuts = thresholds.for_tiers(len(tiers))
    spread = "" if len(cuts) == len(thresholds.cut_points) else " (cut points re-spread)"
    items = []
    for pid, m in zip(ids, matches, strict=True):
        level = next((i for i, c in enumerate(cuts) if m.score >= c), len(cuts))
        if level < len(cuts):
            reason = f"≥ {cuts[level]:.2f} cut point for {tiers[level]}"
        else:
            reason = f"< {cuts[-1]:.2f} cut point for {tiers[-2]}"
        items.append(
            {
                "passage_id": pid,
                "tier": tiers[level],
                "justification": (
                    f"heuristic (MiniLM cosine{spread}): best-matching sentence (the snippet) "
                    f"scores {m.sentence.score:.2f}, passage {m.passage_score:.2f}, "
                    f"combined {m.score:.2f} {reason}"
                ),
                "key_evidence_snippet": m.sentence.text,
            }
        )
    counts = {TierScheme.count_key(t): 0 for t in tiers}
    for item in items:
        counts[TierScheme.count_key(str(item["tier"]))] += 1
    return {"classifications": items, "tier_summary": counts}


def _clipped(score: float) -> float:
    return round(min(1.0, max(0.0, score)), 4)


def rerank_reply(ids: list[str], pool: list[PoolScore]) -> dict[str, Any]:
    """Ranked by pool score (ties keep input order); ``relevance_score`` is that score
    clipped to [0, 1], and each justification names its neighbours' scores."""
    order = sorted(range(len(ids)), key=lambda i: (-pool[i].score, i))
    ranked = []
    for rank, i in enumerate(order, 1):
        around = []
        if rank > 1:
            above = order[rank - 2]
            around.append(f"below {ids[above]} ({pool[above].score:.2f})")
        if rank < len(order):
            below = order[rank]
            around.append(f"above {ids[below]} ({pool[below].score:.2f})")
        ranked.append(
            {
                "rank": rank,
                "passage_id": ids[i],
                "relevance_score": _clipped(pool[i].score),
                "justification": pool[i].justification
                + (f"; {', '.join(around)}" if around else ""),
            }
        )
    return {"ranked_passages": ranked}


def scores_reply(ids: list[str], pool: list[PoolScore]) -> dict[str, Any]:
    """The pointwise score step's reply: one unclipped score per passage, in input order."""
    return {
        "scores": [
            {"passage_id": pid, "relevance_score": p.score, "justification": p.justification}
            for pid, p in zip(ids, pool, strict=True)
        ]
    }
