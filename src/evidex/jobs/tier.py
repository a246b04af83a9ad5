"""The tier job: each passage in one relevance tier, with a justification and a snippet.

``atier()`` / ``tier()`` are the library calls behind ``evidex tier`` and ``POST /tier``;
``atier_many()`` / ``tier_many()`` grade many queries. The job is a :class:`TierSpec` that the
harness runs: preflight (duplicates merged, passages cut to the judge's budget), batches of
``batch_size`` through the tier step, merge by passage id, and at high risk a sample of the
top-tier grades routed to a person.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypedDict

from pydantic import BaseModel, Field

from evidex.harness.assemble import stamped, with_duplicates
from evidex.harness.job import JobResult, JobRun, MergedIsResult, Plan
from evidex.harness.ports import ReviewRequest
from evidex.harness.routing import sampled
from evidex.harness.staged import staged
from evidex.jobs._cascade import CascadeReport, CheapScoreStep, cascade_tiers
from evidex.jobs._common import (
    QueryInput,
    QueryPassages,
    RunOptions,
    plan_query,
    prompt_template,
    sync_of,
)
from evidex.jobs._definition import Evaluation, Flag, JobDefinition, RiskOptions, SpecContext
from evidex.jobs._suspects import Suspects
from evidex.jobs._tier_documents import TIER_DOCUMENTS
from evidex.jobs._tier_review import REVIEW as TIER_REVIEW
from evidex.jobs._tier_review import TierGrade, TierReview
from evidex.jobs.select import SelectedContext, select_context
from evidex.judging import Judge
from evidex.loaders import load_examples
from evidex.preflight import passage_of
from evidex.tasks.base import PromptTemplate
from evidex.tasks.tier import (
    DEFAULT_EXAMPLES,
    TIER_TEMPLATE,
    TierAssignment,
    TierBatch,
    TierBatchValue,
    TierExample,
    TierStep,
)
from evidex.types import DEFAULT_TIERS, Passage, PassageLike, RiskLevel, TierScheme

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "DEFINITION",
    "CascadeReport",
    "TierAssignment",
    "TierCall",
    "TierExample",
    "TierInput",
    "TierOptions",
    "TierOptionsModel",
    "TierReport",
    "TierResult",
    "TierSpec",
    "atier",
    "atier_many",
    "tier",
    "tier_many",
]

MIN_BATCH, MAX_BATCH, DEFAULT_BATCH = 5, 15, 10
DEFAULT_BUDGET = 4000
"""Tokens of the selected context when a policy is given without a budget."""


class TierOptions(TypedDict, total=False):
    """The tier job's options as keywords of the library call (for type checkers); each is
    declared, with its default, bounds and help, in :class:`TierOptionsModel`, and a test
    keeps the two in step."""

    tiers: TierScheme | None
    examples: Sequence[TierExample] | None
    risk: RiskLevel | str
    batch_size: int
    review_sample_rate: float


class TierOptionsModel(RiskOptions):
    """The tier job's own options: the library call, ``evidex tier``, ``evidex bulk tier`` and
    ``POST /tier`` all read them from here."""

    tiers: Annotated[
        TierScheme | None,
        Flag(metavar="FILE", load=TierScheme.from_file),
        Field(
            description="Your tier definitions (YAML or JSON), most relevant first. Default: "
            "directly-supporting, contextually-relevant, tangentially-related, irrelevant."
        ),
    ] = None
    examples: Annotated[
        tuple[TierExample, ...] | None,
        Flag(metavar="FILE", load=load_examples),
        Field(
            description="Few-shot examples (JSON, YAML or JSONL list of query, passage, tier, "
            "justification, key_evidence_snippet). Default: built-in examples for the default "
            "tiers, none for custom tiers."
        ),
    ] = None
    batch_size: Annotated[
        int,
        Flag("--batch-size", metavar="N"),
        Field(ge=MIN_BATCH, le=MAX_BATCH, description="Passages per judge call, 5 to 15."),
    ] = DEFAULT_BATCH
    review_sample_rate: Annotated[
        float,
        Flag(metavar="RATE"),
        Field(
            ge=0.0,
            le=1.0,
            description="At high risk, the share of top-tier grades sampled into review.",
        ),
    ] = 1.0


class ContextChoice(BaseModel):
    """What the tier response also carries: the generator's context, selected by policy."""

    policy: Annotated[
        Literal["strict", "standard", "broad"] | None,
        Field(
            description="Also select the generator's context: strict = top tier, standard = "
            "top two, broad = all but the last."
        ),
    ] = None
    budget: Annotated[
        int | None,
        Flag(metavar="TOKENS"),
        Field(
            ge=1,
            description=f"Token budget of the selected context (with policy; default "
            f"{DEFAULT_BUDGET}).",
        ),
    ] = None


