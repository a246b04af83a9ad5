"""The tier job's review payload: the query, the tiers of its scheme, the judge's grade (a
high-risk sample) or the fallback's, and what a reviewer may decide.

Decisions: a tier name (every passage of the item), a JSON object ``{"passage_id": "tier"}``,
``accept`` (the judge's tier was right; a fallback has none to accept) or ``reject`` (says
only what the tier is not). Each decided passage becomes a :class:`~evidex.evaluate.golden.
TierGolden` row, the text taken from the payload or the caller's corpus.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, Field

from evidex.errors import InputError
from evidex.jobs._review import (
    VERDICTS,
    ExportContext,
    FormFields,
    JudgedPassage,
    Pair,
    PassageGrade,
    ReviewKind,
    ReviewPayload,
    _Lenient,
    missing_choice,
    per_item,
    scheme_of,
    short,
)
from evidex.types import DEFAULT_TIERS

__all__ = ["REVIEW", "TierGrade", "TierReview"]


class TierGrade(JudgedPassage):
    """One passage's tier, as the judge (or the fallback) gave it."""

    key_evidence_snippet: str | None = None
    confidence: float | None = None
    source: str | None = None
    text: str | None = None


class TierFallbackValue(_Lenient):
    classifications: list[TierGrade] = Field(default_factory=list)


class TierReview(ReviewPayload):
    """A tier item: a sampled top-tier grade (``assignment``) or a batch that fell back."""

    query: str = ""
    tiers: list[str] = Field(default_factory=list)
    assignment: TierGrade | None = None
    fallback: TierFallbackValue | None = None
    job_word: ClassVar[str] = "tier"

    @property
    def names(self) -> list[str]:
        return list(self.tiers) or list(DEFAULT_TIERS.names)

    @property
    def judged(self) -> TierGrade | None:
        """The judge's own grade, if the item has one (a fallback's tier is no grade)."""
        a = self.assignment
        return a if a is not None and a.tier and a.source != "fallback" else None

    def grades(self) -> dict[str, PassageGrade]:
        found: dict[str, PassageGrade] = {}
        every = [*(self.fallback.classifications if self.fallback else [])]
        every += [self.assignment] if self.assignment is not None else []
        for a in every:
            if a.tier:
                fell_back = a.source == "fallback" or a is not self.assignment
                found[a.passage_id] = PassageGrade(a.tier, a.justification, fell_back)
        return found

    def quotes(self) -> dict[str, list[tuple[str, str]]]:
        found: dict[str, list[tuple[str, str]]] = {}
        every = [*(self.fallback.classifications if self.fallback else [])]
        every += [self.assignment] if self.assignment is not None else []
        for a in every:
            if a.key_evidence_snippet and a.key_evidence_snippet.strip():
                found.setdefault(a.passage_id, []).append((a.key_evidence_snippet, "support"))
        return found

    # ------------------------------------------------------------------ decisions

    def allowed(self, passage_ids: Sequence[str]) -> str:
        return (
            f"allowed: {', '.join((*self.names, *VERDICTS))}, or a JSON object mapping passage "
            "ids to tiers"
        )

    def check(self, value: str, passage_ids: Sequence[str]) -> str:
        if value.lower() in VERDICTS:
            return value.lower()
        if value in self.names:
            return value
        if value.startswith("{"):
            mapping = self.parse_json(value, dict, passage_ids)
            return per_item(mapping, passage_ids, self.names, ("passage", "tiers", "tiers"))
        raise self.not_allowed(value, passage_ids)

    def from_form(self, verdict: str, form: FormFields, passage_ids: Sequence[str]) -> str:
        """The verdict (a tier for every passage, ``accept``, ``reject``), or a tier per
        passage where one is chosen (the rest take the verdict's tier). Refused: no choice, a
        passage left without a tier, ``accept`` where the judge gave no grade."""
        chosen = {
            pid: form.get(f"tier_p{i}")
            for i, pid in enumerate(passage_ids)
            if form.get(f"tier_p{i}")
        }
        if verdict == "accept" and self.judged is None:
            raise InputError(
                "this item has no judge grade to confirm (the judge's replies never "
                "validated); choose the tier yourself"
            )
        if not chosen:
            if not verdict:
                raise missing_choice("the tier", ", ".join((*self.names, "reject")))
            return verdict
        base = verdict if verdict in self.names else None
        lacking = [pid for pid in passage_ids if not chosen.get(pid) and base is None]
        if lacking:
            raise missing_choice(
                f"the tier of {short(lacking)}", "or one tier above for every passage"
            )
        return json.dumps({pid: chosen.get(pid) or base for pid in passage_ids}, ensure_ascii=False)

    # ------------------------------------------------------------------ golden labels

    def decided(
        self, decision: str, passage_ids: Sequence[str], names: Sequence[str]
    ) -> dict[str, str]:
        """Passage id → the tier the decision gives it."""
        if decision in names:
            return dict.fromkeys(passage_ids, decision)
        if decision.lower() == "accept":
            a = self.assignment
            if a is None or a.tier not in names:
                raise InputError(
                    "'accept' on an item without a graded tier (a fallback) says no tier"
                )
            return {a.passage_id or (passage_ids[0] if passage_ids else ""): str(a.tier)}
        if decision.lower() == "reject":
            raise InputError("'reject' says what the tier is not, not what it is")
        if decision.startswith("{"):
            try:
                mapping = json.loads(decision)
            except ValueError as exc:
                raise InputError(f"the decision is not valid JSON: {exc}") from exc
            bad = {k: v for k, v in mapping.items() if v not in names}
            if bad:
                raise InputError(f"decision tiers {bad} are not among {list(names)}")
            return {str(k): str(v) for k, v in mapping.items()}
        raise InputError(f"decision {decision!r} is not a tier of {list(names)}, accept or reject")

    def golden(
        self, item_id: int, decision: str, passage_ids: Sequence[str], context: ExportContext
    ) -> tuple[list[BaseModel], list[str]]:
        query = self.query.strip()
        names = (context.scheme or scheme_of(self.tiers)).names
        known = self.passage_texts()
        if self.assignment is not None and self.assignment.text:
            known[self.assignment.passage_id] = self.assignment.text
        records: list[BaseModel] = []
        missing = []
        for pid, tier in self.decided(decision, passage_ids, names).items():
            text = known.get(pid) or context.texts.get(pid)
            if not text:
                missing.append(pid)
                continue
            records.append(context.row(query=query, passage_id=pid, text=text, tier=tier))
        return records, [f"no text for passage {p!r}; pass the corpus" for p in missing]

    def pairs(self, decision: str, passage_ids: Sequence[str]) -> tuple[list[Pair], list[str]]:
        names = scheme_of(self.tiers).names
        judged = self.judged
        if judged is None:
            return [], list(names)
        try:
            decided = self.decided(decision, passage_ids, names)
        except InputError:
            return [], list(names)
        pairs = [(t, str(judged.tier)) for pid, t in decided.items() if pid == judged.passage_id]
        return [p for p in pairs if p[1] in names], list(names)

    def meaning(self, decision: str, passage_ids: Sequence[str]) -> dict[str, str]:
        """Passage id → tier (``reject``: every passage ``reject``)."""
        if decision.lower() == "reject":
            return dict.fromkeys(passage_ids or [""], "reject")
        try:
            return self.decided(decision, passage_ids, scheme_of(self.tiers).names)
        except InputError:
            return super().meaning(decision, passage_ids)


REVIEW = ReviewKind(payload=TierReview, template="jobs/tier.html")
