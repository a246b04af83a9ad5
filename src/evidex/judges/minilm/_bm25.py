"""BM25 over one rerank pool, and its fusion with the encoder score (the ``bm25`` extra).

``bm25s`` is imported only when fusion is asked for (``bm25_weight`` above 0); the pool itself
is the corpus, so a fused score orders the candidates of one request and nothing more.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evidex.errors import MissingExtraError
from evidex.judges.minilm._encoder import Vectors

BM25_PARAMS: Mapping[str, Any] = {"method": "lucene", "k1": 1.5, "b": 0.75}
"""BM25 as fused in rerank (the ``bm25s`` defaults), over English words without stop words."""


def import_bm25s() -> Any:
    """``bm25s``, imported only when fusion is asked for."""
    try:
        return importlib.import_module("bm25s")
    except ImportError as exc:
        raise MissingExtraError(
            "BM25 fusion in local:minilm (bm25_weight above 0)", "bm25"
        ) from exc


def bm25_pool_scores(query: str, texts: Sequence[str]) -> Vectors:
    """BM25 of each text for ``query`` with ``texts`` as the whole corpus (see
    :data:`BM25_PARAMS`); all zeros when the query or every text has no word left after
    stop words, where bm25s has nothing to index or to ask."""
    bm25s = import_bm25s()
    corpus = bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)
    (terms,) = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
    if not terms or not any(corpus):
        return np.zeros(len(texts), dtype=np.float32)
    retriever = bm25s.BM25(**BM25_PARAMS)
    retriever.index(corpus, show_progress=False)
    return np.asarray(retriever.get_scores(terms), dtype=np.float32)


def fuse_scores(encoder: Vectors, bm25: Vectors, weight: float) -> tuple[Vectors, Vectors, Vectors]:
    """``(1 - weight) * minmax(encoder) + weight * minmax(bm25)`` over one pool, with the two
    normalised signals (for the justification); benchmarks call this very function."""
    enc_norm, bm25_norm = _minmax(encoder), _minmax(bm25)
    fused: Vectors = ((1 - weight) * enc_norm + weight * bm25_norm).astype(np.float32)
    return fused, enc_norm, bm25_norm


def _minmax(values: Vectors) -> Vectors:
    """``values`` scaled to [0, 1] over the pool; a pool without spread maps to 0.5."""
    low, span = float(values.min()), float(values.max() - values.min())
    if span <= 1e-9:
        return np.full_like(values, 0.5)
    scaled: Vectors = ((values - low) / span).astype(np.float32)
    return scaled
