"""evidex.integrations.llamaindex against the real llama-index-core: the postprocessor sets
NodeWithScore.score, keeps each node (id, text, metadata) and adds the grades under
metadata["evidex"] out of the LLM's and embedder's view, sync and async, in a query engine."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.core", reason="pip install 'evidex[llamaindex]'")

from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from evidex.harness.runner import HarnessSettings
from evidex.integrations.llamaindex import EvidexPostprocessor
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


def _nodes() -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=t, metadata=dict(m), id_=f"n{i}"), score=0.5)
        for i, (t, m) in enumerate(zip(TEXTS, METADATA, strict=True))
    ]


def test_rerank_sets_the_score_and_keeps_the_nodes(store: SqlStore) -> None:
    nodes = _nodes()
    out = EvidexPostprocessor(top_k=2, judge=rank_judge(), store=store).postprocess_nodes(
        nodes, query_str=QUERY
    )
    assert [n.node.node_id for n in out] == ["n1", "n3"]
    assert [n.score for n in out] == [0.99, 0.98]
    assert [n.node.get_content() for n in out] == [TEXTS[1], TEXTS[3]]
    assert out[0].node.metadata["source"] == "kb/doc1.md"
    assert out[0].node.metadata["evidex"]["rank"] == 1
    assert out[0].node.metadata["evidex"]["retrieval_score"] == 0.5  # the retriever's, kept
    assert out[0].node.metadata["evidex"]["justification"].startswith("It says Most adults")
    # the grades are not part of what the LLM or the embedder reads
    assert "evidex" not in out[0].node.get_content(metadata_mode=MetadataMode.LLM)
    assert "kb/doc1.md" in out[0].node.get_content(metadata_mode=MetadataMode.LLM)
    assert "evidex" not in out[0].node.get_content(metadata_mode=MetadataMode.EMBED)
    assert all(n.score == 0.5 and "evidex" not in n.node.metadata for n in nodes)  # unchanged


def test_tier_scores_by_tier_and_filters_by_policy() -> None:
    pp = EvidexPostprocessor(job="tier", policy="standard", judge=tier_judge(), store="sqlite://")
    out = pp.postprocess_nodes(_nodes(), query_str=QUERY)
    assert [n.node.node_id for n in out] == ["n1", "n0", "n3"]
    assert [n.score for n in out] == [1.0, pytest.approx(2 / 3), pytest.approx(2 / 3)]
    assert out[0].node.metadata["evidex"]["tier"] == "directly-supporting"
    assert out[1].node.metadata["evidex"]["supplementary"] is True


def test_a_fallback_keeps_retrieval_order_and_says_so() -> None:
    pp = EvidexPostprocessor(
        top_k=4,
        judge=broken_judge(),
        store="sqlite://",
        options={"settings": HarnessSettings(backoff_s=0.0)},
    )
    out = pp.postprocess_nodes(_nodes(), query_str=QUERY)
    assert [n.node.node_id for n in out] == ["n0", "n1", "n2", "n3"]
    assert {n.node.metadata["evidex"]["source"] for n in out} == {"fallback"}


def test_the_async_path_grades_like_the_sync_one() -> None:
    pp = EvidexPostprocessor(top_k=2, judge=rank_judge(), store="sqlite://")
    out = asyncio.run(pp.apostprocess_nodes(_nodes(), query_str=QUERY))
    assert [(n.node.node_id, n.score) for n in out] == [("n1", 0.99), ("n3", 0.98)]


def test_without_a_query_it_says_so() -> None:
    with pytest.raises(ValueError, match="needs the query"):
        EvidexPostprocessor(judge=rank_judge(), store="sqlite://").postprocess_nodes(_nodes())


def test_it_runs_as_a_query_engine_postprocessor() -> None:
    index = VectorStoreIndex(
        [TextNode(text=t, metadata=dict(m)) for t, m in zip(TEXTS, METADATA, strict=True)],
        embed_model=MockEmbedding(embed_dim=8),
    )
    pp = EvidexPostprocessor(top_k=1, judge=rank_judge(("passage-1",)), store="sqlite://")
    engine = RetrieverQueryEngine.from_args(
        index.as_retriever(similarity_top_k=4),
        llm=MockLLM(),
        node_postprocessors=[pp],
        response_mode="compact",
    )
    response = engine.query(QUERY)
    [node] = response.source_nodes
    assert node.score == 0.99 and node.node.metadata["evidex"]["rank"] == 1


def test_without_llama_index_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_missing_extra(monkeypatch, "evidex.integrations.llamaindex", "llama_index.core")
