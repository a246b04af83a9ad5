"""The ``pairwise`` exchange: which of two passages is more relevant to the query."""

from __future__ import annotations

from typing import Any

from evidex.judging import PairPayload, PassageText
from evidex.tasks.base import BatchInfo, ReplyInvalid, StepBase, StepRequest
from evidex.tasks.rerank.checks import JUSTIFICATION_SCHEMA
from evidex.tasks.rerank.models import PairBatch, PairVerdict, batch_info, batch_material
from evidex.tasks.rerank.prompts import PAIR_TEMPLATE

__all__ = ["PairStep"]


class PairStep(StepBase[PairBatch, PairVerdict], name="rerank.pair", template=PAIR_TEMPLATE):
    """One comparison of two passages. A comparison that never validates falls back to a tie
    (``winner=None``), which the sort breaks by retrieval order."""

    def request(self, batch: PairBatch) -> StepRequest:
        values = {"QUERY": batch.query, "PASSAGE_A": batch.a.text, "PASSAGE_B": batch.b.text}
        return StepRequest(
            messages=self.template.render(values),
            schema={
                "type": "object",
                "properties": {
                    "winner": {"type": "string", "enum": ["A", "B"]},
                    "justification": dict(JUSTIFICATION_SCHEMA),
                },
                "required": ["winner", "justification"],
                "additionalProperties": False,
            },
            payload=PairPayload(batch.query, PassageText.of([batch.a, batch.b])),
            max_tokens=120,
        )

    def validate(self, batch: PairBatch, data: Any) -> PairVerdict:
        if not isinstance(data, dict):
            raise ReplyInvalid(
                ['the reply must be a JSON object with "winner" and "justification"']
            )
        errors = []
        winner = data.get("winner")
        if winner not in ("A", "B"):
            errors.append(f'winner must be "A" or "B", got {winner!r}')
        justification = data.get("justification", "")
        if not isinstance(justification, str):
            errors.append("justification must be a string")
        if errors:
            raise ReplyInvalid(errors)
        return PairVerdict(winner=winner, justification=str(justification).strip())

    def fallback(self, batch: PairBatch, reason: str) -> PairVerdict:
        return PairVerdict(winner=None, justification=f"Fallback (counted as a tie): {reason}")

    def cache_material(self, batch: PairBatch) -> Any:
        return batch_material(batch.query, (batch.a, batch.b), "pairwise")

    def describe(self, batch: PairBatch) -> BatchInfo:
        return batch_info(batch.query, (batch.a, batch.b), "pairwise", "review of one comparison")

    def labels(self, value: PairVerdict) -> Any:
        return {"winner": value.winner}
