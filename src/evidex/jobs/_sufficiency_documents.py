"""The sufficiency job's rule for the framework adapters: a chain generates only from passages
that suffice.

On ``answer`` every document is kept, those the verdict rests on first (in the judge's order,
scored by its confidence), the others after them in their own order (no score: the judge
graded none of them alone); ``top_k`` cuts the list. On ``abstain`` or ``escalate`` none is
kept, so the chain has no context to generate from; the decision and its reasons are in the
audit log, and an escalation is in the review queue. Each kept document's grades say the
decision, the verdict, its confidence and the quotes taken from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evidex.jobs._documents import Documents, Keep, Kept

if TYPE_CHECKING:
    from evidex.jobs.sufficiency import SufficiencyResult

__all__ = ["SUFFICIENCY_DOCUMENTS"]


def _kept(result: SufficiencyResult, keep: Keep) -> list[Kept]:
    if result.decision.decision != "answer":
        return []
    supporting = list(result.supporting_passage_ids)
    order = supporting + [p.passage_id for p in result.passages if p.passage_id not in supporting]
    kept = []
    for rank, pid in enumerate(order[: keep.top_k], 1):
        chosen = pid in supporting
        grades = {
            "job": "sufficiency",
            "rank": rank,
            "decision": result.decision.decision,
            "sufficient": result.sufficient,
            "confidence": result.confidence,
            "supporting": chosen,
            "quotes": [q.quoted_text for q in result.key_quotes if q.passage_id == pid],
            "source": result.source,
            "reason": result.reason,
        }
        kept.append(
            Kept(passage_id=pid, score=result.confidence if chosen else None, grades=grades)
        )
    return kept


SUFFICIENCY_DOCUMENTS: Documents[SufficiencyResult] = Documents(kept=_kept)
