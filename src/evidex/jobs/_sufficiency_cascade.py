"""The cheap stage of a cascade for the sufficiency job: settle a query on which nothing was
found, send every other query whole to the expensive stage.

Why only that: whether passages suffice is one verdict over all of them, and an encoder's
relevance scores cannot tell a passage that answers from one that is merely on topic (on
CLAPnq dev, unanswerable questions come with passages of the right article). What an encoder
can tell is a retrieval that found nothing on the query's topic at all; then there is nothing
to answer from, and no call to the expensive judge is needed. The verdict it settles is a
heuristic and says so in its ``missing`` statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evidex.harness.job import JobRun
from evidex.harness.staged import cheap_scores
from evidex.tasks.rerank import ScoreStep
from evidex.tasks.sufficiency import SufficiencyValue
from evidex.types import Event, Passage

__all__ = ["CheapSufficiencyScoreStep", "Triage", "triage"]


class CheapSufficiencyScoreStep(ScoreStep, name="sufficiency.cascade_score"):
    """The cheap stage's scores of a query's passages (filed under the sufficiency job)."""


@dataclass(frozen=True)
class Triage:
    """What the cheap stage made of a query: a settled verdict, or the run to send it on."""

    settled: SufficiencyValue | None
    expensive: JobRun
    judged_by: str | None
    """The stage that gives the verdict (None with a one-stage judge)."""


async def triage(run: JobRun, query: str, passages: Sequence[Passage]) -> Triage:
    """Settle ``query`` on the cheap stage when none of ``passages`` reaches the cascade's
    :meth:`~evidex.judging.Staging.none_relevant_below`; else the expensive stage's run.
    A cheap-stage fallback settles nothing: the query goes on."""
    found = await cheap_scores(run, query, passages, CheapSufficiencyScoreStep())
    if found is None:
        return Triage(None, run, None)
    staging = found.staging
    cheap_id, expensive_id = staging.cheap.judge_id, staging.expensive.judge_id
    below = staging.none_relevant_below()
    best = max(found.scores.values(), default=None)
    whole = len(found.scores) == len(passages) and not found.failures
    if whole and best is not None and best < below:
        run.note(
            Event(
                kind="cascade.split",
                detail=f"settled by {cheap_id}: no passage scored {below:.3g} or more (best "
                f"{best:.3f}); nothing sent to {expensive_id}",
                data={"settled": 1, "sent": 0, "best": best, "none_relevant_below": below},
            )
        )
        sources = set(found.sources.values())
        return Triage(
            SufficiencyValue(
                sufficient=False,
                confidence=min(1.0, max(0.0, 1.0 - best)),
                missing=[
                    f"heuristic ({cheap_id}, a cascade's cheap stage): no passage is on the "
                    f"query's topic; the best scores {best:.3f}, below {below:.3g}"
                ],
                source="cache" if sources == {"cache"} else "judge",
            ),
            run,
            cheap_id,
        )
    run.note(
        Event(
            kind="cascade.split",
            detail=f"sent to {expensive_id}: "
            + (
                f"a passage scored {best:.3f}, at or above {below:.3g}"
                if whole and best is not None
                else "the cheap stage could not score every passage"
            ),
            data={"settled": 0, "sent": 1, "best": best, "none_relevant_below": below},
        )
    )
    return Triage(None, run.stage(staging.expensive), expensive_id)
