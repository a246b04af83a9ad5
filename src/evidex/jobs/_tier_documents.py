"""The tier job's rule for the framework adapters: the context that
:func:`~evidex.jobs.select.select_context` keeps under the policy and budget, most relevant
tier first, each scored by its tier so that a framework can sort by it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evidex.jobs._documents import Documents, Keep, Kept
from evidex.jobs.select import select_context

if TYPE_CHECKING:
    from evidex.jobs.tier import TierResult

__all__ = ["TIER_DOCUMENTS", "tier_score"]


def tier_score(result: TierResult, tier: str) -> float:
    """A tier as a number: 1.0 for the top tier, 0.0 for the last, evenly spaced between."""
    names = result.scheme.names
    return 1.0 - names.index(tier) / (len(names) - 1)


def _kept(result: TierResult, keep: Keep) -> list[Kept]:
    context = select_context(result, keep.policy, keep.token_budget)
    by_id = {a.passage_id: a for a in result.classifications}
    kept = []
    for rank, item in enumerate(context.items, 1):
        a = by_id[item.passage_id]
        score = tier_score(result, a.tier)
        grades = {
            "job": "tier",
            "tier": a.tier,
            "rank": rank,
            "score": score,
            "justification": a.justification,
            "snippet": a.key_evidence_snippet,
            "source": a.source,
            "reason": a.reason,
            "supplementary": item.supplementary,
            "policy": keep.policy,
        }
        kept.append(Kept(passage_id=a.passage_id, score=score, grades=grades))
    return kept


TIER_DOCUMENTS: Documents[TierResult] = Documents(kept=_kept)
