"""The audit's values: graded claims, their summary, claim spans, the steps' validated replies,
and the batches a step is given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from evidex.types import Event, Passage, RiskLevel, Source

__all__ = [
    "SUPPORT_LEVELS",
    "AuditSummary",
    "ClaimAudit",
    "ClaimBatch",
    "ClaimSpan",
    "ClaimsValue",
    "ExtractedValue",
    "SegmentBatch",
    "SourceRef",
    "SupportLevel",
]

SupportLevel = Literal["fully_supported", "partially_supported", "inferred", "unsupported"]
SUPPORT_LEVELS: tuple[str, ...] = get_args(SupportLevel)


class SourceRef(BaseModel):
    """Source metadata of a cited passage, carried from the input to the output by code."""

    passage_id: str
    title: str | None = None
    url: str | None = None


class ClaimSpan(BaseModel):
    """A claim located in the answer: ``answer[start:end]`` is the claim as written."""

    claim_id: str = ""
    claim_text: str
    start: int
    end: int


class ClaimAudit(BaseModel):
    """One claim and its grade. Field names follow the specification; ``unsupported_part`` is
    our addition that makes "say which part is unsupported" checkable (a span of the claim)."""

    claim_id: str
    claim_text: str
    start: int = Field(description="offset of the claim in the answer")
    end: int
    classification: SupportLevel
    supporting_context_ids: list[str] = Field(default_factory=list)
    supporting_quotes: list[str] = Field(default_factory=list)
    explanation: str
    unsupported_part: str | None = None
    contradicted: bool = False
    contradicting_quote: str | None = None
    sources: list[SourceRef] = Field(default_factory=list)
    source: Source = "judge"
    reason: str | None = Field(default=None, description="why a fallback was used")


class AuditSummary(BaseModel):
    """Counts per category, always recomputed from the claims."""

    total_claims: int = 0
    fully_supported: int = 0
    partially_supported: int = 0
    inferred: int = 0
    unsupported: int = 0
    contradicted: int = 0

    @classmethod
    def of(cls, claims: Sequence[ClaimAudit]) -> AuditSummary:
        counts = {level: 0 for level in SUPPORT_LEVELS}
        for claim in claims:
            counts[claim.classification] += 1
        return cls(
            total_claims=len(claims),
            contradicted=sum(1 for c in claims if c.contradicted),
            **counts,
        )


class ClaimsValue(BaseModel):
    """A validated one-pass or classify reply: claims in answer order, plus warnings."""

    claims: list[ClaimAudit]
    warnings: list[Event] = Field(default_factory=list)
    skipped: list[ClaimSpan] = Field(default_factory=list)
    """Sentences stating a fact that the judge gave no claim; the job grades them as claims."""


class ExtractedValue(BaseModel):
    """A validated extraction reply: claim spans with offsets in the whole answer."""

    claims: list[ClaimSpan]
    skipped: list[ClaimSpan] = Field(default_factory=list)


@dataclass(frozen=True)
class SegmentBatch:
    """One segment of an answer (``answer`` is ``full_answer[offset:offset + len(answer)]``)
    with everything the judge sees beside it."""

    answer: str
    passages: tuple[Passage, ...]
    offset: int = 0
    answer_id: str | None = None
    question: str | None = None
    risk: RiskLevel = RiskLevel.LOW


@dataclass(frozen=True)
class ClaimBatch:
    """Claims to classify against the whole context (the second pass)."""

    claims: tuple[ClaimSpan, ...]
    passages: tuple[Passage, ...]
    answer_id: str | None = None
    question: str | None = None
    risk: RiskLevel = RiskLevel.LOW
    extra: Mapping[str, Any] = field(default_factory=dict)
