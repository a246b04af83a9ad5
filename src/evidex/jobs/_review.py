"""The review side of a job: what a reviewer sees of an item, what they may decide, and how a
decision becomes a golden label.

A review item's payload is stored as JSON; each job reads it back through its own
:class:`ReviewPayload` model (``evidex.jobs._<job>_review``), so the store, the review UI, the
agreement page and the export ask the model, never a string key. The models are lenient on
purpose: every field has a default, unknown keys are kept, and validators read the shapes that
items written before the models existed have (an item still in the queue must still open).

A job's :class:`ReviewKind` (its ``JobDefinition.review``) names its payload model and the
partial template that shows it (``templates/jobs/<job>.html``); :func:`review_kind` finds it by
the item's job, and a job nobody registered gets the plain accept/reject kind.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evidex.errors import InputError
from evidex.types import DEFAULT_TIERS, Passage, TierScheme

__all__ = [
    "VERDICTS",
    "ExportContext",
    "Finding",
    "FlaggedStretch",
    "FormFields",
    "FormVerdict",
    "JudgedPassage",
    "PassageGrade",
    "ReviewKind",
    "ReviewPassage",
    "ReviewPayload",
    "StepAttempts",
]

VERDICTS = ("accept", "reject")
MAX_SHOWN = 60

Pair = tuple[str, str]
"""(reviewer's label, judge's label)."""


class _Lenient(BaseModel):
    """Stored JSON read back: unknown keys kept (newer or older writers), nothing required."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class JudgedPassage(_Lenient):
    """One passage as a judge's stored value names it: its id, and the tier and justification
    when the value gave them (a tier grade, a ranked passage)."""

    passage_id: str = ""
    tier: str | None = None
    justification: str | None = None


class Finding(_Lenient):
    """What the injection screen took a stretch for: its kind and the rule that matched."""

    suspicion: str = ""
    rule: str = ""


class FlaggedStretch(_Lenient):
    """A stretch of a passage that preflight cut from what the judge read, as text aimed at the
    grader: the reviewer reads it (``start``/``end`` index the field as given)."""

    field: str = "text"
    start: int | None = None
    end: int | None = None
    excerpt: str = ""
    found: list[Finding] = Field(default_factory=list)


class ReviewPassage(_Lenient):
    """A passage as the judge read it, stored in full so the reviewer reads the same text, with
    what the screen cut from it (``flagged``)."""

    passage_id: str
    text: str = ""
    title: str | None = None
    url: str | None = None
    flagged: list[FlaggedStretch] = Field(default_factory=list)

    @field_validator("passage_id", mode="before")
    @classmethod
    def _id_text(cls, value: Any) -> Any:
        return str(value) if value is not None else ""


class StepAttempts(_Lenient):
    """One exchange whose replies never validated: its step, its batch and every attempt's
    errors, so an item raised by several steps shows each without the audit log."""

    step: str = ""
    batch_id: str = ""
    reason: str | None = None
    errors: list[list[str]] = Field(default_factory=list)
    last_raw_output: str | None = None
    passage_ids: list[str] = Field(default_factory=list)
    fallback: dict[str, Any] | None = None


@dataclass(frozen=True)
class PassageGrade:
    """The judge's grade of one passage, as the item page shows it next to the passage."""

    grade: str
    justification: str | None = None
    fallback: bool = False


@dataclass(frozen=True)
class ExportContext:
    """What a golden conversion may need besides the item: the job's golden row type (its
    evaluation's, so the review side never names the evaluator's models itself), passage texts
    for items that do not carry them, and the tier scheme the caller names (else the item's
    own)."""

    row: type[BaseModel]
    texts: Mapping[str, str]
    scheme: TierScheme | None = None


class FormFields(Protocol):
    """The item page's submitted controls (see ``service._ui_views.Form``)."""

    def get(self, name: str, default: str = "") -> str: ...

    def all(self, name: str) -> list[str]: ...


