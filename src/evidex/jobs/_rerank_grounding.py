"""The rerank grounding check: do the top-k passages after reranking answer the query?

Opt-in (``check_grounding=True``). The top-k are graded by the tier prompt through the same
harness as every exchange (validation, re-asks, the explicit fallback); the query is answered
when at least one of them is directly-supporting. A check that fell back is reported as such
(``source="fallback"`` with the reason) and never counts as answered, so a query whose top-k
was not shown to answer it always reaches the review queue.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from evidex.harness.job import JobRun, verdict
from evidex.tasks.rerank import GroundingStep
from evidex.tasks.tier import DEFAULT_EXAMPLES, TierBatch
from evidex.types import DEFAULT_TIERS, Passage, Source

__all__ = ["GROUNDING_BATCH", "Grounding", "check_grounding"]

GROUNDING_BATCH = 10
"""Passages per grounding call (the tier job's default batch)."""


class Grounding(BaseModel):
    """Whether the top-k passages of a ranking together answer its query."""

    answered: bool = Field(description="at least one checked passage is directly-supporting")
    supporting: list[str] = Field(description="the checked passages that directly support")
    checked: list[str] = Field(description="the top-k passages that were checked, in rank order")
    tiers: dict[str, str] = Field(description="passage id → its tier in the check")
    reason: str = Field(description="why the query counts as answered or not")
    source: Source = Field(description="judge, cache, or fallback when a check call fell back")
    fallback_reason: str | None = None


async def check_grounding(run: JobRun, query: str, top: Sequence[Passage]) -> Grounding:
    """Grade ``top`` (the ranking's top-k, in rank order) and say whether they answer."""
    scheme = DEFAULT_TIERS
    batches = [
        TierBatch(query, tuple(top[i : i + GROUNDING_BATCH]), scheme, DEFAULT_EXAMPLES)
        for i in range(0, len(top), GROUNDING_BATCH)
    ]
    outcomes = await run.map(GroundingStep(), batches, progress=False)
    tiers: dict[str, str] = {}
    supporting: list[str] = []
    for outcome in outcomes:
        for a in outcome.value.classifications:
            tiers[a.passage_id] = a.tier
            judged = outcome.source_of(a.source) != "fallback"
            if judged and a.tier == scheme.top:
                supporting.append(a.passage_id)
    source = verdict(outcomes)
    fell = next((o.reason for o in outcomes if o.source == "fallback"), None)
    checked = [p.passage_id for p in top]
    if supporting:
        reason = (
            f"{len(supporting)} of the top {len(checked)} passages directly support the query "
            f"({', '.join(supporting)})"
        )
    elif fell is not None:
        reason = f"the grounding check fell back ({fell}): not shown to answer the query"
    else:
        reason = f"none of the top {len(checked)} passages is {scheme.top}"
    return Grounding(
        answered=bool(supporting),
        supporting=supporting,
        checked=checked,
        tiers=tiers,
        reason=reason,
        source=source,
        fallback_reason=fell,
    )
