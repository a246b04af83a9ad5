"""The stages of the audit job: the passes over an answer's segments and claim batches.

Each stage is a step over batches run through the job's :class:`~evidex.harness.job.JobRun`;
this module decides which stages run and merges their claims, nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from evidex.errors import InputError
from evidex.harness.assemble import stamped
from evidex.harness.job import JobRun
from evidex.harness.runner import Outcome
from evidex.tasks.audit import (
    CLASSIFY_TEMPLATE,
    ONE_PASS_TEMPLATE,
    AuditStep,
    ClaimAudit,
    ClaimBatch,
    ClaimSpan,
    ClassifyStep,
    ExtractStep,
    SegmentBatch,
)
from evidex.tasks.base import PromptTemplate
from evidex.tasks.spans import find_span
from evidex.types import Event, Passage, RiskLevel

if TYPE_CHECKING:
    from evidex.jobs.audit import AnswerInput

__all__ = ["BUILTIN_PROMPTS", "AuditPrompts", "Stages", "UnauditedSpan", "given_claims"]


@dataclass(frozen=True)
class AuditPrompts:
    """The templates of the two grading steps: ``one_pass`` (extract and grade at once) and
    ``grading`` (grade given or extracted claims). A custom prompt replaces the one its mode
    grades with; claim extraction keeps the built-in wording."""

    one_pass: PromptTemplate = ONE_PASS_TEMPLATE
    grading: PromptTemplate = CLASSIFY_TEMPLATE


BUILTIN_PROMPTS = AuditPrompts()


class UnauditedSpan(BaseModel):
    """A part of the answer whose claims no judge reply could give and that has no statement
    sentence to grade in their place (a segment's sentences otherwise become its claims): it
    went to review."""

    start: int
    end: int
    reason: str
    review_item_id: int | None = None


@dataclass
class Stages:
    """The passes of one answer."""

    run: JobRun
    item: AnswerInput
    passages: tuple[Passage, ...]
    claims_per_batch: int
    risk: RiskLevel
    prompts: AuditPrompts = BUILTIN_PROMPTS

    async def classify(self, spans: list[ClaimSpan]) -> list[ClaimAudit]:
        """Grade claims in batches of at most ``claims_per_batch``, smaller for a judge whose
        claim batches keep failing (:meth:`JobRun.map_sized`)."""

        def batch(claims: Sequence[ClaimSpan]) -> ClaimBatch:
            return ClaimBatch(
                tuple(claims), self.passages, self.item.answer_id, self.item.question, self.risk
            )

        step = ClassifyStep(self.prompts.grading)
        found = await self.run.map_sized(step, spans, batch, self.claims_per_batch, progress=False)
        return _with_source(found)

    async def one_pass(
        self, segments: Sequence[SegmentBatch], events: list[Event]
    ) -> tuple[list[ClaimAudit], list[UnauditedSpan]]:
        """Extract and grade at once; sentences the judge left out are graded on their own."""
        found = await self.run.map(AuditStep(self.prompts.one_pass), segments, progress=False)
        unaudited = _unaudited(segments, found)
        for outcome in found:
            for warning in outcome.value.warnings:
                self.run.log(warning)
                events.append(warning)
        skipped = self._skipped(found, events)
        claims = _with_source(found)
        if skipped:
            claims += await self.classify(skipped)
        return _renumbered(claims), unaudited

    async def two_pass(
        self, segments: Sequence[SegmentBatch], events: list[Event]
    ) -> tuple[list[ClaimAudit], list[UnauditedSpan]]:
        """Extract claims first, then grade them in batches."""
        extracted = await self.run.map(ExtractStep(), segments, progress=False)
        unaudited = _unaudited(segments, extracted)
        found_spans = [c for o in extracted for c in o.value.claims]
        spans = _renumbered_spans(found_spans + self._skipped(extracted, events))
        return await self.classify(spans), unaudited

    def _skipped(self, outcomes: Sequence[Outcome[Any]], events: list[Event]) -> list[ClaimSpan]:
        """Sentences the judge gave no claim, to be graded as claims of their own; noted in
        the audit log and the result's events, so a judge that skips is visible."""
        skipped: list[ClaimSpan] = [s for o in outcomes for s in o.value.skipped]
        if skipped:
            event = Event(
                kind="sentences_without_claims",
                detail=f"the judge gave no claim for {len(skipped)} sentence(s) that state a "
                "fact; each is graded as one claim",
                data={"sentences": [[s.start, s.end] for s in skipped]},
            )
            self.run.log(event)
            events.append(event)
        return skipped


def given_claims(answer: str, texts: Sequence[str]) -> list[ClaimSpan]:
    """Claims split by the caller: each must be verbatim in the answer (a usage error if not)."""
    spans: list[ClaimSpan] = []
    cursor = 0
    for index, text in enumerate(texts, 1):
        span = find_span(answer, text, cursor) or find_span(answer, text)
        if span is None:
            raise InputError(f"claim {index} ({text[:80]!r}) is not verbatim in the answer")
        cursor = span[1]
        spans.append(
            ClaimSpan(
                claim_id=f"claim-{index}",
                claim_text=answer[span[0] : span[1]],
                start=span[0],
                end=span[1],
            )
        )
    return spans


def _unaudited(
    segments: Sequence[SegmentBatch], outcomes: Sequence[Outcome[Any]]
) -> list[UnauditedSpan]:
    return [
        UnauditedSpan(
            start=s.offset,
            end=s.offset + len(s.answer),
            reason=o.reason or "fallback",
            review_item_id=o.review_item_id,
        )
        for s, o in zip(segments, outcomes, strict=True)
        # a segment is covered when the fallback kept claims or handed on sentences to grade
        if o.source == "fallback" and not o.kept and not o.value.skipped
    ]


def _with_source(outcomes: Sequence[Outcome[Any]]) -> list[ClaimAudit]:
    """Claims marked with where their batch's value came from (judge, cache or fallback)."""
    return stamped(outcomes, _claims)


def _claims(value: Any) -> list[ClaimAudit]:
    return list(value.claims)


def _renumbered(claims: Sequence[ClaimAudit]) -> list[ClaimAudit]:
    """Claims in answer order, numbered ``claim-1`` ... across segments."""
    ordered = sorted(claims, key=lambda c: (c.start, c.end))
    return [c.model_copy(update={"claim_id": f"claim-{i}"}) for i, c in enumerate(ordered, 1)]


def _renumbered_spans(spans: Sequence[ClaimSpan]) -> list[ClaimSpan]:
    ordered = sorted(spans, key=lambda c: (c.start, c.end))
    return [c.model_copy(update={"claim_id": f"claim-{i}"}) for i, c in enumerate(ordered, 1)]
