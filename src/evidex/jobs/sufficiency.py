"""The sufficiency job: before generating, do the passages suffice to answer the query?

``asufficiency()`` / ``sufficiency()`` are the library calls behind ``evidex sufficiency`` and
``POST /sufficiency`` (both made from :data:`DEFINITION`). One validated call per query sees
every passage (a multi-part question needs every part covered), and a policy turns the verdict
and its confidence into a decision: ``answer``, ``abstain`` (the passages do not hold the
answer, and the judge is sure of it) or ``escalate`` (a person decides: the judge is unsure,
the risk is high, or no valid judgment was obtained). A fallback is never ``answer``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from evidex.harness.job import JobResult, JobRun, MergedIsResult, Plan
from evidex.harness.ports import ReviewRequest
from evidex.jobs._common import (
    QueryInput,
    QueryPassages,
    RunOptions,
    plan_query,
    prompt_template,
    sync_of,
)
from evidex.jobs._definition import Evaluation, Flag, JobDefinition, RiskOptions, SpecContext
from evidex.jobs._sufficiency_cascade import triage
from evidex.jobs._sufficiency_demo import demo_part
from evidex.jobs._sufficiency_documents import SUFFICIENCY_DOCUMENTS
from evidex.jobs._sufficiency_review import REVIEW, SufficiencyReview
from evidex.jobs._suspects import Suspects
from evidex.judging import Judge
from evidex.preflight import passage_of
from evidex.tasks.sufficiency import (
    SUFFICIENCY_TEMPLATE,
    KeyQuote,
    SufficiencyBatch,
    SufficiencyStep,
    SufficiencyValue,
)
from evidex.types import Passage, PassageLike, RiskLevel, Source

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "DEFINITION",
    "KeyQuote",
    "SufficiencyCall",
    "SufficiencyDecision",
    "SufficiencyInput",
    "SufficiencyOptions",
    "SufficiencyOptionsModel",
    "SufficiencyPolicy",
    "SufficiencyResult",
    "SufficiencySpec",
    "asufficiency",
    "asufficiency_many",
    "decide",
    "sufficiency",
    "sufficiency_many",
]

Decision = Literal["answer", "abstain", "escalate"]
ReasonCode = Literal[
    "sufficient", "insufficient", "low_confidence", "high_risk", "fallback", "suspected_injection"
]


class SufficiencyPolicy(BaseModel):
    """How a verdict and its confidence become a decision. Unknown names are rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    abstain_confidence: Annotated[
        float,
        Flag(metavar="X"),
        Field(
            ge=0.0,
            le=1.0,
            description="Abstain when the passages do not suffice at this confidence or above "
            "(below it, a person decides).",
        ),
    ] = 0.7
    escalate_below: Annotated[
        float,
        Flag(metavar="X"),
        Field(
            ge=0.0,
            le=1.0,
            description="Escalate any verdict whose confidence is below this, sufficient or not.",
        ),
    ] = 0.5
    high_risk_confidence: Annotated[
        float,
        Flag(metavar="X"),
        Field(
            ge=0.0,
            le=1.0,
            description="At high risk, escalate any verdict below this confidence, and every "
            "insufficient one: a person decides whether to abstain.",
        ),
    ] = 0.8


class SufficiencyOptions(TypedDict, total=False):
    """The sufficiency job's options as keywords of the library call (for type checkers); each
    is declared, with its default, bounds and help, in :class:`SufficiencyOptionsModel`."""

    risk: RiskLevel | str
    policy: SufficiencyPolicy | None


class SufficiencyOptionsModel(RiskOptions):
    """The sufficiency job's own options: the library call, ``evidex sufficiency``, ``evidex
    bulk sufficiency`` and ``POST /sufficiency`` all read them from here."""

    policy: Annotated[
        SufficiencyPolicy | None,
        Flag(expand=True),
        Field(description="How the verdict becomes answer / abstain / escalate."),
    ] = None


class SufficiencyCall(SufficiencyOptions, RunOptions, total=False):
    """Every keyword of a sufficiency call."""


SufficiencyInput = QueryInput
"""One query with its passages (the batch form's item)."""


class DecisionReason(BaseModel):
    code: ReasonCode
    message: str


class SufficiencyDecision(BaseModel):
    """What a pipeline does before generating: answer from the passages, abstain, or hand the
    query to a person. Written by code from the verdict, its confidence and the policy."""

    decision: Decision
    reasons: list[DecisionReason]


