"""The tier job end to end: preflight → batches → harness → merge → routing.

``tier()`` is the library call behind ``evidex tier`` and ``POST /tier``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from evidex._text import sha256_hex
from evidex.errors import InputError
from evidex.harness.ports import ReviewRequest, StorePort
from evidex.harness.runner import Harness, HarnessSettings, RunContext
from evidex.jobs._common import resolve_judge, resolve_store, run_sync
from evidex.judging import Judge
from evidex.preflight import prepare_passages
from evidex.tasks.tier import (
    DEFAULT_EXAMPLES,
    TierAssignment,
    TierBatch,
    TierExample,
    TierStep,
)
from evidex.types import DEFAULT_TIERS, Event, Passage, RiskLevel, TierScheme, Usage

__all__ = ["TierResult", "atier", "tier"]

MIN_BATCH, MAX_BATCH, DEFAULT_BATCH = 5, 15, 10


class TierResult(BaseModel):
    """Every input passage exactly once, in input order, with its tier and provenance."""

    query: str
    classifications: list[TierAssignment]
    tier_summary: dict[str, int]
    scheme: TierScheme
    passages: list[Passage] = Field(repr=False)
    events: list[Event] = Field(default_factory=list)
    review_item_ids: list[int] = Field(default_factory=list)
    judge_id: str
    prompt_version: str
    run_id: str
    usage: Usage = Field(default_factory=Usage)
    judge_calls: int = 0

    def tier_of(self, passage_id: str) -> str:
        for a in self.classifications:
            if a.passage_id == passage_id:
                return a.tier
        raise KeyError(passage_id)

    def in_tier(self, name: str) -> list[TierAssignment]:
        return [a for a in self.classifications if a.tier == name]

    def report(self) -> dict[str, Any]:
        """The spec's output schema plus provenance, for JSON output (no passage texts)."""
        return self.model_dump(mode="json", exclude={"passages", "scheme"})


