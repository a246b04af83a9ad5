"""The ``pointwise`` exchange: one relevance score per passage."""

from __future__ import annotations

from typing import Any

from evidex.judging import PassageText, ScorePayload
from evidex.tasks.base import (
    BatchInfo,
    ReplyInvalid,
    StepBase,
    StepRequest,
    count_ids,
    exact_array,
    reply_list,
)
from evidex.tasks.rerank.checks import JUSTIFICATION_SCHEMA, id_errors, score_of
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
    StepBase[ScoreBatch, ScoreBatchValue], name="rerank.score", template=SCORE_TEMPLATE
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
        replied = reply_list(data, "scores")
        by_id = {p.passage_id: p for p in batch.passages}
        entries = [e for e in replied if isinstance(e, dict)]
        seen = count_ids(entries, "passage_id")
        errors = id_errors(seen, by_id, "score")
        errors += [
            f"passage_id {pid!r} is missing; score every passage"
            for pid in by_id
            if pid not in seen
        ]
        if len(entries) != len(replied):
            errors.append("every entry of scores must be an object")
        scores: dict[str, PassageScore] = {}
        for entry in entries:
            pid = str(entry.get("passage_id"))
            score = score_of(entry.get("relevance_score"))
            if score is None:
                errors.append(f"passage {pid!r}: relevance_score must be a number")
            elif pid in by_id and seen[pid] == 1:
                scores[pid] = PassageScore(
                    passage_id=pid,
                    relevance_score=score,
                    justification=str(entry.get("justification") or "").strip(),
                )
        if errors:
            raise ReplyInvalid(errors)
        return ScoreBatchValue(scores=[scores[p.passage_id] for p in batch.passages])

    def fallback(self, batch: ScoreBatch, reason: str) -> ScoreBatchValue:
        n = len(batch.passages)
        return ScoreBatchValue(
            scores=[
                PassageScore(
                    passage_id=p.passage_id,
                    relevance_score=float(n - i),
                    justification=f"Fallback: retrieval order kept ({reason})",
                )
                for i, p in enumerate(batch.passages)
            ]
        )

    def cache_material(self, batch: ScoreBatch) -> Any:
        return batch_material(batch.query, batch.passages, "pointwise")

    def describe(self, batch: ScoreBatch) -> BatchInfo:
        return batch_info(batch.query, batch.passages, "pointwise", "offline review of the ranking")

    def labels(self, value: ScoreBatchValue) -> Any:
        return {s.passage_id: round(s.relevance_score, 4) for s in value.scores}
