"""evidex in a LlamaIndex pipeline: a node postprocessor that reranks or tiers the retrieved
nodes (``pip install 'evidex[llamaindex]'``).

>>> postprocessor = EvidexPostprocessor(top_k=3, judge="local:minilm")  # doctest: +SKIP
>>> engine = index.as_query_engine(node_postprocessors=[postprocessor])  # doctest: +SKIP

Each node that comes back is a copy of the retrieved one (same id, text, relationships and
metadata) whose ``NodeWithScore.score`` is evidex's: the judge's relevance score for rerank
(None when the judge gave none), the tier as a number for tier (1.0 for the top tier, 0.0 for
the last). The grades are under ``node.metadata["evidex"]`` (with the retriever's score as
``retrieval_score``), a key left out of the text the LLM and the embedder see. The caller's
nodes are never changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evidex.integrations._core import GRADES_KEY, AdaptedJob, Grade, grading_of, require

require("llama_index.core", "evidex.integrations.llamaindex", "llamaindex")

from llama_index.core.bridge.pydantic import Field  # noqa: E402
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle  # noqa: E402

__all__ = ["EvidexPostprocessor"]


class EvidexPostprocessor(BaseNodePostprocessor):
    """Rerank (``job="rerank"``) or tier and select (``job="tier"``) the retrieved nodes.

    ``job="rerank"``: the nodes in evidex's ranking, the first ``top_k`` (all when None);
    ``job="tier"``: those :func:`evidex.select_context` keeps under ``policy`` and
    ``token_budget``, top tier first. ``judge``: a spec string (``"local:minilm"``) or a
    :class:`~evidex.Judge`, None for the job's configured judge; ``store``: where the audit log
    and review queue live (``"sqlite://"`` keeps them in memory); ``options``: the job's own
    options (``strategy``, ``risk``, ``tiers``, ``settings``...).
    """

    job: AdaptedJob = Field(default="rerank", description="a job the adapters run (adapted_jobs())")
    top_k: int | None = Field(default=3, description="rerank: how many nodes to keep")
    policy: str = Field(default="standard", description="tier: strict, standard or broad")
    token_budget: int = Field(default=4000, description="tier: tokens of context to keep")
    judge: Any = Field(default=None, description="a judge spec string or Judge")
    store: Any = Field(default=None, description="a store or store URL")
    options: dict[str, Any] = Field(default_factory=dict, description="the job's options")

    @classmethod
    def class_name(cls) -> str:
        return "EvidexPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        grades = grading_of(self).grade(_query(query_bundle), _texts(nodes))
        return _graded(nodes, grades)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        grades = await grading_of(self).agrade(_query(query_bundle), _texts(nodes))
        return _graded(nodes, grades)


def _query(bundle: QueryBundle | None) -> str:
    if bundle is None:
        raise ValueError("EvidexPostprocessor needs the query: pass query_bundle or query_str")
    return bundle.query_str


def _texts(nodes: Sequence[NodeWithScore]) -> list[str]:
    return [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]


def _graded(nodes: Sequence[NodeWithScore], grades: Sequence[Grade]) -> list[NodeWithScore]:
    out = []
    for grade in grades:
        node = nodes[grade.index].node
        metadata = grade.onto(node.metadata)
        metadata[GRADES_KEY]["retrieval_score"] = nodes[grade.index].score
        update = {
            "metadata": metadata,
            "excluded_llm_metadata_keys": _with_key(node.excluded_llm_metadata_keys),
            "excluded_embed_metadata_keys": _with_key(node.excluded_embed_metadata_keys),
        }
        out.append(NodeWithScore(node=node.model_copy(update=update), score=grade.score))
    return out


def _with_key(keys: list[str]) -> list[str]:
    return keys if GRADES_KEY in keys else [*keys, GRADES_KEY]