class SufficiencyResult(JobResult):
    """Whether the passages suffice, with what supports it or what is missing, and the
    decision."""

    id: str | None = None
    query: str
    sufficient: bool
    confidence: float
    supporting_passage_ids: list[str] = Field(default_factory=list)
    key_quotes: list[KeyQuote] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    decision: SufficiencyDecision
    source: Source
    reason: str | None = Field(default=None, description="why a fallback was used")
    judged_by: str | None = Field(
        default=None,
        description="with a cascade judge, the stage that gave the verdict: the cheap one "
        "when it found nothing on the query's topic, else the expensive one",
    )
    risk: RiskLevel
    review_item_ids: list[int] = Field(default_factory=list)
    passages: list[Passage] = Field(default_factory=list, repr=False, exclude=True)
    """The passages as given (text, title, url, metadata), in input order; not serialised."""

    def passage(self, passage_id: str) -> Passage:
        """The passage behind ``passage_id`` (a supporting id or a quote's), as given."""
        return passage_of(self.passages, passage_id)

    def report(self) -> dict[str, Any]:
        """JSON-ready output (no passage texts; ``id`` only when the input had one)."""
        return self.model_dump(mode="json", exclude=set() if self.id else {"id"})


def decide(
    value: SufficiencyValue,
    *,
    risk: RiskLevel,
    policy: SufficiencyPolicy,
    suspected: Sequence[str] = (),
) -> SufficiencyDecision:
    """Apply the policy; the most cautious outcome that fires wins, and each is a reason.
    ``suspected``: the verdict's passages that carry text aimed at the grader, where the
    risk sends them to a person (see :mod:`evidex.jobs._suspects`)."""
    confidence = value.confidence
    if value.source == "fallback":
        return _decision(
            "escalate",
            "fallback",
            "no valid judgment was obtained (marked fallback); a person decides",
        )
    if suspected:
        where = f"passage(s) {', '.join(suspected)} the verdict rests on"
        return _decision("escalate", "suspected_injection", Suspects.reason(where))
    if confidence < policy.escalate_below:
        return _decision(
            "escalate",
            "low_confidence",
            f"confidence {confidence:.2f} is below {policy.escalate_below:.2f}",
        )
    if risk is RiskLevel.HIGH and (
        not value.sufficient or confidence < policy.high_risk_confidence
    ):
        verdict = "sufficient" if value.sufficient else "insufficient"
        return _decision(
            "escalate",
            "high_risk",
            f"high risk: an {verdict} verdict at confidence {confidence:.2f} needs a person "
            f"(answering needs {policy.high_risk_confidence:.2f} or more)",
        )
    if value.sufficient:
        return _decision(
            "answer", "sufficient", f"the passages suffice (confidence {confidence:.2f})"
        )
    if confidence >= policy.abstain_confidence:
        return _decision(
            "abstain",
            "insufficient",
            f"the passages lack: {'; '.join(value.missing)} (confidence {confidence:.2f})",
        )
    return _decision(
        "escalate",
        "low_confidence",
        f"insufficient at confidence {confidence:.2f}, below the {policy.abstain_confidence:.2f} "
        "needed to abstain",
    )


def _decision(decision: Decision, code: ReasonCode, message: str) -> SufficiencyDecision:
    return SufficiencyDecision(
        decision=decision, reasons=[DecisionReason(code=code, message=message)]
    )


