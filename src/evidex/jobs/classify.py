"""The classify job end to end: preflight → one validated judge call → routing to review.

``classify()`` is the library call behind ``evidex classify``; ``classify_many()`` runs a batch
of inputs with bounded concurrency, and :mod:`evidex.jobs.consistency` re-runs one input
to measure how stable its labels are. The job is a :class:`ClassifySpec` the harness runs.

Preflight (the spec's harness paragraph): the input and the taxonomy must be non-empty, passage
ids unique, duplicate passages (exact or up to whitespace) are merged and reported, and the
assembled prompt must fit the judge's context window with room for the reply; when it does not,
the lowest-ranked passages are left out and an event says which. The budget is that of the
retry, the largest exchange: the prompt, the first reply, the re-ask with its errors, the strict
reminder with the schema, and the second reply must all fit.

Routing (every risk level): a label below the confidence threshold goes to review. At medium and
high risk a fallback goes to review too (at low risk it is a final, marked ``unclassifiable``);
at high risk also an answer with no label at all, and every label whose only support comes from
passages that the same answer cites as counter-evidence for it. At medium and high risk, a
label whose every quote comes from passages carrying text aimed at the grader (cut from what
the judge read, see :mod:`evidex.jobs._suspects`) goes to review.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

from pydantic import BaseModel, BeforeValidator, Field, WithJsonSchema, model_validator

from evidex.errors import InputError
from evidex.harness.job import JobResult, JobRun, Plan, Routed
from evidex.harness.ports import ReviewRequest
from evidex.jobs._classify_budget import fit_passages, prompt_tokens
from evidex.jobs._classify_review import REVIEW as CLASSIFY_REVIEW
from evidex.jobs._classify_review import ClassifyAnswer, ClassifyReview, LabelGrade
from evidex.jobs._common import RunOptions, prompt_template, sync_of
from evidex.jobs._definition import Evaluation, Flag, JobDefinition, RiskOptions, SpecContext, Wire
from evidex.jobs._suspects import Suspects
from evidex.judging import Judge
from evidex.loaders import load_classify_examples
from evidex.preflight import coerce_passages, passage_of, require_text
from evidex.tasks.base import PromptTemplate
from evidex.tasks.classify import (
    CLASSIFY_TEMPLATE,
    ClassifyBatch,
    ClassifyExample,
    ClassifyStep,
    ClassifyValue,
    Evidence,
    LabelAssignment,
)
from evidex.taxonomy import Taxonomy
from evidex.types import Passage, PassageLike, RiskLevel, Source

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "DEFAULT_THRESHOLD",
    "DEFINITION",
    "ClassifyCall",
    "ClassifyExample",
    "ClassifyInput",
    "ClassifyOptions",
    "ClassifyOptionsModel",
    "ClassifyResult",
    "ClassifySpec",
    "Evidence",
    "LabelAssignment",
    "RoutingDecision",
    "aclassify",
    "aclassify_many",
    "classify",
    "classify_many",
    "contested",
]

DEFAULT_THRESHOLD = 0.7


class ClassifyOptions(TypedDict, total=False):
    """The classify job's options as keywords of the library call (for type checkers; the
    taxonomy is its own argument); each is declared, with its default, bounds and help, in
    :class:`ClassifyOptionsModel`, and a test keeps the two in step."""

    constraints: Sequence[str] | None
    examples: Sequence[ClassifyExample] | None
    threshold: float
    risk: RiskLevel | str
    multi_label: bool


def _taxonomy(value: Any) -> Taxonomy:
    try:
        return Taxonomy.parse(value)
    except InputError as exc:  # a validation error of the field, where it is named
        raise ValueError(str(exc)) from exc


TaxonomyField = Annotated[
    Taxonomy,
    BeforeValidator(_taxonomy),
    WithJsonSchema(
        {
            "description": "the taxonomy: a list of {name, description}, a mapping with "
            "'labels', or a mapping of name to description",
            "anyOf": [{"type": "array"}, {"type": "object"}],
        }
    ),
]


class ClassifyOptionsModel(RiskOptions):
    """The classify job's own options: the library call, ``evidex classify``, ``evidex bulk
    classify`` and ``POST /classify`` all read them from here."""

    labels: Annotated[
        TaxonomyField,
        Flag("--labels", "-l", metavar="FILE", load=Taxonomy.from_file),
        Field(
            description="The label taxonomy (YAML or JSON): a list of {name, description}, a "
            "mapping with 'labels', or a mapping of name to description."
        ),
    ]
    threshold: Annotated[
        float,
        Flag(metavar="X"),
        Field(ge=0.0, le=1.0, description="Labels with a lower confidence go to review."),
    ] = DEFAULT_THRESHOLD
    multi_label: Annotated[
        bool, Field(description="Allow several labels (default: at most one).")
    ] = False
    constraints: Annotated[
        tuple[str, ...] | None,
        Flag("--constraint", metavar="TEXT"),
        Field(description="Extra rules for the judge (on the command line: repeatable)."),
    ] = None
    examples: Annotated[
        tuple[ClassifyExample, ...] | None,
        Flag(metavar="FILE", load=load_classify_examples),
        Field(
            description="Few-shot examples (JSON, YAML or JSONL list of {input, passages, output})."
        ),
    ] = None

    @model_validator(mode="after")
    def _examples_use_the_taxonomy(self) -> ClassifyOptionsModel:
        for i, example in enumerate(self.examples or (), 1):
            unknown = {a.label for a in example.output.classifications} - set(self.labels.names)
            if unknown:
                raise ValueError(
                    f"example {i} uses labels that are not in the taxonomy: {sorted(unknown)}"
                )
        return self


class ClassifyCall(ClassifyOptions, RunOptions, total=False):
    """Every keyword of a classify call."""


class RoutingDecision(BaseModel):
    """Why a result (or one of its labels) was put in the review queue."""

    review_item_id: int
    reason: str
    label: str | None = None


class ClassifyInput(BaseModel):
    """One input of a batch: an id for the output, the text, and its retrieved passages."""

    id: str | None = None
    input: Annotated[str, Field(description="The text to classify.")]
    passages: Annotated[
        list[Any],
        Wire(list[Passage]),
        Field(description="The retrieved passages the labels must be quoted from."),
    ]


class ClassifyResult(JobResult):
    """The spec's output schema plus where it came from and what was routed to review."""

    id: str | None = None
    input: str
    classifications: list[LabelAssignment]
    unclassifiable: bool
    unclassifiable_reason: str | None = None
    evidence_gaps: list[str] = Field(default_factory=list)
    source: Source
    reason: str | None = Field(default=None, description="why a fallback was used")
    review: list[RoutingDecision] = Field(default_factory=list)
    threshold: float
    risk: RiskLevel
    multi_label: bool
    passage_ids: list[str] = Field(description="the passages the judge saw, in prompt order")
    duplicates: dict[str, str] = Field(
        default_factory=dict, description="removed passage id → the kept id with the same text"
    )
    dropped: list[str] = Field(default_factory=list, description="left out to fit the budget")
    passages: list[Passage] = Field(default_factory=list, repr=False, exclude=True)
    """The passages as given (text, title, url, metadata), in input order; not serialised."""

    def passage(self, passage_id: str) -> Passage:
        """The passage behind ``passage_id`` (an evidence quote's), as given."""
        return passage_of(self.passages, passage_id)

    @property
    def labels(self) -> list[str]:
        return [a.label for a in self.classifications]

    @property
    def review_item_ids(self) -> list[int]:
        return [r.review_item_id for r in self.review]

    def report(self) -> dict[str, Any]:
        """JSON-ready output (``risk`` as its value)."""
        return self.model_dump(mode="json")


