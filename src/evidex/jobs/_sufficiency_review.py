"""The sufficiency job's review payload: the query, the judge's verdict (sufficient or not, its
confidence, what it found missing and the quotes it rests on) or the fallback's, and the
decisions.

Decisions: ``sufficient`` or ``insufficient`` (the reviewer's own verdict), ``accept`` (the
judge's verdict) or ``reject`` (the judge's verdict is wrong: its opposite). Every one of them
names a verdict, so each becomes a :class:`SufficiencyGolden` row the job's evaluation reads,
and a (reviewer, judge) pair for agreement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, Field

from evidex.errors import InputError
from evidex.jobs._review import ExportContext, Pair, ReviewKind, ReviewPayload, _Lenient
from evidex.types import Passage

__all__ = ["REVIEW", "SufficiencyGolden", "SufficiencyReview"]

VERDICTS = ("sufficient", "insufficient")


class QuoteRef(_Lenient):
    passage_id: str = ""
    quoted_text: str = ""


class SufficiencyGolden(BaseModel):
    """One query, its passages and whether they suffice to answer it (a person's label)."""

    id: str = Field(min_length=1)
    query: str = Field(min_length=1)
    passages: list[Passage]
    sufficient: bool


class SufficiencyReview(ReviewPayload):
    """A sufficiency item: an escalated verdict, or a call that fell back (no verdict)."""

    query: str = ""
    sufficient: bool | None = None
    confidence: float | None = None
    missing: list[str] = Field(default_factory=list)
    supporting_passage_ids: list[str] = Field(default_factory=list)
    key_quotes: list[QuoteRef] = Field(default_factory=list)
    decision: str | None = None
    """What the policy decided (escalate, when a person is asked)."""
    decision_words: ClassVar[str] = "sufficient, insufficient, accept (the judge's verdict), reject"
    job_word: ClassVar[str] = "sufficiency"

    @property
    def verdict(self) -> str | None:
        """The judge's verdict in one word; None when no valid judgment was obtained."""
        if self.sufficient is None or (self.steps and self.confidence in (None, 0.0)):
            return None
        return VERDICTS[0] if self.sufficient else VERDICTS[1]

    @property
    def judge_word(self) -> str:
        return self.verdict or "no verdict (fallback)"

    def judge_values(self) -> list[str]:
        return [self.judge_word]

    def quotes(self) -> dict[str, list[tuple[str, str]]]:
        found: dict[str, list[tuple[str, str]]] = {}
        for q in self.key_quotes:
            if q.quoted_text.strip():
                found.setdefault(q.passage_id, []).append((q.quoted_text, "support"))
        return found

    def check(self, value: str, passage_ids: Sequence[str]) -> str:
        word = value.lower()
        if word in VERDICTS:
            return word
        if word in ("accept", "reject"):
            if self.verdict is None:
                raise InputError(
                    "the judge gave no verdict on this item (it fell back): decide "
                    "sufficient or insufficient"
                )
            return word
        raise self.not_allowed(value, passage_ids)

    def decided(self, decision: str) -> bool | None:
        """The verdict a decision names (None: none)."""
        word = decision.lower()
        if word in VERDICTS:
            return word == VERDICTS[0]
        if self.verdict is None or word not in ("accept", "reject"):
            return None
        judged = self.verdict == VERDICTS[0]
        return judged if word == "accept" else not judged

    def golden(
        self, item_id: int, decision: str, passage_ids: Sequence[str], context: ExportContext
    ) -> tuple[list[BaseModel], list[str]]:
        verdict = self.decided(decision)
        if verdict is None:
            raise InputError(f"{decision!r} names no verdict, so no gold label")
        passages, missing = self.shown_passages(passage_ids, context)
        record = context.row(
            id=f"review-{item_id}", query=self.query, passages=passages, sufficient=verdict
        )
        return [record], missing

    def pairs(self, decision: str, passage_ids: Sequence[str]) -> tuple[list[Pair], list[str]]:
        verdict = self.decided(decision)
        if self.verdict is None or verdict is None:
            return [], list(VERDICTS)
        gold = VERDICTS[0] if verdict else VERDICTS[1]
        return [(gold, self.verdict)], list(VERDICTS)

    def meaning(self, decision: str, passage_ids: Sequence[str]) -> dict[str, str]:
        """The verdict a decision names, as one unit (``reject``: the judge's opposite)."""
        verdict = self.decided(decision)
        if verdict is None:
            return super().meaning(decision, passage_ids)
        return {"": VERDICTS[0] if verdict else VERDICTS[1]}


REVIEW = ReviewKind(payload=SufficiencyReview, template="jobs/sufficiency.html")
