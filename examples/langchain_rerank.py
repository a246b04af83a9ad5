"""Rerank what a LangChain retriever found with evidex, offline.

The retriever here searches a toy vector store (a fake embedding, so its order is arbitrary,
as a weak first stage's often is); evidex's compressor puts the passages that answer first,
keeps each document's metadata and adds its grades under ``metadata["evidex"]``. The judge is
the embedded ``local:minilm``: no network, no key. Run it with
``pip install 'evidex[langchain]'`` and ``python examples/langchain_rerank.py``.
"""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from evidex.integrations.langchain import EvidexCompressor

DOCS = [
    Document("The D-Day landings took place in Normandy in June 1944.", metadata={"src": "war"}),
    Document(
        "Most adults need 600 IU (15 micrograms) of vitamin D a day.", metadata={"src": "nih"}
    ),
    Document("Vitamin D helps the body absorb calcium.", metadata={"src": "nhs"}),
    Document("A daily walk improves mood and cardiovascular health.", metadata={"src": "blog"}),
]
QUERY = "How much vitamin D do adults need?"


def main() -> None:
    store = InMemoryVectorStore.from_documents(DOCS, DeterministicFakeEmbedding(size=32))
    retriever = store.as_retriever(search_kwargs={"k": 4})
    # store="sqlite://": the audit log and review queue stay in memory for this example
    compressor = EvidexCompressor(job="rerank", top_k=2, judge="local:minilm", store="sqlite://")

    chain = {"docs": retriever, "query": RunnablePassthrough()} | RunnableLambda(
        lambda x: compressor.compress_documents(x["docs"], x["query"])
    )
    for doc in chain.invoke(QUERY):
        grades = doc.metadata["evidex"]
        print(grades["rank"], f"{grades['score']:.3f}", doc.metadata["src"], doc.page_content)


if __name__ == "__main__":
    main()
