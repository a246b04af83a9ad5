"""evidex.integrations.langchain against the real langchain-core: the compressor keeps the
retriever's documents (text, id, metadata), adds the grades under metadata["evidex"], orders
and filters them as the job says, sync and async, in a LangChain runnable chain too."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_core", reason="pip install 'evidex[langchain]'")

from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from evidex.harness.runner import HarnessSettings
from evidex.integrations.langchain import EvidexCompressor
from evidex.store import SqlStore
from tests.integration_fixtures import (
    METADATA,
    QUERY,
    TEXTS,
    assert_missing_extra,
    broken_judge,
    rank_judge,
    tier_judge,
)

FAST = {"settings": HarnessSettings(backoff_s=0.0)}


def _docs() -> list[Document]:
    return [
        Document(page_content=t, metadata=dict(m), id=f"lc-{i}")
        for i, (t, m) in enumerate(zip(TEXTS, METADATA, strict=True))
    ]


def test_rerank_orders_by_the_judge_and_keeps_the_documents(store: SqlStore) -> None:
    docs = _docs()
    compressor = EvidexCompressor(top_k=3, judge=rank_judge(), store=store)
    out = compressor.compress_documents(docs, QUERY)

    # passage-2 and passage-4 first, then the rest reversed: texts 1, 3, then 2
    assert [d.page_content for d in out] == [TEXTS[1], TEXTS[3], TEXTS[2]]
    assert [d.id for d in out] == ["lc-1", "lc-3", "lc-2"]
    assert [d.metadata["source"] for d in out] == ["kb/doc1.md", "kb/doc3.md", "kb/doc2.md"]
    grades = [d.metadata["evidex"] for d in out]
    assert [g["rank"] for g in grades] == [1, 2, 3]
    assert [g["score"] for g in grades] == [0.99, 0.98, 0.97]
    assert grades[0]["justification"].startswith("It says Most adults need")
    assert {g["source"] for g in grades} == {"judge"} and grades[0]["job"] == "rerank"
    assert all("evidex" not in d.metadata for d in docs)  # the caller's documents unchanged


def test_rerank_without_top_k_returns_every_document() -> None:
    compressor = EvidexCompressor(top_k=None, judge=rank_judge(), store="sqlite://")
    out = compressor.compress_documents(_docs(), QUERY)
    assert sorted(d.page_content for d in out) == sorted(TEXTS)


def test_a_fallback_is_visible_in_the_grades(store: SqlStore) -> None:
    compressor = EvidexCompressor(top_k=4, judge=broken_judge(), store=store, options=FAST)
    out = compressor.compress_documents(_docs(), QUERY)
    assert [d.page_content for d in out] == TEXTS  # the retrieval order
    grades = [d.metadata["evidex"] for d in out]
    assert {g["source"] for g in grades} == {"fallback"}
    assert all(g["reason"] for g in grades)
    assert store.list_reviews(status="pending")  # and a person will look at it


def test_tier_keeps_the_policy_tiers_top_tier_first(store: SqlStore) -> None:
    compressor = EvidexCompressor(job="tier", policy="standard", judge=tier_judge(), store=store)
    out = compressor.compress_documents(_docs(), QUERY)

    assert [d.page_content for d in out] == [TEXTS[1], TEXTS[0], TEXTS[3]]  # no irrelevant
    grades = [d.metadata["evidex"] for d in out]
    assert [g["tier"] for g in grades] == [
        "directly-supporting",
        "contextually-relevant",
        "contextually-relevant",
    ]
    assert [g["supplementary"] for g in grades] == [False, True, True]
    assert [g["score"] for g in grades] == [1.0, pytest.approx(2 / 3), pytest.approx(2 / 3)]
    assert grades[0]["snippet"] == "Most adults need 600 IU"
    assert [d.metadata["page"] for d in out] == [1, 0, 3]


def test_tier_strict_and_a_budget_leave_documents_out() -> None:
    strict = EvidexCompressor(job="tier", policy="strict", judge=tier_judge(), store="sqlite://")
    assert [d.page_content for d in strict.compress_documents(_docs(), QUERY)] == [TEXTS[1]]

    # the top tier's text is 11 tokens by the estimate: a budget of 12 keeps it alone
    tight = EvidexCompressor(job="tier", token_budget=12, judge=tier_judge(), store="sqlite://")
    assert [d.page_content for d in tight.compress_documents(_docs(), QUERY)] == [TEXTS[1]]


def test_async_paths_grade_like_the_sync_ones() -> None:
    rerank = EvidexCompressor(top_k=2, judge=rank_judge(), store="sqlite://")
    tier = EvidexCompressor(job="tier", judge=tier_judge(), store="sqlite://")

    async def both() -> tuple[list[Document], list[Document]]:
        return (
            list(await rerank.acompress_documents(_docs(), QUERY)),
            list(await tier.acompress_documents(_docs(), QUERY)),
        )

    ranked, tiered = asyncio.run(both())
    assert [d.id for d in ranked] == ["lc-1", "lc-3"]
    assert tiered[0].metadata["evidex"]["tier"] == "directly-supporting"


def test_no_documents_calls_no_judge() -> None:
    judge = rank_judge()
    assert EvidexCompressor(judge=judge, store="sqlite://").compress_documents([], QUERY) == []
    assert judge.requests == []


def test_it_runs_inside_a_runnable_chain() -> None:
    compressor = EvidexCompressor(top_k=1, judge=rank_judge(), store="sqlite://")
    chain = RunnableLambda(lambda q: compressor.compress_documents(_docs(), q)) | RunnableLambda(
        lambda docs: docs[0].page_content
    )
    assert chain.invoke(QUERY) == TEXTS[1]


def test_a_bad_job_is_refused() -> None:
    with pytest.raises(ValueError, match="job"):
        EvidexCompressor(job="classify")  # type: ignore[arg-type]


def test_without_langchain_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_missing_extra(monkeypatch, "evidex.integrations.langchain", "langchain_core")


def test_a_rerank_after_a_tier_step_keeps_the_tier_grades() -> None:
    tier = EvidexCompressor(job="tier", judge=tier_judge(), store="sqlite://")
    rerank = EvidexCompressor(top_k=1, judge=rank_judge(("passage-2",)), store="sqlite://")
    [best] = rerank.compress_documents(tier.compress_documents(_docs(), QUERY), QUERY)
    # the tier step kept texts 1, 0, 3 in that order; the ranker put its second first
    assert best.page_content == TEXTS[0]
    grades = best.metadata["evidex"]
    assert (grades["job"], grades["rank"], grades["tier"]) == ("rerank", 1, "contextually-relevant")
