"""evidex in a LangChain pipeline: a document compressor that reranks or tiers what a retriever
found (``pip install 'evidex[langchain]'``).

>>> from langchain_classic.retrievers import ContextualCompressionRetriever  # doctest: +SKIP
>>> compressor = EvidexCompressor(job="rerank", top_k=3, judge="local:minilm")  # doctest: +SKIP
>>> retriever = ContextualCompressionRetriever(                              # doctest: +SKIP
...     base_compressor=compressor, base_retriever=vector_store.as_retriever())

The documents that come back are copies of the retriever's, with their ``page_content``, ``id``
and ``metadata`` as they were, plus evidex's grades under ``metadata["evidex"]``: ``rank``,
``score``, ``justification``, ``source`` and ``reason`` for rerank; ``tier``, ``rank``,
``score`` (1.0 for the top tier), ``justification``, ``snippet``, ``source``, ``reason`` and
``supplementary`` for tier. The caller's documents are never changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evidex.integrations._core import AdaptedJob, Grade, grading_of, require

require("langchain_core", "evidex.integrations.langchain", "langchain")

from langchain_core.callbacks import Callbacks  # noqa: E402
from langchain_core.documents import BaseDocumentCompressor, Document  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402

__all__ = ["EvidexCompressor"]


class EvidexCompressor(BaseDocumentCompressor):
    """Rerank (``job="rerank"``) or tier and select (``job="tier"``) a retriever's documents.

    ``job="rerank"`` returns the documents in evidex's ranking, the first ``top_k`` (all when
    None); ``job="tier"`` returns those :func:`evidex.select_context` keeps under ``policy``
    (strict, standard, broad) and ``token_budget``, top tier first (``top_k`` is not used);
    any other job of :func:`~evidex.integrations._core.adapted_jobs` keeps what its
    definition says (the check before generating: none when its decision is not to answer).
    ``judge`` is a spec string (``"local:minilm"``) or a :class:`~evidex.Judge`, None for the
    job's configured judge; ``store`` where the audit log and review queue live
    (``"sqlite://"`` keeps them in memory); ``options`` the job's own options (``strategy``,
    ``risk``, ``tiers``, ``settings``...).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    job: AdaptedJob = "rerank"
    top_k: int | None = 3
    policy: str = "standard"
    token_budget: int = 4000
    judge: Any = None
    store: Any = None
    options: dict[str, Any] = Field(default_factory=dict)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The documents evidex keeps, best first, each with its grades."""
        grades = grading_of(self).grade(query, [d.page_content for d in documents])
        return _graded(documents, grades)

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """:meth:`compress_documents` on the running event loop."""
        grades = await grading_of(self).agrade(query, [d.page_content for d in documents])
        return _graded(documents, grades)


def _graded(documents: Sequence[Document], grades: Sequence[Grade]) -> list[Document]:
    out = []
    for grade in grades:
        doc = documents[grade.index]
        out.append(doc.model_copy(update={"metadata": grade.onto(doc.metadata)}, deep=False))
    return out
