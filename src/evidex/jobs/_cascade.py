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

from evidex.harness.job import JobRun
from evidex.judges.cascade import CascadeJudge
from evidex.judges.scoring import ScoringJudge
from evidex.tasks.rerank import ScoreBatch, ScoreStep
from evidex.tasks.tier import TierAssignment, TierBatch, TierStep
from evidex.types import Event, Passage

__all__ = ["CascadeReport", "CheapScoreStep", "cascade_tiers"]

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
        for graded in await expensive.map(step, batches):
            for a in graded.value.classifications:
                by_id[a.passage_id] = a.model_copy(
                    update={
                        "source": graded.source_of(a.source),
                        "judged_by": judge.expensive.judge_id,
                    }
                )
            for warning in graded.value.warnings:
                run.note(warning)
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
