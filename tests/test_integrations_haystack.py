"""evidex.integrations.haystack against the real haystack-ai: the ranker and the tier filter are
components of a real pipeline (BM25 retriever first), keep each document (id, content, meta),
set its score and add the grades under meta["evidex"], sync and async."""

from __future__ import annotations

import asyncio
import os

import pytest

# no usage statistics leave the machine while the tests run (read when haystack is imported)
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
pytest.importorskip("haystack", reason="pip install 'evidex[haystack]'")

from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from evidex.errors import InputError
from evidex.integrations.haystack import EvidexRanker, EvidexTierFilter
from evidex.store import SqlStore
from tests.integration_fixtures import (
    METADATA,
    QUERY,
    TEXTS,
    assert_missing_extra,
    rank_judge,
    tier_judge,
)


def _docs() -> list[Document]:
    return [
        Document(id=f"h{i}", content=t, meta=dict(m), score=0.1)
        for i, (t, m) in enumerate(zip(TEXTS, METADATA, strict=True))
    ]


def test_the_ranker_scores_orders_and_keeps_the_documents(store: SqlStore) -> None:
    docs = _docs()
    out = EvidexRanker(top_k=2, judge=rank_judge(), store=store).run(QUERY, docs)["documents"]
    assert [d.id for d in out] == ["h1", "h3"]
    assert [d.score for d in out] == [0.99, 0.98]
    assert [d.content for d in out] == [TEXTS[1], TEXTS[3]]
    assert out[0].meta["source"] == "kb/doc1.md" and out[0].meta["evidex"]["rank"] == 1
    assert all(d.score == 0.1 and "evidex" not in d.meta for d in docs)  # unchanged


def test_top_k_at_run_time_overrides_the_instance() -> None:
    ranker = EvidexRanker(top_k=1, judge=rank_judge(), store="sqlite://")
    assert len(ranker.run(QUERY, _docs(), top_k=3)["documents"]) == 3


def test_the_tier_filter_keeps_the_policy_tiers() -> None:
    tiers = EvidexTierFilter(policy="standard", judge=tier_judge(), store="sqlite://")
    out = tiers.run(QUERY, _docs())["documents"]
    assert [d.id for d in out] == ["h1", "h0", "h3"]
    assert [d.meta["evidex"]["tier"] for d in out] == [
        "directly-supporting",
        "contextually-relevant",
        "contextually-relevant",
    ]
    assert out[0].score == 1.0 and out[0].meta["evidex"]["snippet"] == "Most adults need 600 IU"


def test_both_run_in_a_pipeline_after_a_retriever() -> None:
    document_store = InMemoryDocumentStore()
    document_store.write_documents(_docs())
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store, top_k=4))
    pipeline.add_component("tiers", EvidexTierFilter(judge=tier_judge(), store="sqlite://"))
    pipeline.add_component("rank", EvidexRanker(top_k=1, judge=rank_judge(), store="sqlite://"))
    pipeline.connect("retriever.documents", "tiers.documents")
    pipeline.connect("tiers.documents", "rank.documents")

    # the scripted judges grade by position (passage-N), which here is BM25's order, so this
    # checks the wiring: documents flow retriever → tiers → rank with meta and grades kept
    result = pipeline.run(
        {"retriever": {"query": QUERY}, "tiers": {"query": QUERY}, "rank": {"query": QUERY}}
    )
    [best] = result["rank"]["documents"]
    assert best.meta["evidex"]["job"] == "rerank" and best.meta["source"].startswith("kb/")
    assert best.meta["evidex"]["tier"] in ("directly-supporting", "contextually-relevant")


def test_run_async_grades_like_run() -> None:
    ranker = EvidexRanker(top_k=2, judge=rank_judge(), store="sqlite://")
    tiers = EvidexTierFilter(policy="strict", judge=tier_judge(), store="sqlite://")

    async def both() -> tuple[list[Document], list[Document]]:
        ranked = (await ranker.run_async(QUERY, _docs()))["documents"]
        tiered = (await tiers.run_async(QUERY, _docs()))["documents"]
        return ranked, tiered

    ranked, tiered = asyncio.run(both())
    assert [d.id for d in ranked] == ["h1", "h3"]
    assert [d.id for d in tiered] == ["h1"]


def test_no_documents_no_judge_call() -> None:
    judge = rank_judge()
    assert EvidexRanker(judge=judge, store="sqlite://").run(QUERY, []) == {"documents": []}
    assert judge.requests == []


def test_without_haystack_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_missing_extra(monkeypatch, "evidex.integrations.haystack", "haystack")


def test_a_pipeline_with_them_serialises_and_loads_back() -> None:
    pipeline = Pipeline()
    pipeline.add_component("tiers", EvidexTierFilter(policy="strict", store="sqlite://"))
    pipeline.add_component("rank", EvidexRanker(top_k=2, judge="local:minilm", store="sqlite://"))
    pipeline.connect("tiers.documents", "rank.documents")
    loaded = Pipeline.loads(pipeline.dumps(), allowed_modules=["evidex.integrations.haystack"])
    rank = loaded.get_component("rank")
    assert isinstance(rank, EvidexRanker) and (rank.top_k, rank.judge) == (2, "local:minilm")
    assert loaded.get_component("tiers").policy == "strict"  # type: ignore[attr-defined]


def test_a_top_k_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="top_k"):
        EvidexRanker(top_k=0)
    with pytest.raises(InputError, match="top_k must be at least 1"):
        EvidexRanker(judge=rank_judge(), store="sqlite://").run(QUERY, _docs(), top_k=0)