def tier(
    query: str,
    passages: Iterable[Passage | dict[str, Any]],
    *,
    judge: Judge | str | None = None,
    store: StorePort | str | None = None,
    tiers: TierScheme | None = None,
    examples: Sequence[TierExample] | None = None,
    risk: RiskLevel | str = RiskLevel.LOW,
    batch_size: int = DEFAULT_BATCH,
    review_sample_rate: float = 1.0,
    settings: HarnessSettings | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> TierResult:
    """Assign each passage one relevance tier. See :func:`atier`."""
    return run_sync(
        atier(
            query,
            passages,
            judge=judge,
            store=store,
            tiers=tiers,
            examples=examples,
            risk=risk,
            batch_size=batch_size,
            review_sample_rate=review_sample_rate,
            settings=settings,
            on_progress=on_progress,
        )
    )


async def atier(
    query: str,
    passages: Iterable[Passage | dict[str, Any]],
    *,
    judge: Judge | str | None = None,
    store: StorePort | str | None = None,
    tiers: TierScheme | None = None,
    examples: Sequence[TierExample] | None = None,
    risk: RiskLevel | str = RiskLevel.LOW,
    batch_size: int = DEFAULT_BATCH,
    review_sample_rate: float = 1.0,
    settings: HarnessSettings | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> TierResult:
    """Assign each passage one relevance tier, in batches of ``batch_size`` (5-15).

    Nothing is lost: a duplicate passage takes its twin's tier (``duplicate_of``), a batch whose
    replies never validate gets the scheme's fallback tier with ``source="fallback"`` and a
    review item, and with ``risk="high"`` every top-tier grade is sampled into review at
    ``review_sample_rate``.
    """
    if not query or not query.strip():
        raise InputError("the query is empty")
    if not MIN_BATCH <= batch_size <= MAX_BATCH:
        raise InputError(
            f"batch_size must be between {MIN_BATCH} and {MAX_BATCH}, got {batch_size}"
        )
    if not 0.0 <= review_sample_rate <= 1.0:
        raise InputError(f"review_sample_rate must be within [0, 1], got {review_sample_rate}")
    risk = RiskLevel(risk)
    scheme = tiers or DEFAULT_TIERS
    if examples is None:
        examples = DEFAULT_EXAMPLES if scheme == DEFAULT_TIERS else ()
    items = [p if isinstance(p, Passage) else Passage.model_validate(p) for p in passages]

    the_judge = resolve_judge(judge, "tier")
    harness = Harness(the_judge, resolve_store(store), settings=settings)
    step = TierStep()
    ctx = RunContext(job="tier", query=query, risk=risk.value)

    overhead = the_judge.count_tokens(
        "".join(
            m.content
            for m in step.request(TierBatch(query, (), scheme, tuple(examples), risk)).messages
        )
    )
    limit = the_judge.passage_token_limit(overhead, batch_size)
    prepared = prepare_passages(
        items, count_tokens=the_judge.count_tokens, max_passage_tokens=limit
    )
    for event in prepared.events:
        harness.note(ctx, event.kind, event.detail, passage_ids=event.passage_ids, **event.data)

    batches = [
        TierBatch(
            query, tuple(prepared.passages[i : i + batch_size]), scheme, tuple(examples), risk
        )
        for i in range(0, len(prepared.passages), batch_size)
    ]
    outcomes = await harness.map(step, batches, ctx, on_progress=on_progress)

    by_id: dict[str, TierAssignment] = {}
    events = list(prepared.events)
    review_ids: list[int] = []
    usage, calls = Usage(), 0
    for outcome in outcomes:
        usage, calls = usage + outcome.usage, calls + outcome.judge_calls
        if outcome.review_item_id is not None:
            review_ids.append(outcome.review_item_id)
        for a in outcome.value.classifications:
            by_id[a.passage_id] = a.model_copy(
                update={"source": outcome.source_of(a.source), "reason": a.reason}
            )
        for warning in outcome.value.warnings:
            events.append(warning)
            harness.note(ctx, warning.kind, warning.detail, passage_ids=warning.passage_ids)
    for dup, original in prepared.duplicates.items():
        by_id[dup] = by_id[original].model_copy(
            update={"passage_id": dup, "duplicate_of": original}
        )

    ordered = [by_id[p.passage_id] for p in items]
    if risk is RiskLevel.HIGH:
        review_ids += _route_top_tier(harness, ctx, scheme, ordered, review_sample_rate)

    return TierResult(
        query=query,
        classifications=ordered,
        tier_summary=scheme.summary(a.tier for a in ordered),
        scheme=scheme,
        passages=items,
        events=events,
        review_item_ids=review_ids,
        judge_id=the_judge.judge_id,
        prompt_version=step.template.version,
        run_id=ctx.run_id,
        usage=usage,
        judge_calls=calls,
    )


def _route_top_tier(
    harness: Harness,
    ctx: RunContext,
    scheme: TierScheme,
    assignments: Sequence[TierAssignment],
    rate: float,
) -> list[int]:
    """High risk: a person confirms sampled top-tier grades (the spec's review gate).

    Sampling is deterministic per run and passage, so a re-run of the same run id routes the
    same passages.
    """
    ids = []
    for a in assignments:
        if a.tier != scheme.top or a.source == "fallback" or a.duplicate_of:
            continue
        if int(sha256_hex(f"{ctx.run_id}:{a.passage_id}")[:8], 16) / 0xFFFFFFFF >= rate:
            continue
        ids.append(
            harness.review(
                ctx,
                ReviewRequest(
                    job="tier",
                    reason=f"high risk: {scheme.top} grade needs human confirmation",
                    run_id=ctx.run_id,
                    risk=ctx.risk,
                    passage_ids=[a.passage_id],
                    payload={"query": ctx.query, "assignment": a.model_dump(mode="json")},
                ),
            )
        )
    return ids
