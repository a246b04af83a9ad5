"""evidex in a Haystack pipeline: a ranker, a tier filter and a filter for any other job the
adapters run, as components (``pip install 'evidex[haystack]'``).

>>> pipeline.add_component("rank", EvidexRanker(top_k=5, judge="local:minilm"))  # doctest: +SKIP
>>> pipeline.add_component("tiers", EvidexTierFilter(policy="strict"))  # doctest: +SKIP
>>> pipeline.connect("retriever.documents", "rank.documents")  # doctest: +SKIP

Each takes ``run(query=..., documents=[...])`` and returns ``{"documents": [...]}``: copies of
the documents given (same ``id``, ``content`` and ``meta``) whose ``score`` is evidex's (the
judge's relevance score for the ranker, the tier as a number for the filter: 1.0 for the top
tier, 0.0 for the last), with the grades under ``meta["evidex"]``. :class:`EvidexFilter`
runs any job of :func:`~evidex.integrations._core.adapted_jobs` by name and keeps what its
definition keeps (the check before generating: none when its decision is not to answer). The
caller's documents are never changed. Each has ``run_async`` too, for Haystack's async
pipelines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from evidex.integrations._core import Grade, Grading, adapted_job, grading_of, require, run_options

require("haystack", "evidex.integrations.haystack", "haystack")

from haystack import Document, component  # noqa: E402

__all__ = ["EvidexFilter", "EvidexRanker", "EvidexTierFilter"]


def _texts(documents: Sequence[Document]) -> list[str]:
    return [d.content or "" for d in documents]


def _graded(documents: Sequence[Document], grades: Sequence[Grade]) -> list[Document]:
    out = []
    for grade in grades:
        doc = documents[grade.index]
        out.append(dataclasses.replace(doc, meta=grade.onto(doc.meta), score=grade.score))
    return out


@component
class EvidexRanker:
    """Ranks documents by evidex's rerank job and keeps the first ``top_k``.

    ``judge``: a spec string (``"local:minilm"``) or a :class:`~evidex.Judge`, None for the
    rerank job's configured judge; ``store``: where the audit log and review queue live
    (``"sqlite://"`` keeps them in memory); ``options``: the rerank options (``strategy``,
    ``top_n``, ``settings``...).
    """

    def __init__(
        self,
        top_k: int = 10,
        judge: Any = None,
        store: Any = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        self.top_k = top_k
        self.judge = judge
        self.store = store
        self.options = dict(options or {})

    def _grading(self, top_k: int | None) -> Grading:
        options = run_options(self.judge, self.store, self.options)
        return Grading("rerank", self.top_k if top_k is None else top_k, options=options)

    @component.output_types(documents=list[Document])
    def run(
        self, query: str, documents: list[Document], top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """The documents in evidex's ranking, the first ``top_k`` (default: the instance's)."""
        grades = self._grading(top_k).grade(query, _texts(documents))
        return {"documents": _graded(documents, grades)}

    @component.output_types(documents=list[Document])
    async def run_async(
        self, query: str, documents: list[Document], top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """:meth:`run` on the running event loop."""
        grades = await self._grading(top_k).agrade(query, _texts(documents))
        return {"documents": _graded(documents, grades)}


@component
class EvidexFilter:
    """Keeps the documents a job keeps: ``job`` is any job the adapters run (``"rerank"``,
    ``"tier"``, or a check before generating, which keeps every document, the first ``top_k``,
    when the passages suffice and none when its decision is to abstain or escalate).
    ``policy`` and ``token_budget`` are the tier job's; ``judge``, ``store`` and ``options``
    (the job's own options) as for :class:`EvidexRanker`."""

    def __init__(
        self,
        job: str,
        top_k: int | None = None,
        policy: str = "standard",
        token_budget: int = 4000,
        judge: Any = None,
        store: Any = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.job = adapted_job(job)
        self.top_k = top_k
        self.policy = policy
        self.token_budget = token_budget
        self.judge = judge
        self.store = store
        self.options = dict(options or {})
        grading_of(self)  # a top_k below one is refused here, not at the first run

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document]) -> dict[str, list[Document]]:
        """The documents the job keeps, each with its grades under ``meta["evidex"]``."""
        grades = grading_of(self).grade(query, _texts(documents))
        return {"documents": _graded(documents, grades)}

    @component.output_types(documents=list[Document])
    async def run_async(self, query: str, documents: list[Document]) -> dict[str, list[Document]]:
        """:meth:`run` on the running event loop."""
        grades = await grading_of(self).agrade(query, _texts(documents))
        return {"documents": _graded(documents, grades)}


@component
class EvidexTierFilter(EvidexFilter):
    """Keeps the documents evidex's tier job and :func:`evidex.select_context` select: the
    tiers of ``policy`` (strict, standard, broad) within ``token_budget``, top tier first.
    ``judge``, ``store`` and ``options`` (the tier options) as for :class:`EvidexRanker`."""

    def __init__(
        self,
        policy: str = "standard",
        token_budget: int = 4000,
        judge: Any = None,
        store: Any = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        # haystack's @component builds a new class, so the base is named, not super()
        EvidexFilter.__init__(self, "tier", None, policy, token_budget, judge, store, options)
