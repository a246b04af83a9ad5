"""The audit's three steps, each a pure judge exchange run by the harness.

- :class:`AuditStep` (one pass): the judge extracts and classifies the claims of one answer
  segment in a single exchange;
- :class:`ExtractStep` then :class:`ClassifyStep` (two passes): the judge first lists the claims
  of a segment, then classifies batches of claims against the whole context.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from evidex.judging import AuditPayload, ClaimsPayload, ClaimText, ExtractPayload, PassageText
from evidex.tasks.audit.checks import (
    grade_claims,
    locate_claim,
    skipped_sentences,
    sort_found,
    summary_warning,
)
from evidex.tasks.audit.models import (
    SUPPORT_LEVELS,
    ClaimAudit,
    ClaimBatch,
    ClaimSpan,
    ClaimsValue,
    ExtractedValue,
    SegmentBatch,
)
from evidex.tasks.audit.prompts import (
    CLASSIFY_TEMPLATE,
    EXTRACT_TEMPLATE,
    ONE_PASS_TEMPLATE,
    RISK_TEXT,
)
from evidex.tasks.base import (
    BatchInfo,
    ReplyInvalid,
    Salvaged,
    StepBase,
    StepRequest,
    by_last_id,
    exact_array,
    halved,
    passages_block,
    passages_info,
    reply_list,
)
from evidex.types import Passage, RiskLevel

__all__ = ["AuditStep", "ClassifyStep", "ExtractStep", "claim_schema"]


def segment_material(batch: SegmentBatch) -> dict[str, Any]:
    """What identifies an answer segment: its text, where it starts, and the question."""
    return {"answer": batch.answer, "question": batch.question, "offset": batch.offset}


class _GradingMixin(StepBase[Any, ClaimsValue]):
    """What the one-pass and classify steps share: the context block, the reply schema of a
    graded claim, and the checks of one graded claim against the passages. Two attempts: the
    spec's one retry with a stricter schema reminder, then the fallback (review)."""

    @staticmethod
    def _context_material(passages: Sequence[Passage], risk: RiskLevel) -> dict[str, Any]:
        """What identifies the evidence a grading call reads (titles and URLs included: they
        are cited)."""
        return {
            "passages": [[p.passage_id, p.text, p.title, p.url] for p in passages],
            "risk": risk.value,
        }

    @staticmethod
    def _info(
        question: str | None, passages: Sequence[Passage], answer_id: str | None, **extra: Any
    ) -> BatchInfo:
        return passages_info(question or "", passages, {"answer_id": answer_id, **extra})

    @staticmethod
    def _context_values(
        passages: Sequence[Passage], question: str | None, risk: RiskLevel
    ) -> dict[str, str]:
        meta = [
            {"passage_id": p.passage_id, "title": p.title, "url": p.url}
            for p in passages
            if p.title or p.url
        ]
        return {
            "QUESTION": question or "(not given)",
            "CONTEXT": passages_block(passages)
            if passages
            else "[] (no passages: the context is empty)",
            "SOURCE_METADATA": json.dumps(meta, ensure_ascii=False) if meta else "(none)",
            "RISK_LEVEL": RISK_TEXT[risk],
            "LEVELS": " | ".join(SUPPORT_LEVELS),
        }

    def labels(self, value: ClaimsValue) -> Any:
        """Per claim: its id, category and rationale (the spec's classification log)."""
        return [
            {
                "claim_id": c.claim_id,
                "classification": c.classification,
                "contradicted": c.contradicted,
                "explanation": c.explanation,
            }
            for c in value.claims
        ]