@dataclass(frozen=True)
class SufficiencySpec(MergedIsResult):
    """The sufficiency job as the harness runs it: one call per query, then the policy."""

    risk: RiskLevel = RiskLevel.LOW
    policy: SufficiencyPolicy = field(default_factory=SufficiencyPolicy)
    template: Any = SUFFICIENCY_TEMPLATE
    job: str = "sufficiency"

    @classmethod
    def of(cls, options: SufficiencyOptionsModel, context: SpecContext) -> SufficiencySpec:
        """The spec for these (validated) options."""
        return cls(
            risk=options.risk,
            policy=options.policy or SufficiencyPolicy(),
            template=prompt_template(
                "sufficiency", "sufficiency", SUFFICIENCY_TEMPLATE, context.prompt
            ),
        )

    def plan(self, item: SufficiencyInput, judge: Judge) -> Plan[QueryPassages]:
        return plan_query(
            item,
            judge,
            lambda q: SufficiencyStep(self.template).request(SufficiencyBatch(q, (), self.risk)),
            None,
            self.risk,
        )

    async def execute(self, plan: Plan[QueryPassages], run: JobRun) -> SufficiencyResult:
        passages = tuple(plan.data.prepared.passages)
        found = await triage(run, plan.query, passages)
        if found.settled is not None:
            value, source, reason = found.settled, found.settled.source, None
        else:
            batch = SufficiencyBatch(plan.query, passages, self.risk)
            outcome = await found.expensive.call(SufficiencyStep(self.template), batch)
            value, source, reason = outcome.value, outcome.source, outcome.reason
        cited = [*value.supporting_passage_ids, *(q.passage_id for q in value.key_quotes)]
        flagged = Suspects.of(plan.events, self.risk).to_route(cited)
        return SufficiencyResult(
            id=plan.id,
            query=plan.query,
            sufficient=value.sufficient,
            confidence=value.confidence,
            supporting_passage_ids=value.supporting_passage_ids,
            key_quotes=value.key_quotes,
            missing=value.missing,
            decision=decide(value, risk=self.risk, policy=self.policy, suspected=flagged),
            source=source,
            reason=reason,
            judged_by=found.judged_by,
            risk=self.risk,
            passages=plan.data.items,
            events=[*plan.events, *run.events],
            **run.provenance(self.template.version),
        )

    def reviews(
        self, plan: Plan[QueryPassages], result: SufficiencyResult, run: JobRun
    ) -> list[ReviewRequest]:
        """An escalated verdict goes to a person (a fallback has its item already)."""
        if result.decision.decision != "escalate" or result.source == "fallback":
            return []
        return [
            run.review_request(
                f"sufficiency: {result.decision.reasons[0].message}",
                SufficiencyReview.model_validate(
                    {
                        "query": plan.query,
                        "sufficient": result.sufficient,
                        "confidence": result.confidence,
                        "missing": result.missing,
                        "supporting_passage_ids": result.supporting_passage_ids,
                        "key_quotes": [q.model_dump() for q in result.key_quotes],
                        "decision": result.decision.decision,
                    }
                ),
                [p.passage_id for p in plan.data.prepared.passages],
                passages=plan.data.items,
            )
        ]


async def asufficiency(
    query: str, passages: Iterable[PassageLike], **options: Unpack[SufficiencyCall]
) -> SufficiencyResult:
    """Whether ``passages`` alone suffice to answer ``query``, and what to do before
    generating: ``answer``, ``abstain`` or ``escalate`` (:class:`SufficiencyPolicy`). A reply
    still invalid after the re-ask and the strict retry is a fallback: insufficient, confidence
    0, decision ``escalate``, with a review item. Options: :class:`SufficiencyOptionsModel`
    and the run keywords of every job (``judge``, ``store``, ``settings``, ``hooks``)."""
    item = SufficiencyInput(query=query, passages=list(passages))
    return await DEFINITION.arun(item, **options)


async def asufficiency_many(
    items: Iterable[SufficiencyInput | Mapping[str, Any]], **options: Unpack[SufficiencyCall]
) -> list[SufficiencyResult]:
    """Check many queries (``{query, passages, id?}`` each) with the same options; results in
    input order, progress counted in queries."""
    return await DEFINITION.arun_many(items, **options)


DEFINITION: JobDefinition[SufficiencyInput, SufficiencyOptionsModel, SufficiencyResult] = (
    JobDefinition(
        name="sufficiency",
        options=SufficiencyOptionsModel,
        input=SufficiencyInput,
        result=SufficiencyResult,
        spec=SufficiencySpec.of,
        review=REVIEW,
        evaluation=Evaluation(
            measures=(
                "f1(label=insufficient)",
                "accuracy",
                "abstention_rate",
                "false_abstention_rate",
                "escalation_rate",
            ),
            golden="evidex.evaluate.golden:SufficiencyGolden",
            evaluator="evidex.evaluate.sufficiency:SufficiencyEvaluator",
            calibrate="evidex.evaluate.calibrate_sufficiency:calibrate_sufficiency",
        ),
        documents=SUFFICIENCY_DOCUMENTS,
        demo=demo_part(asufficiency),
    )
)

sufficiency = sync_of(asufficiency)
sufficiency_many = sync_of(asufficiency_many)
