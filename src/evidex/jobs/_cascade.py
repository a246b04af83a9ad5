"""The tier job over a cascade judge: the cheap stage scores, the band goes on.

Both stages are runs of the job over their own judge (:meth:`JobRun.stage`), so every call of
either stage gets the harness's validation, re-asks, fallback, review items, cache and audit
rows, filed under that stage's judge id. The split itself is the judge's
(:meth:`CascadeJudge.split`); this module only wires it to the tier steps and reports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from pydantic import BaseModel

from evidex.harness.assemble import stamped
from evidex.harness.job import JobRun
from evidex.judges.cascade import CascadeJudge
from evidex.judges.scoring import ScoringJudge
from evidex.tasks.base import PromptTemplate
from evidex.tasks.rerank import RankedPassage, ScoreBatch, ScoreStep
from evidex.tasks.tier import TierAssignment, TierBatch, TierBatchValue, TierStep
from evidex.types import Event, Passage

__all__ = ["CascadeReport", "CheapScoreStep", "cascade_ranking", "cascade_tiers"]

CHEAP_BATCH = 64
"""Passages per cheap-stage call: the encoder reads each alone, so this only bounds a call."""


class CheapScoreStep(ScoreStep, name="tier.cascade_score"):
    """The cheap stage of a cascade: one score per passage (filed under the tier job)."""


class CascadeReport(BaseModel):
    """How a cascade split one result, and what it saved against the expensive judge alone."""

    cheap: str
    expensive: str
    band: tuple[float, float]
    band_source: str
    items: int
    settled: int
    """Items the cheap stage judged (scored outside the band)."""
    sent: int
    """Items the expensive stage judged (scored inside the band, or the cheap stage failed)."""
    expensive_calls: int
    """Calls the expensive judge received, re-asks included."""
    calls_saved: int
    """Batches the expensive judge alone would have been sent, less those it was sent."""
    cost_saved: float | None
    """The settled items at the expensive stage's priced cost per item sent; ``None`` when
    that stage is not priced or was sent nothing."""


async def cascade_tiers(
    judge: CascadeJudge,
    run: JobRun,
    query: str,
    passages: Sequence[Passage],
    batch_of: Callable[[Sequence[Passage]], TierBatch],
    step: TierStep,
    batch_size: int,
) -> tuple[dict[str, TierAssignment], CascadeReport]:
    """Assignments by passage id, the cheap stage's and the expensive stage's, and the report."""
    tiers = list(batch_of(()).scheme.names)
    cheap = run.stage(ScoringJudge(judge.cheap))
    chunks = [
        ScoreBatch(query, tuple(passages[i : i + CHEAP_BATCH]))
        for i in range(0, len(passages), CHEAP_BATCH)
    ]
    scored = await cheap.map(CheapScoreStep(), chunks, progress=False)
    by_id: dict[str, TierAssignment] = {}
    sent: list[Passage] = []
    cheap_id = judge.cheap.judge_id
    for chunk, outcome in zip(chunks, scored, strict=True):
        if outcome.source == "fallback":  # pseudo-scores settle nothing: all go on
            sent.extend(chunk.passages)
            continue
        scores = {s.passage_id: s for s in outcome.value.scores}
        values = [scores[p.passage_id].relevance_score for p in chunk.passages]
        split = judge.split(values)
        sent.extend(chunk.passages[i] for i in split.sent)
        for i in split.settled:
            pid, value = chunk.passages[i].passage_id, values[i]
            by_id[pid] = TierAssignment(
                passage_id=pid,
                tier=judge.cheap_tier(value, tiers),
                justification=f"{scores[pid].justification}; cascade: settled by {cheap_id} "
                f"(score {value:.3f} outside the uncertain band {judge.band.label()})",
                source=outcome.source,
                judged_by=cheap_id,
            )
    expensive = run.stage(judge.expensive)
    if sent:
        batches = [batch_of(sent[i : i + batch_size]) for i in range(0, len(sent), batch_size)]
        outcomes = await expensive.map(step, batches)
        graded = stamped(outcomes, _classifications, judged_by=judge.expensive.judge_id)
        by_id.update((a.passage_id, a) for a in graded)
        run.note_warnings(outcomes)
    for stale in judge.warnings:
        run.note(Event(kind="cascade.stale_band", detail=stale))
    report = _report(judge, expensive, len(passages), len(sent), batch_size)
    run.note(
        Event(
            kind="cascade.split",
            detail=f"{report.settled} of {report.items} passage(s) settled by {cheap_id}, "
            f"{report.sent} sent to {judge.expensive.judge_id} (band {judge.band.label()}, "
            f"{judge.band_source}); {report.calls_saved} call(s) saved",
            passage_ids=[p.passage_id for p in sent],
            data={"settled": report.settled, "sent": report.sent},
        )
    )
    return by_id, report


async def cascade_ranking(
    judge: CascadeJudge,
    run: JobRun,
    query: str,
    passages: Sequence[Passage],
    template: PromptTemplate | None,
    batch_size: int,
) -> tuple[list[RankedPassage], list[str], list[Event]]:
    """Pointwise rerank over a cascade: the ranking, the reasons of any fallback, and the
    split's event (for the job to keep and log with its own).

    The cheap stage scores every candidate. Those above the band keep their cheap order at the
    top, those below it at the bottom; the band in between is ordered by the expensive judge's
    scores (the scores of two judges are not comparable, so each group keeps its own). When a
    call of either stage falls back, the whole head keeps its retrieval order, as a pointwise
    rerank does when part of its scoring fails.
    """
    cheap_id, expensive_id = judge.cheap.judge_id, judge.expensive.judge_id
    cheap = run.stage(ScoringJudge(judge.cheap))
    chunks = [
        ScoreBatch(query, tuple(passages[i : i + CHEAP_BATCH]))
        for i in range(0, len(passages), CHEAP_BATCH)
    ]
    scored = await cheap.map(ScoreStep(), chunks, progress=False)
    failed = [o.reason or "the cheap stage fell back" for o in scored if o.source == "fallback"]
    if failed:
        return _kept_order(passages, failed[0]), failed, []
    values = {s.passage_id: s for o in scored for s in o.value.scores}
    source = {s.passage_id: o.source for o in scored for s in o.value.scores}
    split = judge.split([values[p.passage_id].relevance_score for p in passages])
    band = [passages[i] for i in split.sent]
    expensive = run.stage(judge.expensive)
    batches = [
        ScoreBatch(query, tuple(band[i : i + batch_size])) for i in range(0, len(band), batch_size)
    ]
    outcomes = await expensive.map(ScoreStep(template), batches) if batches else []
    failed = [
        o.reason or "the expensive stage fell back" for o in outcomes if o.source == "fallback"
    ]
    if failed:
        return _kept_order(passages, failed[0]), failed, []
    position = {p.passage_id: i for i, p in enumerate(passages)}

    def settled(pid: str) -> RankedPassage:
        s = values[pid]
        return RankedPassage(
            rank=0,
            passage_id=pid,
            relevance_score=s.relevance_score,
            justification=f"{s.justification}; cascade: settled by {cheap_id} (score "
            f"{s.relevance_score:.3f} outside the uncertain band {judge.band.label()})",
            source=source[pid],
            judged_by=cheap_id,
        )

    ids = [passages[i].passage_id for i in split.settled]
    above = [pid for pid in ids if values[pid].relevance_score >= judge.band.high]
    below = [pid for pid in ids if values[pid].relevance_score < judge.band.low]
    by_cheap = sorted(above, key=lambda pid: (-values[pid].relevance_score, position[pid]))
    middle = sorted(
        ((s, o.source) for o in outcomes for s in o.value.scores),
        key=lambda pair: (-pair[0].relevance_score, position[pair[0].passage_id]),
    )
    placed = [settled(pid) for pid in by_cheap]
    placed += [
        RankedPassage(
            rank=0,
            passage_id=s.passage_id,
            relevance_score=s.relevance_score,
            justification=f"{s.justification}; cascade: in the uncertain band, scored by "
            f"{expensive_id}",
            source=src,
            judged_by=expensive_id,
        )
        for s, src in middle
    ]
    placed += [
        settled(pid)
        for pid in sorted(below, key=lambda pid: (-values[pid].relevance_score, position[pid]))
    ]
    calls_saved = math.ceil(len(passages) / batch_size) - len(batches)
    split_event = Event(
        kind="cascade.split",
        detail=f"{len(ids)} of {len(passages)} candidate(s) placed by {cheap_id}, "
        f"{len(band)} scored by {expensive_id} (band {judge.band.label()}, "
        f"{judge.band_source}); {calls_saved} call(s) saved",
        passage_ids=[p.passage_id for p in band],
        data={"settled": len(ids), "sent": len(band), "calls_saved": calls_saved},
    )
    return placed, [], [split_event]


def _classifications(value: TierBatchValue) -> list[TierAssignment]:
    return value.classifications


def _kept_order(passages: Sequence[Passage], reason: str) -> list[RankedPassage]:
    return [
        RankedPassage(
            rank=0,
            passage_id=p.passage_id,
            justification="Fallback: scoring failed for part of the candidates; the original "
            "retrieval order was kept and the query flagged for review.",
            source="fallback",
            reason=reason,
        )
        for p in passages
    ]


def _report(
    judge: CascadeJudge, expensive: JobRun, items: int, sent: int, batch_size: int
) -> CascadeReport:
    cost = expensive.cost
    return CascadeReport(
        cheap=judge.cheap.judge_id,
        expensive=judge.expensive.judge_id,
        band=(judge.band.low, judge.band.high),
        band_source=judge.band_source,
        items=items,
        settled=items - sent,
        sent=sent,
        expensive_calls=expensive.calls,
        calls_saved=math.ceil(items / batch_size) - math.ceil(sent / batch_size),
        cost_saved=None if cost is None or not sent else cost / sent * (items - sent),
    )
