"""The audit job end to end: preflight → answer segments → claims (one pass, or extraction then
classification in batches) → merge → summary → decision → review routing, baseline alert and
the support-level distribution in the audit log and metrics.

``audit()`` is the library call behind ``evidex audit``; ``audit_many()`` audits several
answers of one request concurrently and keeps the results per answer id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evidex.errors import InputError
from evidex.harness.events import Hooks
from evidex.harness.ports import ReviewRequest, StorePort
from evidex.harness.runner import Harness, HarnessSettings, Outcome, RunContext
from evidex.jobs._audit_budget import Fit, fit_to_window
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
from evidex.jobs._common import resolve_judge, resolve_store, run_sync
from evidex.judging import Judge
from evidex.preflight import prepare_passages
from evidex.tasks._spans import find_span, segment_text
from evidex.tasks.audit import (
    AuditStep,
    AuditSummary,
    ClaimAudit,
    ClaimBatch,
    ClaimSpan,
    ClaimsValue,
    ClassifyStep,
    ExtractStep,
    SegmentBatch,
)
from evidex.types import Event, Passage, RiskLevel, Source, Usage

__all__ = [
    "AnswerInput",
    "AuditBatchResult",
    "AuditResult",
    "Mode",
    "UnauditedSpan",
    "aaudit",
    "aaudit_many",
    "audit",
    "audit_many",
]

logger = logging.getLogger("evidex.audit")

Mode = Literal["one-pass", "two-pass"]
MODES: tuple[str, ...] = ("one-pass", "two-pass")
DEFAULT_SEGMENT_TOKENS = 400
"""Answer tokens per judge call: a long answer is cut at sentence ends into segments this big,
so every claim fits in one reply and nothing is lost to a length limit."""
DEFAULT_CLAIMS_PER_BATCH = 8

PassageLike = Passage | str | dict[str, Any]


class AnswerInput(BaseModel):
    """One answer to audit, with the passages it was generated from."""

    model_config = ConfigDict(extra="forbid")

    answer: str
    passages: list[PassageLike] = Field(default_factory=list)
    answer_id: str | None = None
    question: str | None = None
    claims: list[str] | None = None
    """Claims already split by the caller (verbatim spans); then only classification runs."""


class UnauditedSpan(BaseModel):
    """A part of the answer whose claims no judge reply could give and that has no statement
    sentence to grade in their place (a segment's sentences otherwise become its claims): it
    went to review."""

    start: int
    end: int
    reason: str
    review_item_id: int | None = None


class AuditResult(BaseModel):
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
    events: list[Event] = Field(default_factory=list)
    review_item_ids: list[int] = Field(default_factory=list)
    judge_id: str
    prompt_version: str
    run_id: str
    usage: Usage = Field(default_factory=Usage)
    judge_calls: int = 0

    def report(self) -> dict[str, Any]:
        """The spec's output schema (answer_id, claims, summary) plus decision and provenance."""
        return self.model_dump(mode="json")


class AuditBatchResult(BaseModel):
    """Several answers of one request, keyed by answer id, in input order."""

    results: dict[str, AuditResult]
    baseline: Baseline | None = None

    def decisions(self) -> dict[str, AuditDecision]:
        return {answer_id: r.decision for answer_id, r in self.results.items()}


# ---------------------------------------------------------------------------------- entry points


def audit(
    answer: str,
    passages: Iterable[PassageLike] = (),
    *,
    answer_id: str | None = None,
    question: str | None = None,
    claims: Sequence[str] | None = None,
    mode: Mode | str = "one-pass",
    risk: RiskLevel | str = RiskLevel.LOW,
    policy: AuditPolicy | None = None,
    judge: Judge | str | None = None,
    store: StorePort | str | None = None,
    settings: HarnessSettings | None = None,
    hooks: Hooks | None = None,
    segment_tokens: int = DEFAULT_SEGMENT_TOKENS,
    claims_per_batch: int = DEFAULT_CLAIMS_PER_BATCH,
) -> AuditResult:
    """Audit one answer against the passages it was generated from. See :func:`aaudit`."""
    return run_sync(
        aaudit(
            answer,
            passages,
            answer_id=answer_id,
            question=question,
            claims=claims,
            mode=mode,
            risk=risk,
            policy=policy,
            judge=judge,
            store=store,
            settings=settings,
            hooks=hooks,
            segment_tokens=segment_tokens,
            claims_per_batch=claims_per_batch,
        )
    )


async def aaudit(
    answer: str,
    passages: Iterable[PassageLike] = (),
    *,
    answer_id: str | None = None,
    question: str | None = None,
    claims: Sequence[str] | None = None,
    mode: Mode | str = "one-pass",
    risk: RiskLevel | str = RiskLevel.LOW,
    policy: AuditPolicy | None = None,
    judge: Judge | str | None = None,
    store: StorePort | str | None = None,
    settings: HarnessSettings | None = None,
    hooks: Hooks | None = None,
    segment_tokens: int = DEFAULT_SEGMENT_TOKENS,
    claims_per_batch: int = DEFAULT_CLAIMS_PER_BATCH,
) -> AuditResult:
    """Grade every factual claim of ``answer`` and decide publish / review / block.

    ``passages`` are the retrieved passages exactly as the generator saw them: strings, dicts or
    :class:`~evidex.types.Passage`; missing ids become ``passage-1``, ``passage-2`` ... by
    position, and titles and URLs are carried to the cited claims. ``mode`` ``one-pass`` asks
    the judge to extract and classify at once; ``two-pass`` extracts first, then classifies
    claims in batches of ``claims_per_batch``. With ``claims`` (spans already split by the
    caller) only the classification pass runs. A reply that is still invalid after the one
    retry sends the answer to review with ``source="fallback"``.
    """
    item = AnswerInput(
        answer=answer,
        passages=list(passages),
        answer_id=answer_id,
        question=question,
        claims=list(claims) if claims is not None else None,
    )
    batch = await aaudit_many(
        [item],
        mode=mode,
        risk=risk,
        policy=policy,
        judge=judge,
        store=store,
        settings=settings,
        hooks=hooks,
        segment_tokens=segment_tokens,
        claims_per_batch=claims_per_batch,
    )
    return next(iter(batch.results.values()))


def audit_many(
    items: Iterable[AnswerInput | dict[str, Any]],
    *,
    mode: Mode | str = "one-pass",
    risk: RiskLevel | str = RiskLevel.LOW,
    policy: AuditPolicy | None = None,
    judge: Judge | str | None = None,
    store: StorePort | str | None = None,
    settings: HarnessSettings | None = None,
    hooks: Hooks | None = None,
    segment_tokens: int = DEFAULT_SEGMENT_TOKENS,
    claims_per_batch: int = DEFAULT_CLAIMS_PER_BATCH,
    on_progress: Callable[[int, int], None] | None = None,
) -> AuditBatchResult:
    """Audit several answers of one request. See :func:`aaudit_many`."""
    return run_sync(
        aaudit_many(
            items,
            mode=mode,
            risk=risk,
            policy=policy,
            judge=judge,
            store=store,
            settings=settings,
            hooks=hooks,
            segment_tokens=segment_tokens,
            claims_per_batch=claims_per_batch,
            on_progress=on_progress,
        )
    )


async def aaudit_many(
    items: Iterable[AnswerInput | dict[str, Any]],
    *,
    mode: Mode | str = "one-pass",
    risk: RiskLevel | str = RiskLevel.LOW,
    policy: AuditPolicy | None = None,
    judge: Judge | str | None = None,
    store: StorePort | str | None = None,
    settings: HarnessSettings | None = None,
    hooks: Hooks | None = None,
    segment_tokens: int = DEFAULT_SEGMENT_TOKENS,
    claims_per_batch: int = DEFAULT_CLAIMS_PER_BATCH,
    on_progress: Callable[[int, int], None] | None = None,
) -> AuditBatchResult:
    """Audit several answers concurrently (bounded by ``settings.max_concurrency``).

    Answers without an id get ``answer-1``, ``answer-2`` ... by position; a repeated id is an
    input error. Every answer is compared with the same baseline, read once before the run, so
    answers of one request do not move each other's alert.
    """
    answers = _inputs(items)
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if segment_tokens < 50:
        raise InputError(f"segment_tokens must be at least 50, got {segment_tokens}")
    if not 1 <= claims_per_batch <= 50:
        raise InputError(f"claims_per_batch must be between 1 and 50, got {claims_per_batch}")
    the_policy = policy or AuditPolicy()
    the_risk = RiskLevel(risk)
    the_judge = resolve_judge(judge, "audit")
    the_store = resolve_store(store)
    bus = Hooks()
    bus.subscribe(audit_metrics().observe)
    if hooks is not None:
        bus.subscribe(hooks.emit)
    harness = Harness(the_judge, the_store, settings=settings, hooks=bus)
    baseline = read_baseline(the_store, the_policy)
    runner = _Auditor(
        harness, str(mode), the_risk, the_policy, baseline, segment_tokens, claims_per_batch
    )

    semaphore = asyncio.Semaphore(max(1, harness.settings.max_concurrency))
    done = 0

    async def one(answer_id: str, item: AnswerInput) -> AuditResult:
        nonlocal done
        async with semaphore:
            result = await runner.run(answer_id, item)
        done += 1
        if on_progress is not None:
            on_progress(done, len(answers))
        return result

    results = await asyncio.gather(*(one(aid, item) for aid, item in answers))
    return AuditBatchResult(results={r.answer_id: r for r in results}, baseline=baseline)


# ---------------------------------------------------------------------------------- inputs


def _inputs(items: Iterable[AnswerInput | dict[str, Any]]) -> list[tuple[str, AnswerInput]]:
    answers: list[tuple[str, AnswerInput]] = []
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
        answers.append((answer_id, item))
    if not answers:
        raise InputError("no answers given: at least one answer is required")
    return answers


def as_passages(items: Iterable[PassageLike]) -> list[Passage]:
    """Passages from strings, dicts or Passages; a missing id becomes ``passage-N`` (1-based)."""
    out: list[Passage] = []
    for index, item in enumerate(items, 1):
        if isinstance(item, Passage):
            out.append(item)
            continue
        data: dict[str, Any] = {"text": item} if isinstance(item, str) else dict(item)
        if not any(k in data for k in ("passage_id", "id", "pid", "docid")):
            data["passage_id"] = f"passage-{index}"
        try:
            out.append(Passage.model_validate(data))
        except ValidationError as exc:
            raise InputError(f"passage {index}: {_first_error(exc)}") from exc
    return out


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where + ': ' if where else ''}{err['msg']}"