class ReviewPayload(_Lenient):
    """What every review item holds: the passages the judge read, and the attempts of every step
    that fell back. A job's model adds its input, its grades and its decisions; the base is the
    kind for a job no definition names (accept or reject)."""

    passages: list[ReviewPassage] = Field(default_factory=list)
    steps: list[StepAttempts] = Field(default_factory=list)
    decision_words: ClassVar[str] = "accept, reject"

    @model_validator(mode="before")
    @classmethod
    def _steps_of_old_items(cls, data: Any) -> Any:
        """Items from before ``steps`` kept one step's attempts at the top level."""
        if not isinstance(data, Mapping) or data.get("steps"):
            return data
        if not any(k in data for k in ("errors", "last_raw_output", "step")):
            return data
        one = {
            "step": data.get("step") or "",
            "errors": data.get("errors") or [],
            "last_raw_output": data.get("last_raw_output"),
            "fallback": data.get("fallback") if isinstance(data.get("fallback"), dict) else None,
        }
        return {**data, "steps": [one]}

    # ------------------------------------------------------------------ what a reviewer reads

    def passage_texts(self) -> dict[str, str]:
        return {p.passage_id: p.text for p in self.passages if p.text}

    def shown_passages(
        self, passage_ids: Sequence[str], context: ExportContext
    ) -> tuple[list[Passage], list[str]]:
        """The passages the reviewer decided on, for a golden record: their texts from the item,
        else from the corpus given to the export; a note for each that neither holds, so an
        incomplete record is said, not silently written."""
        texts = {**context.texts, **self.passage_texts()}
        shown = [p.passage_id for p in self.passages] or list(passage_ids)
        passages = [Passage(passage_id=pid, text=texts[pid]) for pid in shown if texts.get(pid)]
        missing = [f"no text for passage {p!r}; pass the corpus" for p in shown if not texts.get(p)]
        return passages, missing

    def quotes(self) -> dict[str, list[tuple[str, str]]]:
        """The judge's quotes by the passage they cite ("" = any passage), each ``(quote,
        kind)`` with kind ``support`` or ``counter``."""
        return {}

    def grades(self) -> dict[str, PassageGrade]:
        """The judge's grade of each passage it graded."""
        return {}

    def judge_values(self) -> list[str]:
        """Every grade the judge gave on this item, as the page prints them (for checks that
        nothing reads "None")."""
        return [g.grade for g in self.grades().values()]

    # ------------------------------------------------------------------ decisions

    def allowed(self, passage_ids: Sequence[str]) -> str:
        """The decisions this item accepts, in words (the message of a refused one)."""
        return f"allowed: {self.decision_words}"

    def check(self, value: str, passage_ids: Sequence[str]) -> str:
        """``value`` (trimmed, non-empty) as stored, or :class:`InputError` naming what is
        allowed."""
        if value.lower() in VERDICTS:
            return value.lower()
        raise self.not_allowed(value, passage_ids)

    def from_form(self, verdict: str, form: FormFields, passage_ids: Sequence[str]) -> str:
        """The decision the item page's controls stand for (a typed one wins before this), or
        :class:`InputError` naming the control left unchosen: nothing is chosen for the
        reviewer, so a missing choice is refused, never filled in."""
        if not verdict:
            raise missing_choice("the verdict", self.decision_words)
        return verdict

    # ------------------------------------------------------------------ golden labels

    def golden(
        self, item_id: int, decision: str, passage_ids: Sequence[str], context: ExportContext
    ) -> tuple[list[BaseModel], list[str]]:
        """The golden records a resolved item's decision gives, and why a part of it gave none
        (a passage without its text); :class:`InputError` says why the whole item gives none.
        The rows are what the job's evaluator reads (``evidex.evaluate.golden``)."""
        raise InputError("this job has no golden format")

    def pairs(self, decision: str, passage_ids: Sequence[str]) -> tuple[list[Pair], list[str]]:
        """(reviewer, judge) label pairs for agreement, and the labels they range over."""
        return [], []

    agreement_only: ClassVar[frozenset[str]] = frozenset()
    """Units of :meth:`meaning` two reviewers must agree on that are no unit of their kappa
    (an audit's verdict on the answer: its kappa is over claims, as the judge's is)."""

    def meaning(self, decision: str, passage_ids: Sequence[str]) -> dict[str, str]:
        """What a decision (one the item allows) says, unit by unit: a passage, a claim, or
        ``""`` for the whole item. Two reviewers agree when their decisions mean the same, in
        whatever words (``accept`` of the judge's tier is that tier); their kappa pairs the
        units both decided. ``reject`` is a label of its own."""
        return {"": decision.strip().lower()}

    # ------------------------------------------------------------------ helpers

    def not_allowed(self, value: str, passage_ids: Sequence[str]) -> InputError:
        shown = value if len(value) <= MAX_SHOWN else value[: MAX_SHOWN - 3] + "..."
        what = "" if self.job_word == "this" else f"{self.job_word} "
        return InputError(
            f"decision {shown!r} is not allowed for this {what}item; {self.allowed(passage_ids)}"
        )

    job_word: ClassVar[str] = "this"
    subject: ClassVar[str] = "query"
    """The field a golden record cannot do without (the query; classify's input; audit's
    answer): an item without it gives no record."""

    def parse_json(self, value: str, kind: type, passage_ids: Sequence[str]) -> Any:
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            raise InputError(
                f"the decision is not valid JSON ({exc}); {self.allowed(passage_ids)}"
            ) from exc
        if not isinstance(parsed, kind):
            raise self.not_allowed(value, passage_ids)
        return parsed


