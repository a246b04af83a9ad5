"""What the tier and rerank jobs make of a staged run (:func:`evidex.harness.staged.staged`).

The harness runs the stages (the cheap one scores, the judge's band splits, the uncertain go
on to the expensive one); this module turns the settled scores into the job's items in its
own terms, a tier or a place in the ranking, and reports the split and what it saved.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel

from evidex.harness.job import JobRun
from evidex.harness.outcome import Outcome
from evidex.harness.staged import Settled, Staged
from evidex.judging import Staging
from evidex.tasks.rerank import RankedPassage, ScoreBatchValue, ScoreStep
from evidex.tasks.tier import TierAssignment
from evidex.types import Event, Passage

__all__ = ["CascadeReport", "CheapScoreStep", "cascade_ranking", "cascade_tiers"]


class CheapScoreStep(ScoreStep, name="tier.cascade_score"):
    """The cheap stage of a cascade: one score per passage (filed under the tier job)."""


class CascadeReport(BaseModel):
    """How a cascade split one result, and what it saved against the expensive judge alone."""

    cheap: str
    expensive: str
    band: tuple[float, float]
    band_source: str
    rule: str = "band"
    """What routed the passages: ``band``, or the frontier rule's label and where its settings
    came from."""
    stopped: str | None = None
    """Under the frontier rule, why its rounds ended (``budget spent``, ``no frontier yields``,
    ``every passage sent``)."""
    pooled: int | None = None
    """Under the frontier rule, how many queries shared its budget (a run's inputs run
    together; 1: this query alone)."""
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


def cascade_tiers(
    found: Staged[TierAssignment], run: JobRun, tiers: Sequence[str], batch_size: int
) -> tuple[dict[str, TierAssignment], CascadeReport | None]:
    """Assignments by passage id from a staged run (the expensive stage's, and the cheap
    stage's for the passages it settled), and the split's report (None: one-stage judge)."""
    staging = found.staging
    if staging is None or found.expensive is None:
        return {a.passage_id: a for a in found.judged}, None
    cheap_id, expensive_id = staging.cheap.judge_id, staging.expensive.judge_id
    frontier = found.frontier

    def settled(s: Settled) -> TierAssignment:
        if frontier is None:
            tier = staging.cheap_tier(s.score, tiers)
            why = f"score {s.score:.3f} outside the uncertain band {staging.band_label()}"
        else:  # the cheap stage never settles an upper grade under the frontier rule
            tier = tiers[-1]
            why = f"score {s.score:.3f}; the cascade's {frontier.rule.label()} did not send it"
        return TierAssignment(
            passage_id=s.passage.passage_id,
            tier=tier,
            justification=f"{s.justification}; cascade: settled by {cheap_id} ({why})",
            source=s.source,
            judged_by=cheap_id,
        )

    by_id = {s.passage.passage_id: settled(s) for s in found.settled}
    by_id.update(
        (a.passage_id, a.model_copy(update={"judged_by": expensive_id})) for a in found.judged
    )
    report = _report(staging, found.expensive, len(by_id), len(found.sent), batch_size)
    if frontier is None:
        routed = f"band {staging.band_label()}, {staging.band_source}"
    else:
        report = report.model_copy(
            update={
                "rule": f"{frontier.rule.label()} ({frontier.source})",
                "stopped": frontier.stopped,
                "pooled": frontier.pooled,
            }
        )
        shared = f", budget shared by {frontier.pooled} queries" if frontier.pooled > 1 else ""
        routed = (
            f"{frontier.rule.label()}, {frontier.source}; {frontier.rounds} round(s), "
            f"{frontier.stopped}{shared}"
        )
    run.note(
        Event(
            kind="cascade.split",
            detail=f"{report.settled} of {report.items} passage(s) settled by {cheap_id}, "
            f"{report.sent} sent to {expensive_id} ({routed}); {report.calls_saved} call(s) "
            "saved",
            passage_ids=[p.passage_id for p in found.sent],
            data={"settled": report.settled, "sent": report.sent},
        )
    )
    return by_id, report


def cascade_ranking(
    found: Staged[Outcome[ScoreBatchValue]], passages: Sequence[Passage], batch_size: int
) -> tuple[list[RankedPassage], list[str], list[Event]]:
    """Pointwise rerank from a staged run: the ranking, the reasons of any fallback, and the
    split's event (for the job to keep and log with its own).

    The cheap stage scored every candidate. Those above the band keep their cheap order at the
    top, those below it at the bottom; the band in between is ordered by the expensive judge's
    scores (the scores of two judges are not comparable, so each group keeps its own). When a
    call of either stage falls back, the whole head keeps its retrieval order, as a pointwise
    rerank does when part of its scoring fails.
    """
    staging = found.staging
    assert staging is not None  # the caller's one-stage path needs no cascade
    if found.cheap_failures:
        return _kept_order(passages, found.cheap_failures[0]), found.cheap_failures, []
    failed = [
        o.reason or "the expensive stage fell back" for o in found.judged if o.source == "fallback"
    ]
    if failed:
        return _kept_order(passages, failed[0]), failed, []
    cheap_id, expensive_id = staging.cheap.judge_id, staging.expensive.judge_id
    low, high = staging.band_edges()
    position = {p.passage_id: i for i, p in enumerate(passages)}

    def settled(s: Settled) -> RankedPassage:
        return RankedPassage(
            rank=0,
            passage_id=s.passage.passage_id,
            relevance_score=s.score,
            justification=f"{s.justification}; cascade: settled by {cheap_id} (score "
            f"{s.score:.3f} outside the uncertain band {staging.band_label()})",
            source=s.source,
            judged_by=cheap_id,
        )

    def order(s: Settled) -> tuple[float, int]:
        return (-s.score, position[s.passage.passage_id])

    above = sorted((s for s in found.settled if s.score >= high), key=order)
    below = sorted((s for s in found.settled if s.score < low), key=order)
    middle = sorted(
        ((s, o.source) for o in found.judged for s in o.value.scores),
        key=lambda pair: (-pair[0].relevance_score, position[pair[0].passage_id]),
    )
    placed = [settled(s) for s in above]
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
    placed += [settled(s) for s in below]
    sent = len(found.sent)
    calls_saved = math.ceil(len(passages) / batch_size) - math.ceil(sent / batch_size)
    split_event = Event(
        kind="cascade.split",
        detail=f"{len(found.settled)} of {len(passages)} candidate(s) placed by {cheap_id}, "
        f"{sent} scored by {expensive_id} (band {staging.band_label()}, "
        f"{staging.band_source}); {calls_saved} call(s) saved",
        passage_ids=[p.passage_id for p in found.sent],
        data={"settled": len(found.settled), "sent": sent, "calls_saved": calls_saved},
    )
    return placed, [], [split_event]


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
    staging: Staging, expensive: JobRun, items: int, sent: int, batch_size: int
) -> CascadeReport:
    cost = expensive.cost
    return CascadeReport(
        cheap=staging.cheap.judge_id,
        expensive=staging.expensive.judge_id,
        band=staging.band_edges(),
        band_source=staging.band_source,
        items=items,
        settled=items - sent,
        sent=sent,
        expensive_calls=expensive.calls,
        calls_saved=math.ceil(items / batch_size) - math.ceil(sent / batch_size),
        cost_saved=None if cost is None or not sent else cost / sent * (items - sent),
    )
