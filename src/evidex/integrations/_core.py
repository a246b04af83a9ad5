"""What every adapter does, apart from any framework: grade texts, say where each one goes.

An adapter hands over its documents' texts in order; evidex numbers them ``passage-1``,
``passage-2`` ... (:func:`evidex.preflight.coerce_passages`), so a grade always finds its way
back to the document it came from by position, whatever ids or metadata the documents carry
(the framework's own ids may be missing or repeated). The grades an adapter writes under
``metadata["evidex"]`` are built here, so the three frameworks report the same keys.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from evidex.errors import InputError, MissingExtraError
from evidex.jobs import run_sync
from evidex.jobs.rerank import RerankResult, arerank
from evidex.jobs.select import select_context
from evidex.jobs.tier import TierResult, atier

__all__ = ["GRADES_KEY", "Grade", "Grading", "require"]

GRADES_KEY = "evidex"
"""The metadata key under which every adapter puts evidex's grades."""

Job = Literal["rerank", "tier"]


def require(module: str, what: str, extra: str) -> Any:
    """``module`` imported, or :class:`MissingExtraError` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(what, extra) from exc


@dataclass(frozen=True)
class Grade:
    """Where one document goes: its position in the caller's list, its score (what the
    framework sorts by; None when the judge gave none) and the grades for its metadata."""

    index: int
    score: float | None
    grades: dict[str, Any]

    def onto(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of a document's ``metadata`` with these grades under :data:`GRADES_KEY`. The
        grades of an earlier evidex step (a tier filter before a ranker) are kept where this
        step has no key of the same name, so ``tier`` and ``snippet`` survive a rerank."""
        earlier = metadata.get(GRADES_KEY)
        kept = dict(earlier) if isinstance(earlier, Mapping) else {}
        return {**metadata, GRADES_KEY: {**kept, **self.grades}}


@dataclass(frozen=True)
class Grading:
    """One adapter's settings: which job, how many to keep, and the keywords of the job call.

    ``job="rerank"``: documents in evidex's ranking, the first ``top_k`` (all when None).
    ``job="tier"``: the documents :func:`~evidex.select_context` keeps under ``policy`` and
    ``token_budget``, most relevant tier first (``top_k`` is for rerank alone). ``options``
    are the job's own options and run keywords (``judge``, ``store``, ``settings``,
    ``hooks``, ``strategy``, ``risk``...).
    """

    job: Job = "rerank"
    top_k: int | None = None
    policy: str = "standard"
    token_budget: int = 4000
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.job not in ("rerank", "tier"):
            raise InputError(f"job must be 'rerank' or 'tier', got {self.job!r}")
        if self.top_k is not None and self.top_k < 1:
            raise InputError(f"top_k must be at least 1, got {self.top_k}")

    async def agrade(self, query: str, texts: Sequence[str]) -> list[Grade]:
        """The documents to keep, in the order to keep them, with their grades."""
        if not texts:
            return []
        options = dict(self.options)
        if self.job == "rerank":
            if self.top_k is not None:
                options.setdefault("top_k", self.top_k)
            return rerank_grades(await arerank(query, list(texts), **options), self.top_k)
        result = await atier(query, list(texts), **options)
        return tier_grades(result, self.policy, self.token_budget)

    def grade(self, query: str, texts: Sequence[str]) -> list[Grade]:
        """:meth:`agrade` from sync code (also inside a running event loop)."""
        return run_sync(self.agrade(query, texts))


def _index(passage_id: str) -> int:
    return int(passage_id.removeprefix("passage-")) - 1


def rerank_grades(result: RerankResult, top_k: int | None) -> list[Grade]:
    """Every ranked passage (or the first ``top_k``) as a :class:`Grade`, best first."""
    kept = result.ranked_passages if top_k is None else result.top(top_k)
    return [
        Grade(
            index=_index(r.passage_id),
            score=r.relevance_score,
            grades={
                "job": "rerank",
                "rank": r.rank,
                "score": r.relevance_score,
                "justification": r.justification,
                "source": r.source,
                "reason": r.reason or (result.reason if r.source == "fallback" else None),
                "strategy": result.strategy,
                # with check_grounding: whether the kept documents answer the query
                **({"grounding": result.grounding.model_dump()} if result.grounding else {}),
            },
        )
        for r in kept
    ]


def tier_score(result: TierResult, tier: str) -> float:
    """A tier as a number for frameworks that sort by score: 1.0 for the top tier, 0.0 for the
    last, evenly spaced between."""
    names = result.scheme.names
    return 1.0 - names.index(tier) / (len(names) - 1)


def tier_grades(result: TierResult, policy: str, token_budget: int) -> list[Grade]:
    """The passages :func:`~evidex.select_context` keeps, in its order, as grades."""
    context = select_context(result, policy, token_budget)
    by_id = {a.passage_id: a for a in result.classifications}
    grades = []
    for rank, item in enumerate(context.items, 1):
        a = by_id[item.passage_id]
        score = tier_score(result, a.tier)
        grades.append(
            Grade(
                index=_index(a.passage_id),
                score=score,
                grades={
                    "job": "tier",
                    "tier": a.tier,
                    "rank": rank,
                    "score": score,
                    "justification": a.justification,
                    "snippet": a.key_evidence_snippet,
                    "source": a.source,
                    "reason": a.reason,
                    "supplementary": item.supplementary,
                    "policy": policy,
                },
            )
        )
    return grades
