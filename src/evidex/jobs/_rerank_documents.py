"""The rerank job's rule for the framework adapters: its ranking, cut at ``top_k``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evidex.jobs._documents import Documents, Keep, Kept

if TYPE_CHECKING:
    from evidex.jobs.rerank import RerankResult

__all__ = ["RERANK_DOCUMENTS"]


def _kept(result: RerankResult, keep: Keep) -> list[Kept]:
    """Every ranked passage (or the first ``top_k``), best first."""
    ranked = result.ranked_passages if keep.top_k is None else result.top(keep.top_k)
    return [
        Kept(
            passage_id=r.passage_id,
            score=r.relevance_score,
            grades={
                "job": "rerank",
                "rank": r.rank,
                "score": r.relevance_score,
                "justification": r.justification,
                "source": r.source,
                "reason": r.reason or (result.reason if r.source == "fallback" else None),
                "strategy": result.strategy,
                # with check_grounding: whether the kept documents answer the query
                **({"grounding": result.grounding.model_dump()} if result.grounding else {}),
            },
        )
        for r in ranked
    ]


def _keywords(keep: Keep) -> dict[str, Any]:
    return {} if keep.top_k is None else {"top_k": keep.top_k}


RERANK_DOCUMENTS: Documents[RerankResult] = Documents(kept=_kept, keywords=_keywords)
