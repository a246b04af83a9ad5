"""A judge of two stages, run by the harness: the cheap stage scores, the uncertain go on.

A job hands :func:`staged` its passages and how its own judge grades some of them
(``expensive``); what the judge is does not concern it. With a one-stage judge that is the
whole run. With a cascade (:meth:`Judge.staging`), the cheap stage scores every passage first,
in runs of their own (:meth:`JobRun.stage`: the same harness, audit rows under that stage's
judge id), the judge's band splits them, and only the uncertain go to ``expensive`` on the
expensive stage. The job then makes its items of the settled scores in its own terms (a tier,
a place in the ranking).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from evidex.frontier import FrontierRule, Stop
from evidex.harness.frontier_pool import FrontierPool
from evidex.harness.job import JobRun
from evidex.judging import Staging
from evidex.tasks.base import Step
from evidex.tasks.rerank import ScoreBatch, ScoreBatchValue
from evidex.types import Event, Passage, Source

__all__ = [
    "CHEAP_BATCH",
    "CheapScores",
    "FrontierRun",
    "Settled",
    "Staged",
    "cheap_scores",
    "staged",
]

CHEAP_BATCH = 64
"""Passages per cheap-stage call: the encoder reads each alone, so this only bounds a call."""

M = TypeVar("M")


@dataclass(frozen=True)
class Settled:
    """A passage the cheap stage was sure of: its score, the stage's words and where the score
    came from."""

    passage: Passage
    score: float
    justification: str
    source: Source


@dataclass(frozen=True)
class FrontierRun:
    """How the frontier rule routed a query: the rule, its rounds and why they ended."""

    rule: FrontierRule
    source: str
    rounds: int
    stopped: Stop
    pooled: int = 1
    """How many queries shared the budget (a run's inputs run together; 1: this one alone)."""


@dataclass
class Staged(Generic[M]):
    """What a staged run found: the expensive stage's items (all items, with a one-stage
    judge), the passages the cheap stage settled, and how the split went."""

    judged: list[M]
    sent: list[Passage]
    settled: list[Settled] = field(default_factory=list)
    staging: Staging | None = None
    """The judge's stages; None: a one-stage judge judged everything."""
    expensive: JobRun | None = None
    """The expensive stage's run (its calls and cost), with a staged judge."""
    cheap_failures: list[str] = field(default_factory=list)
    """Reasons of the cheap stage's fallbacks (their passages were sent on, or, with
    ``send_failed=False``, nothing was)."""
    frontier: FrontierRun | None = None
    """How the frontier rule routed the query; None: the band did."""


@dataclass
class CheapScores:
    """The cheap stage's scores of one query's passages: what a job reads to settle, before
    anything goes to the expensive stage."""

    staging: Staging
    scores: dict[str, float] = field(default_factory=dict)
    """Passage id -> score, for the passages of every chunk that did not fall back."""
    justifications: dict[str, str] = field(default_factory=dict)
    sources: dict[str, Source] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    """Reasons of the cheap stage's fallbacks (their passages have no score)."""


async def cheap_scores(
    run: JobRun,
    query: str,
    passages: Sequence[Passage],
    cheap_step: Step[ScoreBatch, ScoreBatchValue],
) -> CheapScores | None:
    """The cheap stage's scores of ``passages`` (in runs of their own, :meth:`JobRun.stage`),
    with the band's warnings noted on ``run``; None with a one-stage judge."""
    staging = run.judge.staging()
    if staging is None:
        return None
    cheap = run.stage(staging.cheap_scorer())
    chunks = [
        ScoreBatch(query, tuple(passages[i : i + CHEAP_BATCH]))
        for i in range(0, len(passages), CHEAP_BATCH)
    ]
    scored = await cheap.map(cheap_step, chunks, progress=False)
    found = CheapScores(staging)
    for outcome in scored:
        if outcome.source == "fallback":  # pseudo-scores settle nothing
            found.failures.append(outcome.reason or "the cheap stage fell back")
            continue
        for s in outcome.value.scores:
            found.scores[s.passage_id] = s.relevance_score
            found.justifications[s.passage_id] = s.justification
            found.sources[s.passage_id] = outcome.source
    for stale in staging.warnings:
        run.note(Event(kind="cascade.stale_band", detail=stale))
    return found


async def staged(
    run: JobRun,
    query: str,
    passages: Sequence[Passage],
    expensive: Callable[[JobRun, Sequence[Passage]], Awaitable[list[M]]],
    cheap_step: Step[ScoreBatch, ScoreBatchValue],
    *,
    send_failed: bool = True,
    verdict: Callable[[M], tuple[str, bool]] | None = None,
) -> Staged[M]:
    """Judge ``passages`` with the run's judge, its cheap stage first when it has one.

    ``expensive(run, passages)``: how the job grades passages on a run. A cheap-stage call that
    falls back settles nothing: its passages go on (``send_failed``), or the expensive stage is
    not run at all (a ranking that cannot order part of its head keeps the retrieval order).
    ``verdict(item)``: the passage id of an item and whether it counts as relevant (a fallback
    does not); given, the judge's frontier rule routes the query when it has one."""
    found = await cheap_scores(run, query, passages, cheap_step)
    if found is None:
        return Staged(await expensive(run, passages), list(passages))
    staging = found.staging
    result: Staged[M] = Staged([], [], staging=staging, cheap_failures=found.failures)
    rule = staging.frontier() if verdict is not None else None
    if verdict is not None and rule is not None:
        return await _by_frontier(result, run, found, passages, expensive, verdict, rule)
    scored = [p for p in passages if p.passage_id in found.scores]
    result.sent = [p for p in passages if p.passage_id not in found.scores]
    split = staging.split([found.scores[p.passage_id] for p in scored])
    result.sent += [scored[i] for i in split.sent]
    order = {p.passage_id: i for i, p in enumerate(passages)}
    result.sent.sort(key=lambda p: order[p.passage_id])
    result.settled = [_settled(found, scored[i]) for i in split.settled]
    if result.cheap_failures and not send_failed:
        return result
    result.expensive = run.stage(staging.expensive)
    if result.sent:
        result.judged = await expensive(result.expensive, result.sent)
    return result


async def _by_frontier(
    result: Staged[M],
    run: JobRun,
    found: CheapScores,
    passages: Sequence[Passage],
    expensive: Callable[[JobRun, Sequence[Passage]], Awaitable[list[M]]],
    verdict: Callable[[M], tuple[str, bool]],
    rule: FrontierRule,
) -> Staged[M]:
    """The frontier rule's rounds: each round's passages graded by the expensive stage before
    the next is chosen; passages the cheap stage could not score are sent first and counted in
    the budget. Over the run's pool when the input is one of a run's
    (:class:`~evidex.harness.frontier_pool.FrontierPool`: the budget shared by its inputs, the
    rule as fitted and measured), else over this query alone."""
    staging = found.staging
    scored = [p for p in passages if p.passage_id in found.scores]
    outside = [p for p in passages if p.passage_id not in found.scores]
    result.expensive = run.stage(staging.expensive)
    if outside:
        result.judged += await expensive(result.expensive, outside)
    pooled = run.ctx.frontier_pool
    if pooled is None:
        pool, key = FrontierPool(rule, 1), 0
    else:
        pool, key = pooled
        rule = pool.rule
    pool.join(key, [found.scores[p.passage_id] for p in scored], len(outside))
    try:
        while (asked := await pool.asked(key)) is not None:
            batch = [scored[i] for i in asked]
            graded = await expensive(result.expensive, batch)
            result.judged += graded
            relevant = dict(verdict(item) for item in graded)
            pool.record(key, [relevant.get(p.passage_id, False) for p in batch])
    finally:
        pool.leave(key)
    sent = {p.passage_id for p in outside} | {scored[i].passage_id for i in pool.sent(key)}
    result.sent = [p for p in passages if p.passage_id in sent]
    result.settled = [_settled(found, p) for p in scored if p.passage_id not in sent]
    result.frontier = FrontierRun(
        rule,
        staging.rule_source,
        pool.rounds_of(key),
        pool.stopped or "budget spent",
        pooled=pool.members,
    )
    return result


def _settled(found: CheapScores, passage: Passage) -> Settled:
    pid = passage.passage_id
    return Settled(passage, found.scores[pid], found.justifications[pid], found.sources[pid])