class TierCall(TierOptions, RunOptions, total=False):
    """Every keyword of a tier call."""


TierInput = QueryInput
"""One query with its passages (the batch form's item)."""


class TierResult(JobResult):
    """Every input passage exactly once, in input order, with its tier and provenance."""

    id: str | None = None
    query: str
    classifications: list[TierAssignment]
    tier_summary: dict[str, int]
    scheme: TierScheme
    passages: list[Passage] = Field(repr=False)
    review_item_ids: list[int] = Field(default_factory=list)
    cascade: CascadeReport | None = None
    """With a cascade judge: how its stages split the passages and what that saved."""

    def tier_of(self, passage_id: str) -> str:
        for a in self.classifications:
            if a.passage_id == passage_id:
                return a.tier
        raise KeyError(passage_id)

    def in_tier(self, name: str) -> list[TierAssignment]:
        return [a for a in self.classifications if a.tier == name]

    def passage(self, passage_id: str) -> Passage:
        """The input passage behind ``passage_id``, with its text and metadata as given."""
        return passage_of(self.passages, passage_id)

    def report(self) -> dict[str, Any]:
        """The spec's output schema plus provenance, for JSON output (no passage texts)."""
        return self.model_dump(mode="json", exclude={"passages", "scheme", "id"}) | (
            {"id": self.id} if self.id is not None else {}
        )


@dataclass(frozen=True)
class TierSpec(MergedIsResult):
    """The tier job as the harness runs it."""

    scheme: TierScheme = DEFAULT_TIERS
    examples: tuple[TierExample, ...] = ()
    risk: RiskLevel = RiskLevel.LOW
    batch_size: int = DEFAULT_BATCH
    review_sample_rate: float = 1.0
    template: PromptTemplate = TIER_TEMPLATE
    """The tier step's prompt: the built-in one, or the caller's own wording."""
    job: str = "tier"
    pools_frontier: ClassVar[bool] = True
    """Under a cascade's frontier rule, the queries of one run share its budget
    (:mod:`evidex.harness.frontier_pool`)."""

    @classmethod
    def of(cls, options: TierOptionsModel, context: SpecContext) -> TierSpec:
        """The spec for these (validated) options."""
        scheme = options.tiers or DEFAULT_TIERS
        examples = options.examples
        if examples is None:
            examples = DEFAULT_EXAMPLES if scheme == DEFAULT_TIERS else ()
        return cls(
            scheme=scheme,
            examples=tuple(examples),
            risk=options.risk,
            batch_size=options.batch_size,
            review_sample_rate=options.review_sample_rate,
            template=prompt_template("tier", "tier", TIER_TEMPLATE, context.prompt),
        )

    def batch(self, query: str, passages: Sequence[Passage]) -> TierBatch:
        return TierBatch(query, tuple(passages), self.scheme, self.examples, self.risk)

    def plan(self, item: TierInput, judge: Judge) -> Plan[QueryPassages]:
        return plan_query(
            item,
            judge,
            lambda q: TierStep(self.template).request(self.batch(q, ())),
            self.batch_size,
            self.risk,
        )

    async def execute(self, plan: Plan[QueryPassages], run: JobRun) -> TierResult:
        passages = plan.data.prepared.passages
        size = self.batch_size
        step = TierStep(self.template)

        async def grade(on: JobRun, some: Sequence[Passage]) -> list[TierAssignment]:
            outcomes = await on.map_sized(
                step, some, lambda chunk: self.batch(plan.query, chunk), size
            )
            run.note_warnings(outcomes)
            return stamped(outcomes, _classifications)

        lowest = self.scheme.names[-1]

        def verdict(a: TierAssignment) -> tuple[str, bool]:
            return a.passage_id, a.source != "fallback" and a.tier != lowest

        found = await staged(run, plan.query, passages, grade, CheapScoreStep(), verdict=verdict)
        by_id, report = cascade_tiers(found, run, list(self.scheme.names), size)
        graded = with_duplicates(list(by_id.values()), plan.data.prepared.duplicates)
        flagged = Suspects.of(plan.events)
        by_id = {a.passage_id: self._held(a) if a.passage_id in flagged else a for a in graded}
        ordered = [by_id[p.passage_id] for p in plan.data.items]
        return TierResult(
            id=plan.id,
            query=plan.query,
            classifications=ordered,
            tier_summary=self.scheme.summary(a.tier for a in ordered),
            scheme=self.scheme,
            passages=plan.data.items,
            events=[*plan.events, *run.events],
            cascade=report,
            **run.provenance(self.template.version),
        )

    def _held(self, a: TierAssignment) -> TierAssignment:
        """A passage carrying text aimed at the grader is never promoted into the context on
        the strength of that text (preflight cut it from what the judge read; what is left
        may be written around it too): its grade is held at the first tier outside the standard
        context (the last tier when its batch fell back, so that an attack that only breaks
        the reply does not land in the context through the conservative fallback tier)."""
        names = list(self.scheme.names)
        held = names[-1] if a.source == "fallback" else names[min(2, len(names) - 1)]
        if names.index(a.tier) >= names.index(held):
            return a
        why = (
            f"held at {held} (the judge said {a.tier}): the passage carries text aimed at the "
            "grader (see the suspected_injection events)"
        )
        return a.model_copy(update={"tier": held, "reason": why})

    def reviews(
        self, plan: Plan[QueryPassages], result: TierResult, run: JobRun
    ) -> list[ReviewRequest]:
        """At medium and high risk, a person looks at every passage suspected of addressing
        the grader; at high risk, also at sampled top-tier grades (the spec's review gate)."""
        flagged = Suspects.of(plan.events, self.risk)
        top = self.scheme.top
        routes = []
        for a in result.classifications:
            if a.duplicate_of:
                continue
            if flagged.to_route([a.passage_id]):
                routes.append((flagged.reason("the passage"), a))
            elif (
                self.risk is RiskLevel.HIGH
                and a.tier == top
                and a.source != "fallback"
                and sampled(run.ctx.run_id, a.passage_id, self.review_sample_rate)
            ):
                routes.append((f"high risk: {top} grade needs human confirmation", a))
        return [
            run.review_request(
                reason,
                TierReview(
                    query=plan.query,
                    assignment=TierGrade.model_validate(a.model_dump(mode="json")),
                    tiers=list(self.scheme.names),
                ),
                [a.passage_id],
                passages=plan.data.items,
            )
            for reason, a in routes
        ]