@dataclass(frozen=True)
class Prepared:
    """One preflighted input: the batch the judge will see and what preflight did."""

    batch: ClassifyBatch
    duplicates: Mapping[str, str]
    dropped: tuple[str, ...]
    given: tuple[Passage, ...] = ()
    """The passages as the caller gave them, before preflight."""


@dataclass(frozen=True)
class ClassifySpec:
    """The classify job as the harness runs it: one validated call per input, then routing."""

    template: ClassifyBatch
    """A batch without input or passages: the options every input shares."""
    route: bool = True
    """Whether results are routed to review (a diagnostic such as the consistency check
    routes nothing; every call is still in the audit log)."""
    prompt: PromptTemplate = CLASSIFY_TEMPLATE
    """The classify step's prompt: the built-in one, or the caller's own wording."""
    job: str = "classify"

    @classmethod
    def of(cls, options: ClassifyOptionsModel, context: SpecContext) -> ClassifySpec:
        """The spec for these (validated) options."""
        template = ClassifyBatch(
            input="",
            passages=(),
            taxonomy=options.labels,
            constraints=tuple(c.strip() for c in options.constraints or () if c.strip()),
            examples=tuple(options.examples or ()),
            threshold=float(options.threshold),
            risk=options.risk,
            multi_label=options.multi_label,
        )
        prompt = prompt_template("classify", "classify", CLASSIFY_TEMPLATE, context.prompt)
        return cls(template=template, prompt=prompt)

    # ------------------------------------------------------------------ preflight

    def plan(self, item: ClassifyInput, judge: Judge) -> Plan[Prepared]:
        """Preflight one input; raises ``InputError`` (naming the item) on bad input."""
        where = None if item.id is None else f"item {item.id!r}"
        require_text(item.input, "the input text to classify", where=where)
        items = coerce_passages(item.passages, where=where)
        base = dataclasses.replace(self.template, input=item.input)
        try:
            prepared, kept, dropped_events = fit_passages(judge, self.prompt, base, items)
        except InputError as exc:
            raise InputError(str(exc), where=where) from exc
        dropped = tuple(pid for e in dropped_events for pid in e.passage_ids)
        batch = dataclasses.replace(base, passages=tuple(kept))
        return Plan(
            query=item.input,
            data=Prepared(batch, prepared.duplicates, dropped, tuple(items)),
            risk=self.template.risk.value,
            events=(*prepared.events, *dropped_events),
            review_fallback=self.route and self.template.risk is not RiskLevel.LOW,
            id=item.id,
        )

    def prompt_tokens(self, judge: Judge, base: ClassifyBatch, passages: Sequence[Passage]) -> int:
        """Prompt tokens of the retry with these passages (the replies are reserved apart)."""
        return prompt_tokens(judge, self.prompt, base, passages)

    # ------------------------------------------------------------------ run and route

    async def execute(self, plan: Plan[Prepared], run: JobRun) -> ClassifyResult:
        batch = plan.data.batch
        outcome = await run.call(ClassifyStep(self.prompt), batch)
        value = outcome.value
        return ClassifyResult(
            id=plan.id,
            input=batch.input,
            classifications=value.classifications,
            unclassifiable=value.unclassifiable,
            unclassifiable_reason=value.unclassifiable_reason,
            evidence_gaps=value.evidence_gaps,
            source=outcome.source,
            reason=outcome.reason,
            threshold=batch.threshold,
            risk=batch.risk,
            multi_label=batch.multi_label,
            passage_ids=[p.passage_id for p in batch.passages],
            duplicates=dict(plan.data.duplicates),
            dropped=list(plan.data.dropped),
            passages=list(plan.data.given),
            events=list(plan.events),
            **run.provenance(self.prompt.version),
        )

    def reviews(
        self, plan: Plan[Prepared], result: ClassifyResult, run: JobRun
    ) -> list[ReviewRequest]:
        """The routing rules; each review item stores its reason in words."""
        if not self.route or result.source == "fallback":
            return []
        batch = plan.data.batch
        wanted: list[tuple[str, LabelAssignment | None]] = [
            (
                f"confidence {a.confidence:g} for label {a.label} is below the threshold "
                f"{batch.threshold:g}",
                a,
            )
            for a in result.classifications
            if a.confidence < batch.threshold
        ]
        if batch.risk is RiskLevel.HIGH:
            if result.unclassifiable:
                wanted.append(
                    (
                        "high risk: the judge found no label it could support "
                        f"({result.unclassifiable_reason})",
                        None,
                    )
                )
            wanted += [
                (
                    f"high risk: every supporting quote for label {a.label} comes from a "
                    "passage the answer also cites as counter-evidence for it",
                    a,
                )
                for a in result.classifications
                if contested(a)
            ]
        flagged = Suspects.of(plan.events, batch.risk)
        wanted += [
            (flagged.reason(f"every passage quoted for label {a.label}"), a)
            for a in result.classifications
            if flagged.routed and flagged.only(e.passage_id for e in a.supporting_evidence)
        ]
        answer_fields = set(ClassifyValue.model_fields) - {"source", "reason"}
        value = ClassifyAnswer.model_validate(
            ClassifyValue.model_validate(result.model_dump(include=answer_fields)).model_dump(
                mode="json"
            )
        )
        return [
            run.review_request(
                reason,
                ClassifyReview(
                    input=batch.input,
                    label=assignment.label if assignment else None,
                    assignment=(
                        LabelGrade.model_validate(assignment.model_dump(mode="json"))
                        if assignment
                        else None
                    ),
                    result=value,
                    labels=list(batch.taxonomy.names),
                ),
                [p.passage_id for p in batch.passages],
                passages=batch.passages,
            )
            for reason, assignment in wanted
        ]

    def finish(
        self,
        plan: Plan[Prepared],
        result: ClassifyResult,
        run: JobRun,
        routed: Sequence[Routed],
    ) -> ClassifyResult:
        decisions = [
            RoutingDecision(
                review_item_id=item_id,
                reason=f"fallback at {plan.risk} risk: {result.reason}",
            )
            for item_id in run.fallback_review_ids
        ]
        decisions += [
            RoutingDecision(review_item_id=r.item_id, reason=r.request.reason, label=r.label)
            for r in routed
        ]
        return result.model_copy(update={"review": decisions, **run.spend()})


