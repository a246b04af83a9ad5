"""The rerank grounding check's exchange: the tier step, filed under the rerank job.

The spec asks to "verify that the top-ranked passages after reranking actually contain the
information needed to answer the query". The check grades the top-k with the tier prompt; the
query is answered when at least one of them is directly-supporting. Its own step name keeps its
audit-log rows, cache entries and fallbacks apart from a tier job's.
"""

from __future__ import annotations

from evidex.tasks.tier import TierStep

__all__ = ["GroundingStep"]


class GroundingStep(TierStep, name="rerank.grounding"):
    """Grades the top-k passages of a ranking into tiers; validation, re-asks and the
    fallback (every passage contextually-relevant, so never a pass) are the tier step's."""
