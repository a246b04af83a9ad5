"""The classify job's review payload: the input, the taxonomy's labels, the judge's answer (the
label in question, with its confidence and evidence) or the fallback's, and the decisions.

Decisions: a label of the taxonomy, a JSON array of them (each at most once), ``accept`` (the
judge's label), ``unclassifiable`` or ``reject``. A label decision becomes a
:class:`~evidex.evaluate.golden.ClassifyGolden` row; ``unclassifiable`` and ``reject`` name no
label of the taxonomy, so they give none (and say so).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, Field, model_validator

from evidex.errors import InputError
from evidex.jobs._review import (
    VERDICTS,
    ExportContext,
    FormFields,
    FormVerdict,
    Pair,
    ReviewKind,
    ReviewPayload,
    _Lenient,
    missing_choice,
    short,
)

__all__ = ["REVIEW", "ClassifyReview", "LabelGrade"]

UNCLASSIFIABLE = "unclassifiable"


class EvidenceRef(_Lenient):
    passage_id: str = ""
    quoted_text: str | None = None
    rationale: str | None = None


class LabelGrade(_Lenient):
    """One label the judge assigned, with its confidence and the evidence it cited."""

    label: str = ""
    confidence: float | None = None
    supporting_evidence: list[EvidenceRef] = Field(default_factory=list)
    counter_evidence: list[EvidenceRef] = Field(default_factory=list)


class ClassifyAnswer(_Lenient):
    """The judge's (or the fallback's) whole answer."""

    classifications: list[LabelGrade] = Field(default_factory=list)
    unclassifiable: bool = False
    unclassifiable_reason: str | None = None
    evidence_gaps: list[str] = Field(default_factory=list)
    source: str | None = None


class ClassifyReview(ReviewPayload):
    """A classify item: a label routed for its confidence or its evidence (``assignment``), an
    answer with no label (``result``), or a call that fell back (``fallback``)."""

    input: str = ""
    labels: list[str] = Field(default_factory=list)
    label: str | None = None
    assignment: LabelGrade | None = None
    result: ClassifyAnswer | None = None
    fallback: ClassifyAnswer | None = None
    job_word: ClassVar[str] = "classify"
    subject: ClassVar[str] = "input"

    @model_validator(mode="before")
    @classmethod
    def _input_of_old_fallbacks(cls, data: Any) -> Any:
        """A fallback item of before named its input ``query`` (the batch's description)."""
        if isinstance(data, dict) and not data.get("input") and data.get("query"):
            return {**data, "input": data["query"]}
        return data

    @property
    def answer(self) -> ClassifyAnswer | None:
        return self.result or self.fallback

    @property
    def taxonomy(self) -> list[str]:
        """The labels a reviewer chooses from (an item of before named only those it used)."""
        if self.labels:
            return list(self.labels)
        found = [self.label] if self.label else []
        found += [a.label for a in (self.answer.classifications if self.answer else [])]
        return list(dict.fromkeys(x for x in found if x))

    @property
    def judge_grades(self) -> list[LabelGrade]:
        """What the judge said: the label in question, else every label of its answer."""
        if self.assignment is not None:
            return [self.assignment]
        return list(self.result.classifications) if self.result else []

    @property
    def judge_word(self) -> str:
        """The judge's answer in one word, for the page: its label(s), ``unclassifiable``, or
        the fallback's ``unclassifiable (fallback)``."""
        if self.judge_grades:
            return ", ".join(g.label for g in self.judge_grades)
        if self.fallback is not None and self.result is None:
            return f"{UNCLASSIFIABLE} (fallback)"
        return UNCLASSIFIABLE

    def judge_values(self) -> list[str]:
        return [self.judge_word]

    def quotes(self) -> dict[str, list[tuple[str, str]]]:
        found: dict[str, list[tuple[str, str]]] = {}
        grades = list(self.answer.classifications) if self.answer else []
        for a in grades or ([self.assignment] if self.assignment else []):
            for kind, refs in (("support", a.supporting_evidence), ("counter", a.counter_evidence)):
                for e in refs:
                    if e.quoted_text and e.quoted_text.strip():
                        found.setdefault(e.passage_id, []).append((e.quoted_text, kind))
        return found

    # ------------------------------------------------------------------ decisions

    def allowed(self, passage_ids: Sequence[str]) -> str:
        words = (*self.taxonomy, *VERDICTS, UNCLASSIFIABLE)
        return f"allowed: {', '.join(words)}, or a JSON array of labels"

    def check(self, value: str, passage_ids: Sequence[str]) -> str:
        labels = self.taxonomy
        if value.lower() in (*VERDICTS, UNCLASSIFIABLE):
            return value.lower()
        if value in labels:
            return value
        if value.startswith("["):
            chosen = self.parse_json(value, list, passage_ids)
            bad = sorted({str(v) for v in chosen if v not in labels})
            if bad or not chosen or len(set(chosen)) != len(chosen):
                raise InputError(
                    f"a list of labels names each label of the taxonomy at most once "
                    f"({', '.join(labels) or 'none known'}); not allowed: {short(bad)}"
                )
            return json.dumps(chosen, ensure_ascii=False)
        raise self.not_allowed(value, passage_ids)

    def from_form(self, verdict: str, form: FormFields, passage_ids: Sequence[str]) -> str:
        """The label(s) ticked, ``accept``, ``unclassifiable`` or ``reject``; a ticked label
        is a choice of labels. Refused: no choice, no label ticked for a label verdict,
        ``accept`` where the judge gave no label."""
        chosen = [c for c in form.all("label") if c]
        verdict = _FORM.resolve(verdict, entered=bool(chosen), can_accept=bool(self.judge_grades))
        if verdict != "labels":
            return verdict
        if not chosen:
            raise missing_choice("a label", "tick one or more of the taxonomy's labels")
        if len(chosen) == 1:
            return chosen[0]
        return json.dumps(chosen, ensure_ascii=False)

    # ------------------------------------------------------------------ golden labels

    def decided(self, decision: str) -> list[str]:
        """The gold labels a decision names (empty: it names none of the taxonomy)."""
        if decision.lower() == "accept":
            return [g.label for g in self.judge_grades if g.label]
        if decision in self.taxonomy:
            return [decision]
        if decision.startswith("["):
            return [str(x) for x in json.loads(decision)]
        return []

    def golden(
        self, item_id: int, decision: str, passage_ids: Sequence[str], context: ExportContext
    ) -> tuple[list[BaseModel], list[str]]:
        labels = self.decided(decision)
        if not labels:
            raise InputError(f"{decision!r} names no label of the taxonomy, so no gold label")
        passages, missing = self.shown_passages(passage_ids, context)
        rationale = []
        if decision.lower() == "accept":
            rationale = [e.passage_id for g in self.judge_grades for e in g.supporting_evidence]
        record = context.row(
            id=f"review-{item_id}",
            input=self.input,
            passages=passages,
            labels=labels,
            rationale_ids=list(dict.fromkeys(rationale)),
        )
        return [record], missing

    def pairs(self, decision: str, passage_ids: Sequence[str]) -> tuple[list[Pair], list[str]]:
        labels = [*self.taxonomy, UNCLASSIFIABLE]
        judge = self.label
        if not judge or judge not in labels:
            return [], labels
        gold: str | None = None
        if decision.lower() == "accept":
            gold = judge
        elif decision.lower() == UNCLASSIFIABLE:
            gold = UNCLASSIFIABLE
        elif decision in labels:
            gold = decision
        elif decision.startswith("["):
            chosen = [str(x) for x in json.loads(decision)]
            gold = judge if judge in chosen else (chosen[0] if chosen else None)
        return ([(gold, judge)] if gold in labels else []), labels

    def meaning(self, decision: str, passage_ids: Sequence[str]) -> dict[str, str]:
        """The label (several: joined with " + ", in order) as one unit, ``unclassifiable``
        or ``reject``."""
        try:
            labels = self.decided(decision)
        except ValueError:
            labels = []
        if labels:
            return {"": " + ".join(sorted(set(labels)))}
        return super().meaning(decision, passage_ids)


# This kind's review form in words; the rule is FormVerdict's (one for every kind).
_FORM = FormVerdict(
    own="labels",
    choose=("the label", "tick a label, or choose accept, unclassifiable or reject"),
    nothing_to_accept="this item has no judge label to confirm (the judge gave none, or its "
    "replies never validated); choose the label yourself",
)


REVIEW = ReviewKind(payload=ClassifyReview, template="jobs/classify.html")
