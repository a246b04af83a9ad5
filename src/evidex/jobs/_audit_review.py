"""The audit job's review payload: the question, the answer text and its claims with the
judge's grade of each, the decision the policy took, and what a reviewer may decide.

Decisions: a claim status for every claim, a JSON object ``{"claim_id": "status"}``, an answer
decision (``publish``/``review``/``block``), ``accept`` (the judge's grades) or ``reject``.
Claim statuses become an :class:`~evidex.evaluate.golden.AuditGolden` row (a ``contradicted``
claim is an ``unsupported`` one in the golden classes, as the audit spec grades it); an answer
decision or ``reject`` says nothing of the claims, so it gives none.

Items written before this model kept the question under ``query``, no answer text, and (for a
fallback) the claims without a grade beside the fallback's graded ones; the validator reads
them so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, Field, model_validator

from evidex.errors import InputError
from evidex.jobs._review import (
    VERDICTS,
    ExportContext,
    FormFields,
    Pair,
    ReviewKind,
    ReviewPayload,
    _Lenient,
    per_item,
)
from evidex.store import AUDIT_STATUSES

__all__ = ["ANSWER_DECISIONS", "REVIEW", "AuditReview", "ClaimGrade"]

ANSWER_DECISIONS = ("publish", "review", "block")


class ClaimGrade(_Lenient):
    """One claim of the answer and the judge's grade of it (or the fallback's)."""

    claim_id: str = ""
    claim_text: str = ""
    start: int | None = None
    end: int | None = None
    classification: str | None = None
    explanation: str | None = None
    supporting_context_ids: list[str] = Field(default_factory=list)
    supporting_quotes: list[str] = Field(default_factory=list)
    contradicted: bool = False
    contradicting_quote: str | None = None
    source: str | None = None

    @property
    def status(self) -> str | None:
        return "contradicted" if self.contradicted else self.classification

    @property
    def grade(self) -> str:
        """The judge's grade as the page shows it: a status, or that there is none."""
        return self.status or "not graded"

    @property
    def fell_back(self) -> bool:
        return self.source == "fallback"


