"""What the audit job takes: its options (declared once, for every surface) and its answers.

The answers of one call are checked together (:func:`answer_inputs`): each gets its id
(``answer-N`` by position when it has none), and an id used twice is an input error, since
results and review items are joined back by it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evidex.errors import InputError
from evidex.jobs._audit_policy import AuditPolicy
from evidex.jobs._definition import RiskOptions
from evidex.jobs._fields import Flag, Wire
from evidex.preflight import require_text
from evidex.types import Passage, RiskLevel

__all__ = [
    "DEFAULT_CLAIMS_PER_BATCH",
    "DEFAULT_SEGMENT_TOKENS",
    "AnswerInput",
    "AuditOptions",
    "AuditOptionsModel",
    "Mode",
    "answer_inputs",
]

Mode = Literal["one-pass", "two-pass"]
DEFAULT_SEGMENT_TOKENS = 400
"""Answer tokens per judge call: a long answer is cut at sentence ends into segments this big,
so every claim fits in one reply and nothing is lost to a length limit."""
DEFAULT_CLAIMS_PER_BATCH = 8


class AuditOptions(TypedDict, total=False):
    """The audit job's options as keywords of the library call (for type checkers); each is
    declared, with its default, bounds and help, in :class:`AuditOptionsModel`, and a test
    keeps the two in step."""

    mode: Mode | str
    risk: RiskLevel | str
    policy: AuditPolicy | None
    segment_tokens: int
    claims_per_batch: int


class AuditOptionsModel(RiskOptions):
    """The audit job's own options: the library call, ``evidex audit``, ``evidex bulk audit``
    and ``POST /audit`` all read them from here."""

    mode: Annotated[
        Mode,
        Field(
            description="one-pass: the judge extracts and classifies claims at once; two-pass: "
            "it extracts claims first, then classifies them in batches."
        ),
    ] = "one-pass"
    policy: Annotated[
        AuditPolicy | None,
        Flag(expand=True),
        Field(description="The decision thresholds and the baseline alert (AuditPolicy)."),
    ] = None
    segment_tokens: Annotated[
        int,
        Flag(metavar="N"),
        Field(
            ge=50,
            le=32_768,
            description="Answer tokens per judge call (a long answer is cut there).",
        ),
    ] = DEFAULT_SEGMENT_TOKENS
    claims_per_batch: Annotated[
        int,
        Flag(metavar="N"),
        Field(ge=1, le=50, description="two-pass: claims classified per judge call."),
    ] = DEFAULT_CLAIMS_PER_BATCH


class AnswerInput(BaseModel):
    """One answer to audit, with the passages it was generated from."""

    model_config = ConfigDict(extra="forbid")

    answer: Annotated[str, Field(description="The generated answer to audit.")]
    passages: Annotated[
        list[Any],
        Wire(list[Passage | str]),
        Field(description="The passages the answer was generated from (objects or texts)."),
    ] = Field(default_factory=list)
    answer_id: Annotated[str | None, Field(description="Id of the answer.")] = None
    question: Annotated[str | None, Field(description="The user's question.")] = None
    claims: Annotated[
        list[str] | None,
        Field(description="Claims already split (verbatim spans); then only grading runs."),
    ] = None
    """Claims already split by the caller (verbatim spans); then only classification runs."""


def answer_inputs(items: Iterable[AnswerInput | Mapping[str, Any]]) -> list[AnswerInput]:
    """Typed answers, each with its id (``answer-N`` by position when missing)."""
    answers: list[AnswerInput] = []
    seen: set[str] = set()
    for index, raw in enumerate(items, 1):
        try:
            item = raw if isinstance(raw, AnswerInput) else AnswerInput.model_validate(raw)
        except ValidationError as exc:
            raise InputError(f"answer {index}: {_first_error(exc)}") from exc
        answer_id = item.answer_id or f"answer-{index}"
        if answer_id in seen:
            raise InputError(f"answer id {answer_id!r} is used twice; answer ids must be unique")
        seen.add(answer_id)
        if not item.answer.strip():
            raise InputError(f"answer {answer_id!r} is empty: there is nothing to audit")
        require_text(item.answer, f"answer {answer_id!r}")
        if item.question and item.question.strip():
            require_text(item.question, f"the question of answer {answer_id!r}")
        answers.append(item.model_copy(update={"answer_id": answer_id}))
    if not answers:
        raise InputError("no answers given: at least one answer is required")
    return answers


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where + ': ' if where else ''}{err['msg']}"
