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

from evidex.harness.job import JobRun
from evidex.judging import Staging
from evidex.tasks.base import Step
from evidex.tasks.rerank import ScoreBatch, ScoreBatchValue
from evidex.types import Event, Passage, Source

__all__ = ["CHEAP_BATCH", "Settled", "Staged", "staged"]

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


async def staged(
    run: JobRun,
    query: str,
    passages: Sequence[Passage],
    expensive: Callable[[JobRun, Sequence[Passage]], Awaitable[list[M]]],
    cheap_step: Step[ScoreBatch, ScoreBatchValue],
    *,
    send_failed: bool = True,
) -> Staged[M]:
    """Judge ``passages`` with the run's judge, its cheap stage first when it has one.

    ``expensive(run, passages)``: how the job grades passages on a run. A cheap-stage call that
    falls back settles nothing: its passages go on (``send_failed``), or the expensive stage is
    not run at all (a ranking that cannot order part of its head keeps the retrieval order)."""
    staging = run.judge.staging()
    if staging is None:
        return Staged(await expensive(run, passages), list(passages))
    cheap = run.stage(staging.cheap_scorer())
    chunks = [
        ScoreBatch(query, tuple(passages[i : i + CHEAP_BATCH]))
        for i in range(0, len(passages), CHEAP_BATCH)
    ]
    scored = await cheap.map(cheap_step, chunks, progress=False)
    result: Staged[M] = Staged([], [], staging=staging)
    for chunk, outcome in zip(chunks, scored, strict=True):
        if outcome.source == "fallback":  # pseudo-scores settle nothing
            result.cheap_failures.append(outcome.reason or "the cheap stage fell back")
            result.sent.extend(chunk.passages)
            continue
        scores = {s.passage_id: s for s in outcome.value.scores}
        values = [scores[p.passage_id].relevance_score for p in chunk.passages]
        split = staging.split(values)
        result.sent.extend(chunk.passages[i] for i in split.sent)
        result.settled += [
            Settled(
                chunk.passages[i],
                values[i],
                scores[chunk.passages[i].passage_id].justification,
                outcome.source,
            )
            for i in split.settled
        ]
    for stale in staging.warnings:
        run.note(Event(kind="cascade.stale_band", detail=stale))
    if result.cheap_failures and not send_failed:
        return result
    result.expensive = run.stage(staging.expensive)
    if result.sent:
        result.judged = await expensive(result.expensive, result.sent)
    return result
