"""The audit job's review payload: the question, the answer text and its claims with the
judge's grade of each, the decision the policy took, and what a reviewer may decide.

Decisions: the reviewer's verdict on the answer with a status for every claim,
``{"verdict": "publish" | "block", "claims": {"claim_id": "status", ...}}`` (what the review
page records; a bare ``publish`` or ``block`` only for an answer without claims), or ``reject``
(the judge's output is unusable). The API also takes claim statuses alone: one status for every
claim, a JSON object naming a status for *every* claim, or ``accept`` (the judge's grades). A
decision that leaves a claim without a status is refused. Claim statuses become an
:class:`~evidex.evaluate.golden.AuditGolden` row (a ``contradicted`` claim is an
``unsupported`` one in the golden classes, as the audit spec grades it); ``reject`` says
nothing of the claims, so it gives none.

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
    missing_choice,
    per_item,
    short,
)
from evidex.types import AUDIT_STATUSES

__all__ = ["ANSWER_DECISIONS", "REVIEW", "AuditReview", "ClaimGrade"]

ANSWER_DECISIONS = ("publish", "review", "block")
REVIEWER_VERDICTS = ("publish", "block")
"""What a reviewer decides of the answer (``review`` is where it already is), besides
``reject``."""


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
    subject: ClassVar[str] = "answer"

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
        verdicts = "/".join(REVIEWER_VERDICTS)
        return (
            f'allowed: {{"verdict": "{verdicts}", "claims": {{claim id: status}}}} naming every '
            f"claim ({short(self.claim_ids) or 'none'}), reject, accept, one status for every "
            f"claim ({', '.join(AUDIT_STATUSES)}), or a JSON object mapping every claim id to "
            "a status"
            + (f", or a bare {verdicts} (the answer has no claims)" if not self.claim_ids else "")
        )

    def check(self, value: str, passage_ids: Sequence[str]) -> str:
        word = value.lower()
        if word in REVIEWER_VERDICTS and self.claim_ids:
            raise InputError(
                f"a {word} decision names a status for every claim; {self.allowed(passage_ids)}"
            )
        if word in (*VERDICTS, *AUDIT_STATUSES, *REVIEWER_VERDICTS):
            return word
        if value.startswith("{"):
            mapping = self.parse_json(value, dict, passage_ids)
            if set(mapping) == {"verdict", "claims"}:
                return self._check_verdict(mapping, value, passage_ids)
            words = ("claim", "claim statuses", "statuses")
            return per_item(mapping, self.claim_ids, AUDIT_STATUSES, words)
        raise self.not_allowed(value, passage_ids)

    def _check_verdict(self, mapping: dict[str, Any], value: str, ids: Sequence[str]) -> str:
        verdict, claims = str(mapping["verdict"]).lower(), mapping["claims"]
        if verdict not in REVIEWER_VERDICTS or not isinstance(claims, dict):
            raise self.not_allowed(value, ids)
        if not self.claim_ids and not claims:
            return verdict
        words = ("claim", "claim statuses", "statuses")
        statuses = json.loads(per_item(claims, self.claim_ids, AUDIT_STATUSES, words))
        decided = {"verdict": verdict, "claims": statuses}
        return json.dumps(decided, ensure_ascii=False, sort_keys=True)

    def from_form(self, verdict: str, form: FormFields, passage_ids: Sequence[str]) -> str:
        """``reject``, or the verdict (publish or block) with the status chosen for every
        claim; a verdict or a claim status left unchosen is refused, naming it."""
        if not verdict:
            raise missing_choice("the verdict", ", ".join((*REVIEWER_VERDICTS, "reject")))
        if verdict not in REVIEWER_VERDICTS:
            return verdict
        lacking = [
            f"claim {i + 1} ({c.claim_text[:40]!r})"
            for i, c in enumerate(self.claims)
            if c.claim_id and not form.get(f"claim_{i}").strip()
        ]
        if lacking:
            raise missing_choice(f"the status of {short(lacking, 4)}", ", ".join(AUDIT_STATUSES))
        mapping = {
            c.claim_id: form.get(f"claim_{i}").strip()
            for i, c in enumerate(self.claims)
            if c.claim_id
        }
        if not mapping:
            return verdict
        return json.dumps({"verdict": verdict, "claims": mapping}, ensure_ascii=False)

    # ------------------------------------------------------------------ golden labels

    def decided(self, decision: str) -> dict[str, str]:
        """Claim id → the status the decision gives it."""
        judged = {c.claim_id: c.status for c in self.claims if c.status and not c.fell_back}
        if decision.lower() == "accept":
            return {k: str(v) for k, v in judged.items()}
        if decision.lower() in AUDIT_STATUSES:
            return dict.fromkeys(self.claim_ids, decision.lower())
        if decision.startswith("{"):
            parsed = json.loads(decision)
            if set(parsed) == {"verdict", "claims"} and isinstance(parsed["claims"], dict):
                parsed = parsed["claims"]
            return {str(k): str(v) for k, v in parsed.items()}
        return {}

    def golden(
        self, item_id: int, decision: str, passage_ids: Sequence[str], context: ExportContext
    ) -> tuple[list[BaseModel], list[str]]:
        statuses = self.decided(decision)
        if not statuses:
            raise InputError(f"{decision!r} gives no claim a status, so no gold claims")
        claims = [
            {
                "claim_text": c.claim_text,
                "classification": _golden_class(statuses[c.claim_id]),
                "supporting_context_ids": list(c.supporting_context_ids),
            }
            for c in self.claims
            if c.claim_id in statuses and c.claim_text
        ]
        passages, missing = self.shown_passages(passage_ids, context)
        record = context.row(
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

    agreement_only: ClassVar[frozenset[str]] = frozenset({"verdict"})

    def meaning(self, decision: str, passage_ids: Sequence[str]) -> dict[str, str]:
        """The verdict on the answer (``verdict``: publish, block, reject, or "" where the
        decision gives claim statuses alone) and each claim's status by claim id; ``reject``
        says ``reject`` of every claim."""
        word = decision.lower()
        if word == "reject":
            return {"verdict": "reject", **dict.fromkeys(self.claim_ids, "reject")}
        verdict = word if word in REVIEWER_VERDICTS else ""
        if decision.startswith("{"):
            parsed = json.loads(decision)
            if isinstance(parsed, dict) and set(parsed) == {"verdict", "claims"}:
                verdict = str(parsed["verdict"]).lower()
        return {"verdict": verdict, **self.decided(decision)}


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
