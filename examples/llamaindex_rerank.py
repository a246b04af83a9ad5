"""Rerank what a LlamaIndex retriever found with evidex, offline.

A toy vector index (a mock embedding, so the retriever's order is arbitrary) retrieves four
nodes; evidex's postprocessor reorders them, sets ``NodeWithScore.score`` to the judge's
relevance score, keeps each node's metadata and adds its grades under ``metadata["evidex"]``
(left out of what the LLM reads). The same postprocessor goes into a query engine as
``index.as_query_engine(node_postprocessors=[postprocessor])``. The judge is the embedded
``local:minilm``: no network, no key. Run it with ``pip install 'evidex[llamaindex]'`` and
``python examples/llamaindex_rerank.py``.
"""

from __future__ import annotations

from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import TextNode

from evidex.integrations.llamaindex import EvidexPostprocessor

NODES = [
    TextNode(
        text="The D-Day landings took place in Normandy in June 1944.", metadata={"src": "war"}
    ),
    TextNode(text="Most adults need 600 IU of vitamin D a day.", metadata={"src": "nih"}),
    TextNode(text="Vitamin D helps the body absorb calcium.", metadata={"src": "nhs"}),
    TextNode(
        text="A daily walk improves mood and cardiovascular health.", metadata={"src": "blog"}
    ),
]
QUERY = "How much vitamin D do adults need?"


def main() -> None:
    index = VectorStoreIndex(NODES, embed_model=MockEmbedding(embed_dim=32))
    retriever = index.as_retriever(similarity_top_k=4)
    # store="sqlite://": the audit log and review queue stay in memory for this example
    postprocessor = EvidexPostprocessor(top_k=2, judge="local:minilm", store="sqlite://")

    for node in postprocessor.postprocess_nodes(retriever.retrieve(QUERY), query_str=QUERY):
        grades = node.node.metadata["evidex"]
        print(grades["rank"], f"{node.score:.3f}", node.node.metadata["src"], node.node.text)


if __name__ == "__main__":
    main()
