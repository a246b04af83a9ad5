"""The rerank values and batches: ranked passages, verdicts and scores; what one call is given,
and what the cache and the audit log record of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from evidex.tasks.base import BatchInfo, passage_pairs, passages_block, passages_info
from evidex.types import Passage, Source

__all__ = [
    "STRATEGIES",
    "Exclusion",
    "PairBatch",
    "PairVerdict",
    "PassageScore",
    "RankedPassage",
    "RerankBatch",
    "RerankBatchValue",
    "ScoreBatch",
    "ScoreBatchValue",
    "Strategy",
    "batch_info",
    "batch_material",
    "batch_values",
]

Strategy = Literal["allpairs", "pairwise", "listwise", "pointwise"]
STRATEGIES: tuple[str, ...] = ("allpairs", "pairwise", "listwise", "pointwise")


class RankedPassage(BaseModel):
    """One passage in a ranking, with where its position came from."""

    rank: int
    passage_id: str
    relevance_score: float | None = None
    justification: str
    source: Source | None = "judge"
    """None when no judge placed this passage (below the ``top_n`` cut, outside a top-k)."""
    reason: str | None = Field(default=None, description="why a fallback or cut was applied")
    duplicate_of: str | None = None
    excluded: str | None = Field(
        default=None, description="the judge's reason when it excluded this passage"
    )
    judged_by: str | None = Field(
        default=None, description="the stage of a cascade judge that scored it (its judge id)"
    )


class Exclusion(BaseModel):
    """A passage the judge left out of its ranking on purpose, with its reason."""

    passage_id: str
    reason: str


class RerankBatchValue(BaseModel):
    """A validated ranking of one batch (all candidates, or one listwise window)."""

    ranked_passages: list[RankedPassage]
    excluded: list[Exclusion] = Field(default_factory=list)


class PairVerdict(BaseModel):
    """Which of two passages won; ``winner`` is None when the comparison fell back (a tie)."""

    winner: Literal["A", "B"] | None
    justification: str = ""


class PassageScore(BaseModel):
    passage_id: str
    relevance_score: float
    justification: str = ""


class ScoreBatchValue(BaseModel):
    scores: list[PassageScore]


@dataclass(frozen=True)
class RerankBatch:
    """Passages to rank in one call, in their current order (retrieval order at first)."""

    query: str
    passages: tuple[Passage, ...]
    strategy: str = "allpairs"


@dataclass(frozen=True)
class PairBatch:
    query: str
    a: Passage
    b: Passage


@dataclass(frozen=True)
class ScoreBatch:
    query: str
    passages: tuple[Passage, ...]


def batch_material(query: str, passages: Sequence[Passage], strategy: str) -> dict[str, Any]:
    """Cache material: the query, the passages in the order shown (order sways a judge) and
    the strategy; the harness adds the prompt version and the judge."""
    return {
        "query": query.strip(),
        "passages": passage_pairs(passages),
        "strategy": strategy,
    }


def batch_info(query: str, passages: Sequence[Passage], strategy: str, flag: str) -> BatchInfo:
    return passages_info(query, passages, {"strategy": strategy, "flag": flag})


def batch_values(query: str, passages: Sequence[Passage]) -> dict[str, str]:
    """The prompt values a ranking and a scoring call share: the query, the passages and how
    many there are (each prompt asks for an entry per passage)."""
    return {"QUERY": query, "PASSAGES": passages_block(passages), "COUNT": str(len(passages))}