def contested(assignment: LabelAssignment) -> bool:
    """True when each supporting quote's passage is also cited against the same label: the
    label's only support is itself counter-evidenced."""
    against = {e.passage_id for e in assignment.counter_evidence}
    return bool(against) and all(e.passage_id in against for e in assignment.supporting_evidence)


# ---------------------------------------------------------------------------- entry points


async def aclassify(
    input: str,
    passages: Iterable[PassageLike],
    taxonomy: Taxonomy | Any,
    **options: Unpack[ClassifyCall],
) -> ClassifyResult:
    """Assign labels from ``taxonomy`` to ``input``, each backed by verbatim passage quotes.

    ``taxonomy`` is a :class:`Taxonomy` or anything :meth:`Taxonomy.parse` accepts. Options:
    :class:`ClassifyOptions` and the run keywords of every job (``judge``, ``store``,
    ``settings``, ``hooks``, ``on_progress``). A reply that is still invalid after the one
    retry becomes ``unclassifiable`` with ``source="fallback"`` (and a review item at medium
    and high risk). Bad input raises :class:`~evidex.errors.InputError` before any judge is
    called.
    """
    item = ClassifyInput(input=input, passages=list(passages))
    return await DEFINITION.arun(item, labels=taxonomy, **options)


async def aclassify_many(
    items: Iterable[ClassifyInput | Mapping[str, Any]],
    taxonomy: Taxonomy | Any,
    **options: Unpack[ClassifyCall],
) -> list[ClassifyResult]:
    """Classify each item (``{id, input, passages}``); results come back in input order.

    Every item is preflighted before the first judge call, so bad input anywhere in the batch
    stops it early with an error naming the item. Items run concurrently up to the harness's
    ``max_concurrency`` (and the judge's own limit).
    """
    return await DEFINITION.arun_many(items, labels=taxonomy, **options)


DEFINITION: JobDefinition[ClassifyInput, ClassifyOptionsModel, ClassifyResult] = JobDefinition(
    name="classify",
    options=ClassifyOptionsModel,
    input=ClassifyInput,
    result=ClassifyResult,
    spec=ClassifySpec.of,
    review=CLASSIFY_REVIEW,
    evaluation=Evaluation(
        measures=(
            "accuracy",
            "macro_f1",
            "citation_precision",
            "citation_recall",
            "citation_precision(avg=macro)",
            "citation_recall(avg=macro)",
            "verbatim_share",
        ),
        golden="evidex.evaluate.golden:ClassifyGolden",
        evaluator="evidex.evaluate.classify:ClassifyEvaluator",
    ),
)


classify = sync_of(aclassify)
classify_many = sync_of(aclassify_many)