# ---------------------------------------------------------------------------------- one answer


class _Auditor:
    """Runs the steps for one answer and turns the outcomes into an :class:`AuditResult`."""

    def __init__(
        self,
        harness: Harness,
        mode: str,
        risk: RiskLevel,
        policy: AuditPolicy,
        baseline: Baseline | None,
        segment_tokens: int,
        claims_per_batch: int,
    ) -> None:
        self.harness = harness
        self.judge = harness.judge
        self.mode = mode
        self.risk = risk
        self.policy = policy
        self.baseline = baseline
        self.segment_tokens = segment_tokens
        self.claims_per_batch = claims_per_batch

    async def run(self, answer_id: str, item: AnswerInput) -> AuditResult:
        ctx = RunContext(job="audit", query=item.question or item.answer, risk=self.risk.value)
        given = item.claims is not None
        passages, fit, events = self._prepare(
            ctx,
            as_passages(item.passages),
            extract=not given,
            classify=given or self.mode == "two-pass",
        )
        answer = item.answer
        segments = [
            SegmentBatch(s.text, passages, s.start, answer_id, item.question, self.risk)
            for s in segment_text(answer, fit.segment_tokens, self.judge.count_tokens)
        ]
        outcomes: list[Outcome[Any]] = []
        unaudited: list[UnauditedSpan] = []
        mode: Mode
        if item.claims is not None:
            mode = "two-pass"
            claims = await self._classify(
                ctx, _given_claims(answer, item.claims), item, passages, fit, outcomes, answer_id
            )
        elif self.mode == "one-pass":
            mode = "one-pass"
            found = await self.harness.map(AuditStep(), segments, ctx)
            outcomes += found
            unaudited += _unaudited(segments, found)
            for outcome in found:
                events += self._warn(ctx, outcome.value)
            skipped = self._skipped(ctx, found, events)
            claims = _with_source(found)
            if skipped:
                claims += await self._classify(
                    ctx, skipped, item, passages, fit, outcomes, answer_id
                )
            claims = _renumbered(claims)
        else:
            mode = "two-pass"
            extracted = await self.harness.map(ExtractStep(), segments, ctx)
            outcomes += extracted
            unaudited += _unaudited(segments, extracted)
            found_spans = [c for o in extracted for c in o.value.claims]
            spans = _renumbered_spans(found_spans + self._skipped(ctx, extracted, events))
            claims = await self._classify(ctx, spans, item, passages, fit, outcomes, answer_id)
        return self._finish(ctx, answer_id, item, mode, claims, outcomes, unaudited, events)

    def _prepare(
        self, ctx: RunContext, passages: list[Passage], *, extract: bool, classify: bool
    ) -> tuple[tuple[Passage, ...], Fit, list[Event]]:
        """Preflight: duplicates merged, and sizes fitted to the judge's window with the retry
        (an empty context is allowed: it supports nothing)."""
        events: list[Event] = []
        if not passages:
            events.append(
                Event(kind="empty_context", detail="no passages given: every claim is unsupported")
            )
        else:
            prepared = prepare_passages(passages, count_tokens=self.judge.count_tokens)
            passages, events = prepared.passages, list(prepared.events)
        fit = fit_to_window(
            self.judge,
            passages,
            extract=extract,
            classify=classify,
            risk=self.risk,
            segment_tokens=self.segment_tokens,
            claims_per_batch=self.claims_per_batch,
        )
        events += fit.events
        if fit.passage_limit is not None:
            cut = prepare_passages(
                passages, count_tokens=self.judge.count_tokens, max_passage_tokens=fit.passage_limit
            )
            passages = cut.passages
            events += cut.events
        for event in events:
            self.harness.note(
                ctx, event.kind, event.detail, passage_ids=event.passage_ids, **event.data
            )
        return tuple(passages), fit, events

    async def _classify(
        self,
        ctx: RunContext,
        spans: list[ClaimSpan],
        item: AnswerInput,
        passages: tuple[Passage, ...],
        fit: Fit,
        outcomes: list[Outcome[Any]],
        answer_id: str,
    ) -> list[ClaimAudit]:
        size = fit.claims_per_batch
        batches = [
            ClaimBatch(
                tuple(spans[i : i + size]), passages, item.answer_id, item.question, self.risk
            )
            for i in range(0, len(spans), size)
        ]
        graded = await self.harness.map(ClassifyStep(), batches, ctx)
        outcomes += graded
        return _with_source(graded)

    def _skipped(
        self, ctx: RunContext, outcomes: Sequence[Outcome[Any]], events: list[Event]
    ) -> list[ClaimSpan]:
        """Sentences the judge gave no claim, to be graded as claims of their own; noted in
        the audit log and the result's events, so a judge that skips is visible."""
        skipped: list[ClaimSpan] = [s for o in outcomes for s in o.value.skipped]
        if skipped:
            event = Event(
                kind="sentences_without_claims",
                detail=f"the judge gave no claim for {len(skipped)} sentence(s) that state a "
                "fact; each is graded as one claim",
                data={"sentences": [[s.start, s.end] for s in skipped]},
            )
            self.harness.note(ctx, event.kind, event.detail, **event.data)
            events.append(event)
        return skipped

    def _warn(self, ctx: RunContext, value: ClaimsValue) -> list[Event]:
        for warning in value.warnings:
            self.harness.note(ctx, warning.kind, warning.detail, **warning.data)
        return list(value.warnings)

    def _finish(
        self,
        ctx: RunContext,
        answer_id: str,
        item: AnswerInput,
        mode: Mode,
        claims: list[ClaimAudit],
        outcomes: Sequence[Outcome[Any]],
        unaudited: list[UnauditedSpan],
        events: list[Event],
    ) -> AuditResult:
        summary = AuditSummary.of(claims)
        fallbacks = [o for o in outcomes if o.source == "fallback"]
        source: Source = (
            "fallback"
            if fallbacks
            else "cache"
            if outcomes and all(o.source == "cache" for o in outcomes)
            else "judge"
        )
        decision = decide(answer_id, summary, risk=self.risk, policy=self.policy, source=source)
        review_ids = [o.review_item_id for o in fallbacks if o.review_item_id is not None]
        if decision.decision == "review" and not fallbacks:
            review_ids.append(self._route(ctx, answer_id, item, claims, decision))
        alert = check_alert(
            answer_id, summary, self.baseline if source != "fallback" else None, self.policy
        )
        if alert is not None:
            logger.warning("audit alert for %s: %s", answer_id, alert.message)
            self.harness.note(ctx, "audit.alert", alert.message, **alert.model_dump())
        self.harness.note(
            ctx,
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
        usage = Usage()
        for outcome in outcomes:
            usage = usage + outcome.usage
        return AuditResult(
            answer_id=answer_id,
            question=item.question,
            mode=mode,
            risk=self.risk,
            claims=claims,
            summary=summary,
            decision=decision,
            source=source,
            reason="; ".join(o.reason for o in fallbacks if o.reason) or None,
            unaudited=unaudited,
            alert=alert,
            events=events,
            review_item_ids=review_ids,
            judge_id=self.judge.judge_id,
            prompt_version=_prompt_version(mode),
            run_id=ctx.run_id,
            usage=usage,
            judge_calls=sum(o.judge_calls for o in outcomes),
        )

    def _route(
        self,
        ctx: RunContext,
        answer_id: str,
        item: AnswerInput,
        claims: Sequence[ClaimAudit],
        decision: AuditDecision,
    ) -> int:
        return self.harness.review(
            ctx,
            ReviewRequest(
                job="audit",
                reason="; ".join(r.message for r in decision.reasons),
                run_id=ctx.run_id,
                risk=ctx.risk,
                payload={
                    "answer_id": answer_id,
                    "question": item.question,
                    "answer": item.answer,
                    "claims": [c.model_dump(mode="json") for c in claims],
                    "decision": decision.model_dump(mode="json"),
                },
            ),
        )


def _given_claims(answer: str, texts: Sequence[str]) -> list[ClaimSpan]:
    """Claims split by the caller: each must be verbatim in the answer (a usage error if not)."""
    spans: list[ClaimSpan] = []
    cursor = 0
    for index, text in enumerate(texts, 1):
        span = find_span(answer, text, cursor) or find_span(answer, text)
        if span is None:
            raise InputError(f"claim {index} ({text[:80]!r}) is not verbatim in the answer")
        cursor = span[1]
        spans.append(
            ClaimSpan(
                claim_id=f"claim-{index}",
                claim_text=answer[span[0] : span[1]],
                start=span[0],
                end=span[1],
            )
        )
    return spans


def _unaudited(
    segments: Sequence[SegmentBatch], outcomes: Sequence[Outcome[Any]]
) -> list[UnauditedSpan]:
    return [
        UnauditedSpan(
            start=s.offset,
            end=s.offset + len(s.answer),
            reason=o.reason or "fallback",
            review_item_id=o.review_item_id,
        )
        for s, o in zip(segments, outcomes, strict=True)
        # a segment is covered when the fallback kept claims or handed on sentences to grade
        if o.source == "fallback" and not o.kept and not o.value.skipped
    ]


def _with_source(outcomes: Sequence[Outcome[Any]]) -> list[ClaimAudit]:
    """Claims marked with where their batch's value came from (judge, cache or fallback)."""
    return [
        c.model_copy(update={"source": o.source_of(c.source)})
        for o in outcomes
        for c in o.value.claims
    ]


def _renumbered(claims: Sequence[ClaimAudit]) -> list[ClaimAudit]:
    """Claims in answer order, numbered ``claim-1`` ... across segments."""
    ordered = sorted(claims, key=lambda c: (c.start, c.end))
    return [c.model_copy(update={"claim_id": f"claim-{i}"}) for i, c in enumerate(ordered, 1)]


def _renumbered_spans(spans: Sequence[ClaimSpan]) -> list[ClaimSpan]:
    ordered = sorted(spans, key=lambda c: (c.start, c.end))
    return [c.model_copy(update={"claim_id": f"claim-{i}"}) for i, c in enumerate(ordered, 1)]


def _prompt_version(mode: str) -> str:
    if mode == "one-pass":
        return AuditStep.template.version
    return f"{ExtractStep.template.version}+{ClassifyStep.template.version}"
