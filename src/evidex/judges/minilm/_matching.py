"""How a passage scores against a query: its cosine, its best sentence's, and their mix.

``score = (1 - w) * cos(query, passage) + w * max over sentences cos(query, sentence)``; the
best sentence is a verbatim slice of the passage, so it can be quoted as the evidence. A rerank
pool's scores may also be fused with BM25 over the pool (:mod:`._bm25`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evidex.judges._grades import PoolScore, SentenceScore, sentence_spans
from evidex.judges.minilm._bm25 import bm25_pool_scores, fuse_scores
from evidex.judges.minilm._encoder import Encoder

__all__ = [
    "Match",
    "PoolScore",
    "SentenceScore",
    "best_sentences",
    "cosine_words",
    "match_texts",
    "pool_scores",
    "sentence_spans",
]


@dataclass(frozen=True)
class Match:
    """How one passage scores against a query; ``score`` is the combination that is ranked
    and compared with the tier cut points."""

    score: float
    passage_score: float
    sentence: SentenceScore


def match_texts(
    encoder: Encoder,
    query: str,
    texts: Sequence[str],
    *,
    sentence_weight: float,
    batch_size: int,
) -> tuple[list[Match], int]:
    """Every text's :class:`Match` against ``query`` and the word pieces encoded.

    The query, the passages and all their sentences go through the encoder in one call, so
    length bucketing mixes them; a one-sentence passage reuses its passage embedding.
    """
    spans = [sentence_spans(t) or [(0, len(t))] for t in texts]
    pieces: list[str] = [query, *texts]
    sentence_rows: list[list[int]] = []
    for text, text_spans in zip(texts, spans, strict=True):
        rows = []
        for s, e in text_spans:
            if len(text_spans) == 1 and text[s:e] == text.strip():
                rows.append(-1)  # the passage's own embedding
            else:
                rows.append(len(pieces))
                pieces.append(text[s:e])
        sentence_rows.append(rows)
    vectors, read = encoder.encode(pieces, batch_size=batch_size)
    cosines = vectors @ vectors[0]
    w = sentence_weight
    out = []
    for index, (text, text_spans, rows) in enumerate(zip(texts, spans, sentence_rows, strict=True)):
        passage = float(cosines[1 + index])
        scored = [float(cosines[r]) if r >= 0 else passage for r in rows]
        best = int(np.argmax(scored))
        s, e = text_spans[best]
        sentence = SentenceScore(text[s:e], s, e, scored[best])
        out.append(Match((1 - w) * passage + w * sentence.score, passage, sentence))
    return out, read


def best_sentences(
    encoder: Encoder, query: str, text: str, *, batch_size: int
) -> list[SentenceScore]:
    """The sentences of ``text``, best match to ``query`` first."""
    spans = sentence_spans(text) or [(0, len(text))]
    vectors = encoder.encode([query, *(text[s:e] for s, e in spans)], batch_size=batch_size)[0]
    cosines = vectors[1:] @ vectors[0]
    scored = [
        SentenceScore(text[s:e], s, e, float(c)) for (s, e), c in zip(spans, cosines, strict=True)
    ]
    return sorted(scored, key=lambda x: -x.score)


def pool_scores(
    query: str, texts: Sequence[str], matches: Sequence[Match], bm25_weight: float
) -> list[PoolScore]:
    """Rerank scores of a candidate pool: each match's score, fused with BM25 over the pool
    when ``bm25_weight`` is above 0, each with the words that explain it."""
    w = bm25_weight
    if not w or not matches:
        return [PoolScore(m.score, cosine_words(m)) for m in matches]
    bm25 = bm25_pool_scores(query, texts)
    encoder = np.array([m.score for m in matches], dtype=np.float32)
    fused, enc_norm, bm25_norm = fuse_scores(encoder, bm25, w)
    return [
        PoolScore(
            float(fused[i]),
            f"heuristic (MiniLM cosine fused with BM25 over the {len(texts)} candidates, "
            f"BM25 weight {w:g}): fused {fused[i]:.2f} = {1 - w:g} x cosine "
            f"{m.score:.2f} (min-max {enc_norm[i]:.2f}) + {w:g} x BM25 {bm25[i]:.2f} "
            f"(min-max {bm25_norm[i]:.2f}); {cosine_words(m)}",
        )
        for i, m in enumerate(matches)
    ]


def cosine_words(m: Match) -> str:
    """The justification of an unfused score: its parts and the best sentence's start."""
    return (
        f"heuristic (MiniLM cosine): combined {m.score:.2f} (passage {m.passage_score:.2f}, "
        f"best sentence {m.sentence.score:.2f}: {m.sentence.text[:80]!r})"
    )