class AuditReview(ReviewPayload):
    """An audit item: an answer the decision sent to review, or whose grading fell back."""

    answer_id: str | None = None
    question: str | None = None
    answer: str | None = None
    claims: list[ClaimGrade] = Field(default_factory=list)
    decision: dict[str, Any] | None = None
    segment: list[int] | None = None
    job_word: ClassVar[str] = "audit"

    @model_validator(mode="before")
    @classmethod
    def _old_shapes(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        if not data.get("question") and data.get("query"):
            data["question"] = data["query"]
        graded = _fallback_claims(data)
        claims = list(data.get("claims") or [])
        if not claims:
            data["claims"] = list(graded.values())
        else:  # a claim without its grade takes the fallback's grade of it
            data["claims"] = [
                {**graded.get(str(c.get("claim_id")), {}), **c}
                if isinstance(c, Mapping) and not c.get("classification")
                else c
                for c in claims
            ]
        return data

    @property
    def statuses(self) -> tuple[str, ...]:
        return AUDIT_STATUSES

    def judge_values(self) -> list[str]:
        return [c.grade for c in self.claims]

    def quotes(self) -> dict[str, list[tuple[str, str]]]:
        found: dict[str, list[tuple[str, str]]] = {}
        for claim in self.claims:
            cited = claim.supporting_context_ids or [""]
            for quote in claim.supporting_quotes:
                if quote.strip():
                    for pid in cited:
                        found.setdefault(pid, []).append((quote, "support"))
            if claim.contradicting_quote and claim.contradicting_quote.strip():
                found.setdefault("", []).append((claim.contradicting_quote, "counter"))
        return found

    # ------------------------------------------------------------------ decisions

    @property
    def claim_ids(self) -> list[str]:
        return [c.claim_id for c in self.claims if c.claim_id]

    def allowed(self, passage_ids: Sequence[str]) -> str:
        words = (*AUDIT_STATUSES, *ANSWER_DECISIONS, *VERDICTS)
        return f"allowed: {', '.join(words)}, or a JSON object mapping claim ids to statuses"

    def check(self, value: str, passage_ids: Sequence[str]) -> str:
        if value.lower() in (*VERDICTS, *AUDIT_STATUSES, *ANSWER_DECISIONS):
            return value.lower()
        if value.startswith("{"):
            mapping = self.parse_json(value, dict, passage_ids)
            words = ("claim", "claim statuses", "statuses")
            return per_item(mapping, self.claim_ids, AUDIT_STATUSES, words)
        raise self.not_allowed(value, passage_ids)

    def from_form(self, verdict: str, form: FormFields, passage_ids: Sequence[str]) -> str:
        if verdict != "claims":
            return verdict
        mapping = {
            c.claim_id: form.get(f"claim_{i}") for i, c in enumerate(self.claims) if c.claim_id
        }
        return json.dumps(mapping, ensure_ascii=False)

    # ------------------------------------------------------------------ golden labels

    def decided(self, decision: str) -> dict[str, str]:
        """Claim id → the status the decision gives it."""
        judged = {c.claim_id: c.status for c in self.claims if c.status and not c.fell_back}
        if decision.lower() == "accept":
            return {k: str(v) for k, v in judged.items()}
        if decision.lower() in AUDIT_STATUSES:
            return dict.fromkeys(self.claim_ids, decision.lower())
        if decision.startswith("{"):
            return {str(k): str(v) for k, v in json.loads(decision).items()}
        return {}

    def golden(
        self, item_id: int, decision: str, passage_ids: Sequence[str], context: ExportContext
    ) -> tuple[list[BaseModel], list[str]]:
        from evidex.evaluate.golden import AuditClaim, AuditGolden

        if not self.answer:
            raise InputError("the item has no answer text (an item of before the answer was kept)")
        statuses = self.decided(decision)
        if not statuses:
            raise InputError(f"{decision!r} gives no claim a status, so no gold claims")
        claims = [
            AuditClaim(
                claim_text=c.claim_text,
                classification=_golden_class(statuses[c.claim_id]),
                supporting_context_ids=list(c.supporting_context_ids),
            )
            for c in self.claims
            if c.claim_id in statuses and c.claim_text
        ]
        passages, missing = self.shown_passages(passage_ids, context)
        record = AuditGolden(
            id=f"review-{item_id}",
            answer=self.answer,
            passages=passages,
            claims=claims,
        )
        skipped = [f"no status for claim {c!r}" for c in self.claim_ids if c not in statuses]
        return [record], missing + skipped

    def pairs(self, decision: str, passage_ids: Sequence[str]) -> tuple[list[Pair], list[str]]:
        labels = list(AUDIT_STATUSES)
        judged = {c.claim_id: c.status for c in self.claims if c.claim_id and c.status}
        if decision.lower() == "accept":
            mapping = {k: str(v) for k, v in judged.items()}
        elif decision.lower() in labels or decision.startswith("{"):
            mapping = self.decided(decision)
        else:
            return [], labels
        pairs = [(mapping[c], str(judged[c])) for c in judged if c in mapping]
        return [p for p in pairs if p[0] in labels and p[1] in labels], labels


def _golden_class(status: str) -> str:
    return "unsupported" if status == "contradicted" else status


def _fallback_claims(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The graded claims of the fallback values an item holds, by claim id."""
    values = [data.get("fallback")]
    values += [s.get("fallback") for s in data.get("steps") or [] if isinstance(s, Mapping)]
    found: dict[str, dict[str, Any]] = {}
    for value in values:
        if not isinstance(value, Mapping):
            continue
        for claim in value.get("claims") or []:
            if isinstance(claim, Mapping) and claim.get("classification"):
                found[str(claim.get("claim_id"))] = dict(claim)
    return found


REVIEW = ReviewKind(payload=AuditReview, template="jobs/audit.html")
