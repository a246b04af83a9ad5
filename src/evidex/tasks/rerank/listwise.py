"""The spec's ranking exchange: one call ranks a list of passages, every candidate at once
(``allpairs``) or one sliding window of them (``listwise``).

A ranking the judge cannot give whole is divisible (:class:`~evidex.tasks.base.Divisible`),
though not as a grading is: its halves are ranked apart and their rankings interleaved (the
best of the first half, the best of the second, then each one's second, ...). The order within
each half is the judge's; between the halves it is not judged, and interleaving puts the best
of each at the top of the batch: a listwise window's top is what the next, overlapping window
ranks again against the passages above it, so the best of either half still climbs (kept in
the order given, the second half's best would stay stuck in the window's middle). That is more
than the fallback, the whole batch in the order given, keeps. Nothing of an invalid ranking is
salvaged: its ranks are relative to the passages it left out or repeated.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from evidex.judging import PassageText, RankPayload
from evidex.tasks.base import (
    BatchInfo,
    PassageParts,
    ReplyInvalid,
    Salvaged,
    StepBase,
    StepRequest,
    count_ids,
    exact_array,
    reply_list,
)
from evidex.tasks.rerank.checks import (
    JUSTIFICATION_SCHEMA,
    entry_errors,
    exclusions,
    id_errors,
    rank_errors,
    score_of,
)
from evidex.tasks.rerank.models import (
    Exclusion,
    RankedPassage,
    RerankBatch,
    RerankBatchValue,
    batch_info,
    batch_material,
    batch_values,
)
from evidex.tasks.rerank.prompts import RERANK_TEMPLATE

__all__ = ["RerankStep", "rank_schema"]


class RerankStep(
    PassageParts[RerankBatch],
    StepBase[RerankBatch, RerankBatchValue],
    name="rerank",
    template=RERANK_TEMPLATE,
):
    """The spec's ranking exchange. ``max_attempts`` is 2: the first try and one retry with a
    note naming the violation; after that the harness falls back to the order given."""

    def request(self, batch: RerankBatch) -> StepRequest:
        ids = [p.passage_id for p in batch.passages]
        values = {
            **batch_values(batch.query, batch.passages),
            "ID_FROM_INPUT": "an id from the input",
        }
        return StepRequest(
            messages=self.template.render(values),
            schema=rank_schema(ids),
            payload=RankPayload(batch.query, PassageText.of(batch.passages)),
            max_tokens=90 * len(ids) + 120,
        )

    def validate(self, batch: RerankBatch, data: Any) -> RerankBatchValue:
        entries = reply_list(data, "ranked_passages")
        by_id = {p.passage_id: p for p in batch.passages}
        excluded, errors = exclusions(data.get("excluded"), by_id)
        seen = count_ids(entries, "passage_id")
        errors += id_errors(seen, by_id, "rank")
        for pid in by_id:
            if pid not in seen and pid not in excluded:
                errors.append(
                    f"passage_id {pid!r} is missing; every input passage must be ranked "
                    "(or listed under excluded with a reason)"
                )
        ranked: list[RankedPassage] = []
        ranks: list[int] = []
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                errors.append(f"ranked_passages[{index}] is not an object")
                continue
            pid = str(entry.get("passage_id"))
            rank = entry.get("rank")
            if isinstance(rank, bool) or not isinstance(rank, int):
                errors.append(f"passage {pid!r}: rank must be a whole number, got {rank!r}")
                continue
            ranks.append(rank)
            errors += entry_errors(pid, entry)
            if pid in by_id and seen[pid] == 1:
                ranked.append(
                    RankedPassage(
                        rank=rank,
                        passage_id=pid,
                        relevance_score=score_of(entry.get("relevance_score")),
                        justification=str(entry.get("justification") or "").strip(),
                    )
                )
        errors += rank_errors(ranks)
        if errors:
            raise ReplyInvalid(errors)
        ranked.sort(key=lambda r: r.rank)
        return RerankBatchValue(
            ranked_passages=ranked,
            excluded=[Exclusion(passage_id=k, reason=v) for k, v in excluded.items()],
        )

    def fallback(self, batch: RerankBatch, reason: str) -> RerankBatchValue:
        return RerankBatchValue(
            ranked_passages=[
                RankedPassage(
                    rank=i,
                    passage_id=p.passage_id,
                    justification="Fallback: no valid ranking from the judge; the original "
                    "retrieval order was kept and the query flagged for offline review.",
                    source="fallback",
                    reason=reason,
                )
                for i, p in enumerate(batch.passages, 1)
            ]
        )

    def salvage(
        self, batch: RerankBatch, data: Any, reason: str
    ) -> Salvaged[RerankBatch, RerankBatchValue] | None:
        """Nothing: see the module docstring."""
        return None

    def joined(self, batch: RerankBatch, values: Sequence[RerankBatchValue]) -> RerankBatchValue:
        """The parts' rankings interleaved, the parts in the batch's order at each level,
        ranked 1..n again; their exclusions together (see the module docstring). When a part
        fell back the batch falls back, so its parts are kept in the order given: the
        retrieval order the fallback promises, each judged part ranked within."""
        rankings = [v.ranked_passages for v in values]
        if any(r.source == "fallback" for ranking in rankings for r in ranking):
            ranked = [r for ranking in rankings for r in ranking]
        else:
            levels = itertools.zip_longest(*rankings)
            ranked = [r for level in levels for r in level if r is not None]
        return RerankBatchValue(
            ranked_passages=[r.model_copy(update={"rank": i}) for i, r in enumerate(ranked, 1)],
            excluded=[x for v in values for x in v.excluded],
        )

    def cache_material(self, batch: RerankBatch) -> Any:
        return batch_material(batch.query, batch.passages, batch.strategy)

    def describe(self, batch: RerankBatch) -> BatchInfo:
        return batch_info(
            batch.query, batch.passages, batch.strategy, "offline review of the ranking"
        )

    def labels(self, value: RerankBatchValue) -> Any:
        return [r.passage_id for r in value.ranked_passages]


def rank_schema(passage_ids: Sequence[str]) -> dict[str, Any]:
    """JSON schema of a ranking reply, with the batch's ids as an enum.

    The ranking must hold every passage (``minItems`` = the batch size): a judge that decodes
    under the schema (``local:qwen``) otherwise stops after the best passage or two. So such a
    judge never uses ``excluded``; it stays for judges that answer from the prompt alone.
    """
    return {
        "type": "object",
        "properties": {
            "ranked_passages": exact_array(
                {
                    "type": "object",
                    "properties": {
                        "rank": {"type": "integer", "minimum": 1, "maximum": len(passage_ids)},
                        "passage_id": {"type": "string", "enum": list(passage_ids)},
                        "relevance_score": {"type": ["number", "null"]},
                        "justification": dict(JUSTIFICATION_SCHEMA),
                    },
                    "required": ["rank", "passage_id", "justification"],
                    "additionalProperties": False,
                },
                len(passage_ids),
            ),
            "excluded": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "passage_id": {"type": "string", "enum": list(passage_ids)},
                        "reason": {"type": "string", "minLength": 1},
                    },
                    "required": ["passage_id", "reason"],
                },
            },
        },
        "required": ["ranked_passages"],
    }