class AuditStep(_GradingMixin, name="audit", template=ONE_PASS_TEMPLATE):
    """One pass: the judge extracts the claims of a segment and classifies them."""

    def request(self, batch: SegmentBatch) -> StepRequest:
        values = self._context_values(batch.passages, batch.question, batch.risk)
        values.update(ANSWER=batch.answer, ANSWER_ID=batch.answer_id or "null")
        payload = AuditPayload(
            answer=batch.answer,
            passages=PassageText.of(batch.passages),
            answer_id=batch.answer_id,
            question=batch.question,
            risk=batch.risk.value,
        )
        ids = [p.passage_id for p in batch.passages]
        return StepRequest(
            messages=self.template.render(values),
            schema={
                "type": "object",
                "properties": {
                    "answer_id": {"type": ["string", "null"]},
                    "claims": {"type": "array", "items": claim_schema(ids, with_text=True)},
                },
                "required": ["claims"],
                "additionalProperties": False,
            },
            payload=payload,
            max_tokens=min(
                4096, 200 + len(batch.answer) // 4 + 100 * (1 + len(batch.answer) // 100)
            ),
        )

    def validate(self, batch: SegmentBatch, data: Any) -> ClaimsValue:
        claims, located, errors = sort_found(batch, reply_list(data, "claims"))
        if errors:
            raise ReplyInvalid(errors)
        return ClaimsValue(
            claims=claims,
            warnings=summary_warning(data, claims),
            skipped=skipped_sentences(batch, located),
        )

    def salvage(
        self, batch: SegmentBatch, data: Any, reason: str
    ) -> Salvaged[SegmentBatch, ClaimsValue] | None:
        """The claims of the last reply that are verbatim in the answer and graded validly stay
        the judge's; the rest of the segment goes back to the job as sentences without a claim,
        which the classification pass grades one by one (as for sentences a valid reply left
        out), so the segment is not lost for one bad claim."""
        try:
            claims, located, errors = sort_found(batch, reply_list(data, "claims"))
        except ReplyInvalid:
            return None
        if not claims or not errors:
            return None
        return Salvaged(
            value=ClaimsValue(claims=claims, skipped=skipped_sentences(batch, located)),
            kept=tuple(c.claim_id for c in claims),
            left=batch,
        )

    def fallback(self, batch: SegmentBatch, reason: str) -> ClaimsValue:
        """No claim can be trusted from a reply that never validated, so the segment's
        statement sentences go back to the job as claims of their own, for the classification
        pass to grade one by one; the job sends the answer to review."""
        return ClaimsValue(claims=[], skipped=skipped_sentences(batch, []))

    def cache_material(self, batch: SegmentBatch) -> Any:
        return (
            segment_material(batch)
            | {"answer_id": batch.answer_id}
            | self._context_material(batch.passages, batch.risk)
        )

    def describe(self, batch: SegmentBatch) -> BatchInfo:
        segment = [batch.offset, batch.offset + len(batch.answer)]
        return self._info(batch.question, batch.passages, batch.answer_id, segment=segment)