async def atier(
    query: str, passages: Iterable[PassageLike], **options: Unpack[TierCall]
) -> TierResult:
    """Assign each passage one relevance tier, in batches of ``batch_size`` (5-15).

    Nothing is lost: a duplicate passage takes its twin's tier (``duplicate_of``), a batch whose
    replies never validate gets the scheme's fallback tier with ``source="fallback"`` and a
    review item, and with ``risk="high"`` every top-tier grade is sampled into review at
    ``review_sample_rate``. Options: :class:`TierOptionsModel` and the run keywords of every
    job (``judge``, ``store``, ``settings``, ``hooks``, ``on_progress``).
    """
    return await DEFINITION.arun(TierInput(query=query, passages=list(passages)), **options)


async def atier_many(
    items: Iterable[TierInput | Mapping[str, Any]], **options: Unpack[TierCall]
) -> list[TierResult]:
    """Tier many queries (``{query, passages, id?}`` each) with the same options; results in
    input order, progress counted in queries."""
    return await DEFINITION.arun_many(items, **options)


class TierReport(JobResult):
    """What ``evidex tier`` prints and ``POST /tier`` returns: the spec's output schema and
    provenance (no passage texts); ``id`` only when the input had one, ``context`` only when
    it named a policy."""

    id: str | None = Field(default=None, description="absent unless the input had one")
    query: str
    classifications: list[TierAssignment]
    tier_summary: dict[str, int]
    review_item_ids: list[int] = Field(default_factory=list)
    context: SelectedContext | None = Field(
        default=None, description="the context selected by the request's policy and budget"
    )


def _classifications(value: TierBatchValue) -> list[TierAssignment]:
    return value.classifications


def _respond(result: TierResult, extras: ContextChoice | None) -> dict[str, Any]:
    report = result.report()
    if extras is not None and extras.policy is not None:
        budget = DEFAULT_BUDGET if extras.budget is None else extras.budget
        report["context"] = select_context(result, extras.policy, budget).model_dump(mode="json")
    return report


def _fell_back(result: TierResult) -> bool:
    return any(a.source == "fallback" for a in result.classifications)


DEFINITION: JobDefinition[TierInput, TierOptionsModel, TierResult] = JobDefinition(
    name="tier",
    options=TierOptionsModel,
    input=TierInput,
    result=TierResult,
    spec=TierSpec.of,
    response=_respond,
    extras=ContextChoice,
    response_type=TierReport,
    fell_back=_fell_back,
    review=TIER_REVIEW,
    evaluation=Evaluation(
        measures=("kappa", "kappa_linear", "kappa_quadratic", "accuracy", "macro_f1"),
        golden="evidex.evaluate.golden:TierGolden",
        evaluator="evidex.evaluate.tier:TierEvaluator",
        calibrate="evidex.evaluate.calibrate:calibrate_tier",
    ),
    documents=TIER_DOCUMENTS,
)

tier = sync_of(atier)
tier_many = sync_of(atier_many)
