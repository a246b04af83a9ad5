"""The audit job: a generated answer split into claims, each graded against its passages,
then publish / review / block.

``aaudit()`` / ``audit()`` are the library calls behind ``evidex audit`` and ``POST /audit``;
``aaudit_many()`` / ``audit_many()`` audit several answers of one request concurrently and
return the results in input order. The job is an :class:`AuditSpec` the harness runs:
preflight (duplicates merged, sizes fitted to the judge's window with the retry) → answer
segments → claims (one pass, or extraction then classification in batches; the stages are in
:mod:`evidex.jobs._audit_stages`) → merge → summary → decision → review routing, baseline alert
and the support-level distribution in the audit log and metrics.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field

from evidex.errors import ConfigError
from evidex.harness.job import JobResult, JobRun, Plan, Routed, verdict
from evidex.harness.ports import ReviewRequest
from evidex.jobs._audit_answer import answer_flagged, screen_answer, split_segments
from evidex.jobs._audit_budget import Fit, fit_to_window
from evidex.jobs._audit_inputs import (
    DEFAULT_CLAIMS_PER_BATCH,
    DEFAULT_SEGMENT_TOKENS,
    AnswerInput,
    AuditOptions,
    AuditOptionsModel,
    Mode,
    answer_inputs,
)
from evidex.jobs._audit_policy import (
    DISTRIBUTION_STEP,
    AuditDecision,
    AuditPolicy,
    Baseline,
    BaselineAlert,
    audit_metrics,
    check_alert,
    decide,
    read_baseline,
)
from evidex.jobs._audit_review import REVIEW as AUDIT_REVIEW
from evidex.jobs._audit_review import AuditReview, ClaimGrade
from evidex.jobs._audit_stages import (
    BUILTIN_PROMPTS,
    AuditPrompts,
    Stages,
    UnauditedSpan,
    given_claims,
)
from evidex.jobs._common import RunOptions, prompt_template, sync_of
from evidex.jobs._definition import Evaluation, JobDefinition, SpecContext
from evidex.jobs._suspects import Suspects
from evidex.judging import Judge
from evidex.preflight import coerce_passages, fit_passages, passage_of, prepare_passages
from evidex.tasks.audit import (
    CLASSIFY_TEMPLATE,
    ONE_PASS_TEMPLATE,
    AuditSummary,
    ClaimAudit,
    ClaimSpan,
    ExtractStep,
    SegmentBatch,
)
from evidex.tasks.spans import segment_text
from evidex.types import Event, Passage, PassageLike, RiskLevel, Source

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "DEFINITION",
    "AnswerInput",
    "AuditCall",
    "AuditDecision",
    "AuditOptions",
    "AuditOptionsModel",
    "AuditPolicy",
    "AuditResult",
    "AuditSpec",
    "AuditSummary",
    "ClaimAudit",
    "Mode",
    "UnauditedSpan",
    "aaudit",
    "aaudit_many",
    "audit",
    "audit_many",
]

logger = logging.getLogger("evidex.audit")


class AuditCall(AuditOptions, RunOptions, total=False):
    """Every keyword of an audit call."""


class AuditResult(JobResult):
    """The internal audit of one answer: every claim with its evidence, and the decision.

    Hand :attr:`decision` to anything user-facing, never this object: it holds judge output.
    """

    answer_id: str
    question: str | None = None
    mode: Mode
    risk: RiskLevel
    claims: list[ClaimAudit]
    summary: AuditSummary
    decision: AuditDecision
    source: Source
    reason: str | None = None
    unaudited: list[UnauditedSpan] = Field(default_factory=list)
    alert: BaselineAlert | None = None
    review_item_ids: list[int] = Field(default_factory=list)
    passages: list[Passage] = Field(default_factory=list, repr=False, exclude=True)
    """The passages as given (text, title, url, metadata), in input order; not serialised."""

    def passage(self, passage_id: str) -> Passage:
        """The passage behind ``passage_id`` (a claim's ``supporting_context_ids``), as given."""
        return passage_of(self.passages, passage_id)

    def report(self) -> dict[str, Any]:
        """The spec's output schema (answer_id, claims, summary) plus decision and provenance."""
        return self.model_dump(mode="json")


@dataclass(frozen=True)
class Prepared:
    """One preflighted answer: its passages, the fitted sizes, its segments or given claims."""

    answer_id: str
    item: AnswerInput
    passages: tuple[Passage, ...]
    fit: Fit
    segments: tuple[SegmentBatch, ...]
    claims: tuple[ClaimSpan, ...] | None
    given: tuple[Passage, ...] = ()
    """The passages as the caller gave them, before preflight."""
    withheld: tuple[tuple[int, int], ...] = ()
    """Stretches of the answer aimed at the grader, left out of grading."""


@dataclass(frozen=True)
class Graded:
    """What the stages found, before the decision."""

    mode: Mode
    claims: list[ClaimAudit]
    unaudited: list[UnauditedSpan]
    events: list[Event]


@dataclass(frozen=True)
class AuditSpec:
    """The audit job as the harness runs it. Every answer of one call is compared with the same
    baseline, read once before the run, so answers of one request do not move each other's
    alert."""

    mode: str = "one-pass"
    risk: RiskLevel = RiskLevel.LOW
    policy: AuditPolicy = dataclasses.field(default_factory=AuditPolicy)
    baseline: Baseline | None = None
    segment_tokens: int = DEFAULT_SEGMENT_TOKENS
    claims_per_batch: int = DEFAULT_CLAIMS_PER_BATCH
    prompts: AuditPrompts = BUILTIN_PROMPTS
    """The grading steps' prompts: a custom prompt replaces the one-pass prompt in ``one-pass``
    mode, the claim-grading prompt in ``two-pass`` mode."""
    job: str = "audit"

    @classmethod
    def of(cls, options: AuditOptionsModel, context: SpecContext) -> AuditSpec:
        """The spec for these (validated) options; the baseline is read from the store."""
        policy = options.policy or AuditPolicy()
        if options.mode == "one-pass":
            prompts = AuditPrompts(
                one_pass=prompt_template("audit", "audit", ONE_PASS_TEMPLATE, context.prompt)
            )
        else:
            prompts = AuditPrompts(
                grading=prompt_template(
                    "audit", "audit.classify", CLASSIFY_TEMPLATE, context.prompt
                )
            )
        return cls(
            prompts=prompts,
            mode=options.mode,
            risk=options.risk,
            policy=policy,
            baseline=read_baseline(context.store, policy),
            segment_tokens=options.segment_tokens,
            claims_per_batch=options.claims_per_batch,
        )

    def plan(self, item: AnswerInput, judge: Judge) -> Plan[Prepared]:
        """Preflight: duplicates merged, and sizes fitted to the judge's window with the retry
        (an empty context is allowed: it supports nothing)."""
        answer_id = item.answer_id or "answer-1"
        given = item.claims is not None
        if given and self.prompts.one_pass is not ONE_PASS_TEMPLATE:
            raise ConfigError(
                f"answer {answer_id!r} gives its claims, which the claim-grading prompt grades; "
                "a one-pass audit prompt cannot: use mode='two-pass' with a claim-grading prompt"
            )
        passages = coerce_passages(item.passages)
        originals = tuple(passages)
        events: list[Event] = []
        if not passages:
            events.append(
                Event(kind="empty_context", detail="no passages given: every claim is unsupported")
            )
        else:
            prepared = prepare_passages(
                passages, count_tokens=judge.count_tokens, query=item.question
            )
            passages, events = prepared.passages, list(prepared.events)
        answer_events, withheld = screen_answer(item.answer)
        events += answer_events
        fit = fit_to_window(
            judge,
            passages,
            extract=not given,
            classify=given or self.mode == "two-pass",
            risk=self.risk,
            segment_tokens=self.segment_tokens,
            claims_per_batch=self.claims_per_batch,
            prompts=self.prompts,
        )
        events += fit.events
        if fit.passage_limit is not None:
            cut = fit_passages(
                passages, count_tokens=judge.count_tokens, max_passage_tokens=fit.passage_limit
            )
            passages = cut.passages
            events += cut.events
        fitted = tuple(passages)
        segments = tuple(
            SegmentBatch(s.text, fitted, s.start, answer_id, item.question, self.risk)
            for s in split_segments(
                item.answer,
                segment_text(item.answer, fit.segment_tokens, judge.count_tokens),
                withheld,
            )
        )
        claims = None if item.claims is None else tuple(given_claims(item.answer, item.claims))
        return Plan(
            query=item.question or item.answer,
            data=Prepared(
                answer_id, item, fitted, fit, segments, claims, originals, tuple(withheld)
            ),
            risk=self.risk.value,
            events=tuple(events),
            id=answer_id,
        )

    async def execute(self, plan: Plan[Prepared], run: JobRun) -> Graded:
        data = plan.data
        stages = Stages(
            run, data.item, data.passages, data.fit.claims_per_batch, self.risk, self.prompts
        )
        events = list(plan.events)
        if data.claims is not None:
            claims = await stages.classify(list(data.claims))
            return Graded("two-pass", claims, [], events)
        if self.mode == "one-pass":
            claims, unaudited = await stages.one_pass(data.segments, events)
            return Graded("one-pass", claims, unaudited, events)
        claims, unaudited = await stages.two_pass(data.segments, events)
        return Graded("two-pass", claims, unaudited, events)

    def decide(self, plan: Plan[Prepared], graded: Graded, run: JobRun) -> AuditDecision:
        summary = AuditSummary.of(graded.claims)
        flagged = Suspects.of(plan.events, self.risk)
        where = flagged.to_route(p for c in graded.claims for p in c.supporting_context_ids)
        if flagged.routed and answer_flagged(plan.events):
            where.insert(0, "the answer")
        return decide(
            plan.data.answer_id,
            summary,
            risk=self.risk,
            policy=self.policy,
            source=verdict(run.outcomes),
            suspected=Suspects.reason(", ".join(where)) if where else None,
        )

    def reviews(self, plan: Plan[Prepared], graded: Graded, run: JobRun) -> list[ReviewRequest]:
        """An answer the decision sends to review, unless a fallback already did: then the
        fallback's one item of this answer gets the graded claims (every step's, numbered as
        the result numbers them) and the decision, so it holds what a reviewer needs."""
        decision = self.decide(plan, graded, run)
        item = plan.data.item
        payload = AuditReview(
            answer_id=plan.data.answer_id,
            question=item.question,
            answer=item.answer,
            claims=[ClaimGrade.model_validate(c.model_dump(mode="json")) for c in graded.claims],
            decision=decision.model_dump(mode="json"),
        )
        if run.fallbacks:
            run.amend_fallback_review(payload)
            return []
        if decision.decision != "review":
            return []
        return [
            run.review_request(
                "; ".join(r.message for r in decision.reasons),
                payload,
                [p.passage_id for p in plan.data.passages],
                passages=plan.data.passages,
            )
        ]

    def finish(
        self, plan: Plan[Prepared], graded: Graded, run: JobRun, routed: Sequence[Routed]
    ) -> AuditResult:
        answer_id, item = plan.data.answer_id, plan.data.item
        claims = graded.claims
        summary = AuditSummary.of(claims)
        source: Source = verdict(run.outcomes)
        decision = self.decide(plan, graded, run)
        alert = check_alert(
            answer_id, summary, self.baseline if source != "fallback" else None, self.policy
        )
        if alert is not None:
            logger.warning("audit alert for %s: %s", answer_id, alert.message)
            run.harness.note(run.ctx, "audit.alert", alert.message, **alert.model_dump())
        run.harness.note(
            run.ctx,
            DISTRIBUTION_STEP,
            f"{answer_id}: {summary.total_claims} claim(s), decision {decision.decision}",
            answer_id=answer_id,
            risk=self.risk.value,
            source=source,
            decision=decision.decision,
            unsupported_ratio=decision.unsupported_ratio,
            alert=alert is not None,
            **summary.model_dump(),
            claims=[
                {
                    "claim_id": c.claim_id,
                    "classification": c.classification,
                    "explanation": c.explanation,
                }
                for c in claims
            ],
        )
        fallbacks = run.fallbacks
        return AuditResult(
            answer_id=answer_id,
            question=item.question,
            mode=graded.mode,
            risk=self.risk,
            claims=claims,
            summary=summary,
            decision=decision,
            source=source,
            reason="; ".join(o.reason for o in fallbacks if o.reason) or None,
            unaudited=sorted(
                [*graded.unaudited, *(_withheld(a, b) for a, b in plan.data.withheld)],
                key=lambda u: u.start,
            ),
            alert=alert,
            events=graded.events,
            passages=list(plan.data.given),
            **run.provenance(_prompt_version(graded.mode, self.prompts)),
            **run.totals(routed),
        )


# ---------------------------------------------------------------------------------- entry points


async def aaudit(
    answer: str,
    passages: Iterable[PassageLike] = (),
    *,
    answer_id: str | None = None,
    question: str | None = None,
    claims: Sequence[str] | None = None,
    **options: Unpack[AuditCall],
) -> AuditResult:
    """Grade every factual claim of ``answer`` and decide publish / review / block.

    ``passages`` are the retrieved passages exactly as the generator saw them: strings, dicts or
    :class:`~evidex.types.Passage`; missing ids become ``passage-1``, ``passage-2`` ... by
    position, and titles and URLs are carried to the cited claims. With ``claims`` (spans
    already split by the caller) only the classification pass runs. A reply that is still
    invalid after the one retry sends the answer to review with ``source="fallback"``.
    Options: :class:`AuditOptions` and the run keywords of every job (``judge``, ``store``,
    ``settings``, ``hooks``, ``on_progress``).
    """
    item = AnswerInput(
        answer=answer,
        passages=list(passages),
        answer_id=answer_id,
        question=question,
        claims=list(claims) if claims is not None else None,
    )
    return await DEFINITION.arun(item, **options)


async def aaudit_many(
    items: Iterable[AnswerInput | Mapping[str, Any]], **options: Unpack[AuditCall]
) -> list[AuditResult]:
    """Audit several answers concurrently (bounded by ``settings.max_concurrency`` and the
    judge's own limit); results in input order.

    Answers without an id get ``answer-1``, ``answer-2`` ... by position; a repeated id is an
    input error.
    """
    return await DEFINITION.arun_many(items, **options)


def _line_input(data: Mapping[str, Any]) -> dict[str, Any]:
    """A bulk line's answer: its ``answer_id`` defaults to the task's ``id``."""
    fields = {k: v for k, v in data.items() if k in AnswerInput.model_fields}
    answer_id = data.get("answer_id", data.get("id"))
    fields["answer_id"] = None if answer_id is None else str(answer_id)
    return fields


def _metrics() -> tuple[Any, ...]:
    return (audit_metrics().observe,)


def _decision(result: AuditResult) -> dict[str, Any]:
    return result.decision.model_dump(mode="json")


DEFINITION: JobDefinition[AnswerInput, AuditOptionsModel, AuditResult] = JobDefinition(
    name="audit",
    options=AuditOptionsModel,
    input=AnswerInput,
    result=AuditResult,
    spec=AuditSpec.of,
    views={"decision": (AuditDecision, _decision)},
    line_input=_line_input,
    items=answer_inputs,
    subscribers=_metrics,
    review=AUDIT_REVIEW,
    evaluation=Evaluation(
        measures=("macro_f1", "f1(label=supported)", "accuracy", "claim_f1"),
        golden="evidex.evaluate.golden:AuditGolden",
        evaluator="evidex.evaluate.audit:AuditEvaluator",
    ),
)


audit = sync_of(aaudit)
audit_many = sync_of(aaudit_many)


def _withheld(start: int, end: int) -> UnauditedSpan:
    return UnauditedSpan(
        start=start,
        end=end,
        reason="text aimed at the grader: left out of what the judge graded",
    )


def _prompt_version(mode: str, prompts: AuditPrompts) -> str:
    if mode == "one-pass":
        return prompts.one_pass.version
    return f"{ExtractStep.template.version}+{prompts.grading.version}"