class ExtractStep(
    StepBase[SegmentBatch, ExtractedValue], name="audit.extract", template=EXTRACT_TEMPLATE
):
    """Two passes, first step: the judge lists the claims of a segment, verbatim."""

    def request(self, batch: SegmentBatch) -> StepRequest:
        values = {"QUESTION": batch.question or "(not given)", "ANSWER": batch.answer}
        return StepRequest(
            messages=self.template.render(values),
            schema={
                "type": "object",
                "properties": {
                    "claims": {"type": "array", "items": {"type": "string", "minLength": 1}}
                },
                "required": ["claims"],
                "additionalProperties": False,
            },
            payload=ExtractPayload(batch.answer, batch.question),
            max_tokens=min(4096, 200 + len(batch.answer) // 2),
        )

    def validate(self, batch: SegmentBatch, data: Any) -> ExtractedValue:
        items = reply_list(data, "claims")
        errors: list[str] = []
        spans: list[ClaimSpan] = []
        cursor: dict[str, int] = {}
        for index, text in enumerate(items):
            span, span_errors = locate_claim(batch.answer, text, f"claims[{index}]", cursor)
            errors += span_errors
            if span is not None and not span_errors:
                spans.append(
                    ClaimSpan(
                        claim_id=f"claim-{len(spans) + 1}",
                        claim_text=span.claim_text,
                        start=span.start + batch.offset,
                        end=span.end + batch.offset,
                    )
                )
        if errors:
            raise ReplyInvalid(errors)
        local = [(s.start - batch.offset, s.end - batch.offset) for s in spans]
        return ExtractedValue(claims=spans, skipped=skipped_sentences(batch, local))

    def fallback(self, batch: SegmentBatch, reason: str) -> ExtractedValue:
        """The judge could not list the claims: the segment's statement sentences stand in."""
        return ExtractedValue(claims=[], skipped=skipped_sentences(batch, []))

    def cache_material(self, batch: SegmentBatch) -> Any:
        return segment_material(batch)

    def describe(self, batch: SegmentBatch) -> BatchInfo:
        return BatchInfo(
            query=batch.question or "",
            extra={
                "answer_id": batch.answer_id,
                "segment": [batch.offset, batch.offset + len(batch.answer)],
            },
        )

    def labels(self, value: ExtractedValue) -> Any:
        return [[c.claim_id, c.start, c.end] for c in value.claims]


class ClassifyStep(_GradingMixin, name="audit.classify", template=CLASSIFY_TEMPLATE):
    """Two passes, second step: classify a batch of already extracted claims."""

    def request(self, batch: ClaimBatch) -> StepRequest:
        values = self._context_values(batch.passages, batch.question, batch.risk)
        values["CLAIMS"] = json.dumps(
            [{"claim_id": c.claim_id, "claim_text": c.claim_text} for c in batch.claims],
            ensure_ascii=False,
            indent=1,
        )
        payload = ClaimsPayload(
            claims=tuple(ClaimText(c.claim_id, c.claim_text) for c in batch.claims),
            passages=PassageText.of(batch.passages),
            question=batch.question,
            risk=batch.risk.value,
        )
        ids = [p.passage_id for p in batch.passages]
        item = claim_schema(ids, with_text=False)
        item["properties"] = {
            "claim_id": {"type": "string", "enum": [c.claim_id for c in batch.claims]},
            **item["properties"],
        }
        item["required"] = ["claim_id", *item["required"]]
        return StepRequest(
            messages=self.template.render(values),
            schema={
                "type": "object",
                "properties": {
                    "claims": exact_array(item, len(batch.claims)),
                },
                "required": ["claims"],
                "additionalProperties": False,
            },
            payload=payload,
            # A claim may cite several long quotes; a reply cut off costs a re-ask, a larger limit
            # costs nothing when unused.
            max_tokens=min(4096, 400 + 320 * len(batch.claims)),
        )

    def validate(self, batch: ClaimBatch, data: Any) -> ClaimsValue:
        graded = grade_claims(batch, data)
        if graded.errors():
            raise ReplyInvalid(graded.errors())
        return ClaimsValue(claims=[graded.valid[i] for i in graded.ids])

    def fallback(self, batch: ClaimBatch, reason: str) -> ClaimsValue:
        """Ungraded claims count as unsupported (the conservative reading), say so, and carry
        ``source="fallback"``; the job routes the answer to review."""
        return ClaimsValue(claims=[_fallback_claim(c, reason) for c in batch.claims])

    def salvage(
        self, batch: ClaimBatch, data: Any, reason: str
    ) -> Salvaged[ClaimBatch, ClaimsValue] | None:
        """Claims are graded one by one, so a claim the judge keeps getting wrong costs only
        itself: the others keep their valid grades (a contradiction found still counts)."""
        graded = grade_claims(batch, data)
        if not graded.worth_salvaging():
            return None
        claims, left = graded.with_fallbacks(
            batch.claims, lambda c: c.claim_id, _fallback_claim, reason
        )
        return Salvaged(
            value=ClaimsValue(claims=claims),
            kept=graded.kept,
            left=dataclasses.replace(batch, claims=left),
        )

    def item_ids(self, batch: ClaimBatch) -> tuple[str, ...]:
        return tuple(c.claim_id for c in batch.claims)

    def halves(self, batch: ClaimBatch) -> tuple[ClaimBatch, ClaimBatch]:
        first, rest = halved(batch.claims)
        return dataclasses.replace(batch, claims=first), dataclasses.replace(batch, claims=rest)

    def joined(self, batch: ClaimBatch, values: Sequence[ClaimsValue]) -> ClaimsValue:
        return ClaimsValue(
            claims=by_last_id(
                [v.claims for v in values], self.item_ids(batch), lambda c: c.claim_id
            ),
            warnings=[w for v in values for w in v.warnings],
        )

    def cache_material(self, batch: ClaimBatch) -> Any:
        return {
            "claims": [[c.claim_id, c.claim_text] for c in batch.claims],
            "question": batch.question,
        } | self._context_material(batch.passages, batch.risk)

    def describe(self, batch: ClaimBatch) -> BatchInfo:
        claims = [c.model_dump() for c in batch.claims]
        return self._info(
            batch.question, batch.passages, batch.answer_id, claims=claims, **dict(batch.extra)
        )


def _fallback_claim(claim: ClaimSpan, reason: str) -> ClaimAudit:
    return ClaimAudit(
        **claim.model_dump(),
        classification="unsupported",
        explanation=f"Fallback: no valid grade ({reason}); counted as unsupported until a "
        "person reviews it.",
        source="fallback",
        reason=reason,
    )


def claim_schema(passage_ids: Sequence[str], *, with_text: bool) -> dict[str, Any]:
    """JSON schema of one graded claim; passage ids are an enum when the context is not empty,
    so a judge with constrained decoding cannot invent one."""
    ids: dict[str, Any] = (
        {"type": "array", "items": {"type": "string", "enum": list(passage_ids)}}
        if passage_ids
        else {"type": "array", "maxItems": 0}
    )
    properties: dict[str, Any] = {
        "supporting_context_ids": ids,
        "supporting_quotes": {"type": "array", "items": {"type": "string"}},
        "explanation": {"type": "string", "minLength": 1},
        "unsupported_part": {"type": ["string", "null"]},
        "contradicted": {"type": "boolean"},
        "contradicting_quote": {"type": ["string", "null"]},
        "classification": {"type": "string", "enum": list(SUPPORT_LEVELS)},
    }
    if with_text:
        properties = {"claim_text": {"type": "string", "minLength": 1}, **properties}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