def per_item(
    mapping: dict[Any, Any], ids: Sequence[str], allowed: Sequence[str], words: tuple[str, str, str]
) -> str:
    """A decision per passage or claim: every key one of ``ids``, every value ``allowed``, and
    every one of ``ids`` given a value (a decision with one left out is refused, not read as
    "the rest as the judge said"). ``words``: what is keyed, what the values are, and how an
    unknown value is called."""
    what, values, unknown = words
    known = set(ids)
    bad_ids = sorted(str(k) for k in mapping if str(k) not in known)
    bad = sorted({str(v) for v in mapping.values() if v not in allowed and v not in ("", None)})
    unset = [i for i in ids if mapping.get(i) in ("", None)]
    if bad_ids or bad or unset or not mapping:
        raise InputError(
            f"a per-{what} decision maps this item's {what} ids ({short(sorted(known))}) to "
            f"{values} ({', '.join(allowed)}); "
            + (f"nothing given for: {short(unset)}; " if unset else "")
            + (f"unknown {what} ids: {short(bad_ids)}; " if bad_ids else "")
            + (f"unknown {unknown}: {short(bad)}" if bad else "")
        )
    return json.dumps(mapping, ensure_ascii=False, sort_keys=True)


def missing_choice(field: str, allowed: str = "") -> InputError:
    """The refusal of a form with ``field`` left unchosen, naming it (and what it takes)."""
    return InputError(
        f"choose {field} before resolving"
        + (f" ({allowed})" if allowed else "")
        + "; nothing was recorded"
    )


@dataclass(frozen=True)
class FormVerdict:
    """How a payload's form turns into a verdict: ``own`` is the verdict of a form that holds
    the reviewer's own answer (labels ticked, ranks typed) with the verdict left empty;
    ``choose`` is what a form without any choice must choose, and how (see
    :func:`missing_choice`); ``nothing_to_accept`` says why ``accept`` is refused on an item
    that holds nothing of the judge's to confirm."""

    own: str
    choose: tuple[str, str]
    nothing_to_accept: str

    def resolve(self, verdict: str, *, entered: bool, can_accept: bool) -> str:
        """The verdict a submitted form stands for; :class:`InputError` when it stands for
        none (no choice), or accepts what is no judgment (a fallback's value)."""
        if not verdict and entered:
            verdict = self.own
        if not verdict:
            raise missing_choice(*self.choose)
        if verdict == "accept" and not can_accept:
            raise InputError(self.nothing_to_accept)
        return verdict


def short(values: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(values[:limit])
    return shown + (f" (+{len(values) - limit} more)" if len(values) > limit else "")


def scheme_of(names: Sequence[str]) -> TierScheme:
    """The tier scheme of an item that names its tiers (else the default one)."""
    from evidex.types import TierDefinition

    if not names or list(names) == list(DEFAULT_TIERS.names):
        return DEFAULT_TIERS
    return TierScheme(
        tiers=tuple(TierDefinition(name=n, definition=n) for n in names), fallback_tier=names[0]
    )


@dataclass(frozen=True)
class ReviewKind:
    """A job's review side, declared once in its definition: the payload model, the partial
    template that shows it and its controls (the model turns decisions into the golden rows
    of the job's evaluator). ``kappa``: whether a decision pairs with the judge's grade (a
    ranking does not)."""

    payload: type[ReviewPayload] = ReviewPayload
    template: str = "jobs/generic.html"
    kappa: bool = True

    def read(self, payload: Any) -> ReviewPayload:
        """The item's payload as the job's model. A payload the model cannot read (hand-made,
        damaged) opens as an empty one rather than failing the page; its keys stay."""
        data = payload if isinstance(payload, Mapping) else {}
        try:
            return self.payload.model_validate(dict(data))
        except ValidationError:
            return self.payload()

    def check(self, item: Mapping[str, Any], decision: str, *, limit: int) -> str:
        """The decision as it will be stored, or :class:`InputError` naming what the item
        allows."""
        payload, ids = self.read(item.get("payload")), _ids(item)
        value = decision.strip()
        if not value:
            raise InputError(f"a decision is required; {payload.allowed(ids)}")
        if len(value) > limit:
            raise InputError(f"a decision has at most {limit} characters")
        return payload.check(value, ids)

    def golden(
        self, item: Mapping[str, Any], context: ExportContext
    ) -> tuple[list[BaseModel], list[str]]:
        payload = self.read(item.get("payload"))
        if not str(getattr(payload, payload.subject, "") or "").strip():
            raise InputError(f"the item's payload has no {payload.subject}")
        decision = str(item.get("decision") or "").strip()
        return payload.golden(int(item["id"]), decision, _ids(item), context)

    def pairs(self, item: Mapping[str, Any]) -> tuple[list[Pair], list[str]]:
        payload = self.read(item.get("payload"))
        return payload.pairs(str(item.get("decision") or "").strip(), _ids(item))

    def meaning(self, item: Mapping[str, Any], decision: str) -> dict[str, str]:
        """What ``decision`` says of ``item``, unit by unit (:meth:`ReviewPayload.meaning`)."""
        return self.read(item.get("payload")).meaning(decision.strip(), _ids(item))

    def units(self, item: Mapping[str, Any], decision: str) -> dict[str, str]:
        """The units of :meth:`meaning` that inter-reviewer kappa pairs."""
        payload = self.read(item.get("payload"))
        said = payload.meaning(decision.strip(), _ids(item))
        return {k: v for k, v in said.items() if k not in payload.agreement_only}


def _ids(item: Mapping[str, Any]) -> list[str]:
    return [str(p) for p in item.get("passage_ids") or []]


GENERIC = ReviewKind()
