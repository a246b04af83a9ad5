"""The ``pointwise`` exchange: one relevance score per passage.

Each passage is scored on its own, so a batch the judge cannot answer whole is divisible
(:class:`~evidex.tasks.base.Divisible`): the harness keeps the passages its last reply scored
validly and asks the rest again in halves. Scores from two parts are as comparable as scores
from two batches of one run, which the strategy already merges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evidex.judging import PassageText, ScorePayload
from evidex.tasks.base import (
    BatchInfo,
    ItemGrades,
    PassageParts,
    ReplyInvalid,
    Salvaged,
    StepBase,
    StepRequest,
    by_last_id,
    count_ids,
    exact_array,
    reply_list,
    with_passages,
)
from evidex.tasks.rerank.checks import JUSTIFICATION_SCHEMA, score_of
from evidex.tasks.rerank.models import (
    PassageScore,
    ScoreBatch,
    ScoreBatchValue,
    batch_info,
    batch_material,
    batch_values,
)
from evidex.tasks.rerank.prompts import SCORE_TEMPLATE

__all__ = ["ScoreStep"]


class ScoreStep(
    PassageParts[ScoreBatch],
    StepBase[ScoreBatch, ScoreBatchValue],
    name="rerank.score",
    template=SCORE_TEMPLATE,
):
    """One relevance score per passage (pointwise). Falls back to the retrieval order, given
    as descending pseudo-scores and marked ``fallback``."""

    def request(self, batch: ScoreBatch) -> StepRequest:
        ids = [p.passage_id for p in batch.passages]
        return StepRequest(
            messages=self.template.render(batch_values(batch.query, batch.passages)),
            schema={
                "type": "object",
                "properties": {
                    "scores": exact_array(
                        {
                            "type": "object",
                            "properties": {
                                "passage_id": {"type": "string", "enum": ids},
                                "relevance_score": {"type": "number"},
                                "justification": dict(JUSTIFICATION_SCHEMA),
                            },
                            "required": ["passage_id", "relevance_score"],
                        },
                        len(ids),
                    )
                },
                "required": ["scores"],
            },
            payload=ScorePayload(batch.query, PassageText.of(batch.passages)),
            max_tokens=60 * len(ids) + 80,
        )

    def validate(self, batch: ScoreBatch, data: Any) -> ScoreBatchValue:
        graded = _scores(batch, data)
        if errors := graded.errors():
            raise ReplyInvalid(errors)
        return ScoreBatchValue(scores=[graded.valid[p.passage_id] for p in batch.passages])

    def fallback(self, batch: ScoreBatch, reason: str) -> ScoreBatchValue:
        n = len(batch.passages)
        return ScoreBatchValue(
            scores=[
                _pseudo_score(p.passage_id, n - i, reason) for i, p in enumerate(batch.passages)
            ]
        )

    def salvage(
        self, batch: ScoreBatch, data: Any, reason: str
    ) -> Salvaged[ScoreBatch, ScoreBatchValue] | None:
        """The passages the last reply scored validly keep their scores; the others get the
        fallback's pseudo-score (their retrieval order) until a smaller part scores them."""
        graded = _scores(batch, data)
        if not graded.worth_salvaging():
            return None
        n = len(batch.passages)
        position = {p.passage_id: n - i for i, p in enumerate(batch.passages)}
        scores, left = graded.with_fallbacks(
            batch.passages,
            lambda p: p.passage_id,
            lambda p, why: _pseudo_score(p.passage_id, position[p.passage_id], why),
            reason,
        )
        return Salvaged(
            value=ScoreBatchValue(scores=scores),
            kept=graded.kept,
            left=with_passages(batch, left),
        )

    def joined(self, batch: ScoreBatch, values: Sequence[ScoreBatchValue]) -> ScoreBatchValue:
        return ScoreBatchValue(
            scores=by_last_id([v.scores for v in values], self.item_ids(batch), _passage_id)
        )

    def cache_material(self, batch: ScoreBatch) -> Any:
        return batch_material(batch.query, batch.passages, "pointwise")

    def describe(self, batch: ScoreBatch) -> BatchInfo:
        return batch_info(batch.query, batch.passages, "pointwise", "offline review of the ranking")

    def labels(self, value: ScoreBatchValue) -> Any:
        return {s.passage_id: round(s.relevance_score, 4) for s in value.scores}


def _passage_id(score: PassageScore) -> str:
    return score.passage_id


def _pseudo_score(passage_id: str, score: float, reason: str) -> PassageScore:
    return PassageScore(
        passage_id=passage_id,
        relevance_score=float(score),
        justification=f"Fallback: retrieval order kept ({reason})",
    )


def _scores(batch: ScoreBatch, data: Any) -> ItemGrades[PassageScore]:
    """The reply's scores sorted out by passage: valid ones, each passage's errors, and the
    errors that concern no passage of the batch."""
    by_id = {p.passage_id: p for p in batch.passages}
    graded: ItemGrades[PassageScore] = ItemGrades(tuple(by_id))
    try:
        replied = reply_list(data, "scores")
    except ReplyInvalid as exc:
        graded.general += exc.errors
        return graded
    entries = [e for e in replied if isinstance(e, dict)]
    seen = count_ids(entries, "passage_id")
    for pid, n in seen.items():
        if pid not in by_id:
            graded.general.append(
                f"passage_id {pid!r} is not one of the input passages; use only the ids given"
            )
        elif n > 1:
            graded.failed.setdefault(pid, []).append(
                f"passage_id {pid!r} appears {n} times; score each passage once"
            )
    for pid in by_id:
        if pid not in seen:
            graded.failed.setdefault(pid, []).append(
                f"passage_id {pid!r} is missing; score every passage"
            )
    if len(entries) != len(replied):
        graded.general.append("every entry of scores must be an object")
    for entry in entries:
        pid = str(entry.get("passage_id"))
        if pid not in by_id or seen[pid] != 1:
            continue
        score = score_of(entry.get("relevance_score"))
        if score is None:
            graded.failed.setdefault(pid, []).append(
                f"passage {pid!r}: relevance_score must be a number"
            )
        else:
            graded.valid[pid] = PassageScore(
                passage_id=pid,
                relevance_score=score,
                justification=str(entry.get("justification") or "").strip(),
            )
    return graded
