"""Features and the linear ordinal rule of the ``local:minilm`` tier experiment.

One cosine mapped to tiers by absolute cut points may transfer badly when the cosine scale of
one query set is not that of another. ``fit_minilm_ordinal.py`` tests whether signals that are
*relative to the candidates graded together* (rank percentile and z-score within the group)
help, next to the absolute ones, combined linearly and cut into tiers::

    x     = features(passage, its group)            (see FEATURES)
    score = sum_k weight_k * (x_k - center_k) / scale_k
    tier  = the first tier whose cut point the score reaches (most relevant first), else last

The group is what the judge would see at once: in the tier job, one batch (5-15 passages of
one query). BM25 is computed in numpy (Lucene's variant, as ``bm25s`` computes it with
``method="lucene"``) over the group as its corpus; the benchmark checks it against ``bm25s``.

The model did not beat the shipped single-score cut points on held-out and cross-set
evaluation (docs/benchmarks.md, section ``minilm_ordinal``), so it lives here with the
experiment and not in the judge.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "ABSOLUTE_FEATURES",
    "FEATURES",
    "LinearOrdinal",
    "bm25_scores",
    "group_features",
    "levels_of",
    "rank_percentile",
    "tokenize",
    "zscore",
]

Floats = npt.NDArray[np.float64]

ABSOLUTE_FEATURES = ("cos_passage", "cos_sentence", "log_words")
"""Features of a passage alone: they need no group."""
FEATURES = (
    *ABSOLUTE_FEATURES,
    "bm25_pct",
    "cos_passage_z",
    "cos_sentence_z",
    "bm25_z",
    "cos_passage_pct",
    "cos_sentence_pct",
)
"""Every feature :func:`group_features` computes, in column order."""

_MIN_SD = 1e-3
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_STOPWORD_TEXT = (
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with what which who whom how why when where do "
    "does did from has have had its can you your we our he she his her them i me my"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def tokenize(text: str) -> list[str]:
    """Lower-cased words of two or more characters, English stopwords removed."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


def bm25_scores(query: str, texts: Sequence[str], *, k1: float = 1.5, b: float = 0.75) -> Floats:
    """BM25 (Lucene variant) of each text for ``query``, the texts themselves being the corpus.

    ``idf = ln(1 + (N - n + 0.5) / (n + 0.5))`` and each query term adds
    ``idf * tf / (tf + k1 * (1 - b + b * len / avglen))``; a repeated query term counts once
    per occurrence in the query.
    """
    docs = [Counter(tokenize(t)) for t in texts]
    out = np.zeros(len(texts))
    if not docs:
        return out
    lengths = np.array([sum(d.values()) for d in docs], dtype=float)
    average = max(float(lengths.mean()), 1e-9)
    norm = k1 * (1 - b + b * lengths / average)
    n_docs = len(docs)
    for term in tokenize(query):
        tf = np.array([d.get(term, 0) for d in docs], dtype=float)
        having = int((tf > 0).sum())
        if having == 0:
            continue
        idf = math.log(1 + (n_docs - having + 0.5) / (having + 0.5))
        out += idf * tf / (tf + norm)
    return out


def rank_percentile(values: Floats) -> Floats:
    """Where each value sits in its group, 0 (lowest) to 1 (highest); ties share the mean
    rank; a group of one sits at 0.5."""
    n = len(values)
    if n == 1:
        return np.array([0.5])
    order = np.argsort(values, kind="stable")
    ranks = np.empty(n)
    ranks[order] = np.arange(n, dtype=float)
    for value in np.unique(values):
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    result: Floats = ranks / (n - 1)
    return result


def zscore(values: Floats) -> Floats:
    """``(x - mean) / sd`` within the group; the sd is floored at 0.001 so that a group of
    near-identical scores does not blow small differences up."""
    if len(values) < 2:
        return np.zeros(len(values))
    sd = max(float(values.std()), _MIN_SD)
    result: Floats = (values - values.mean()) / sd
    return result


def group_features(
    cos_passage: Floats, cos_sentence: Floats, bm25: Floats, words: Sequence[int]
) -> Floats:
    """The :data:`FEATURES` matrix (one row per passage) of one group of candidates."""
    columns = {
        "cos_passage": cos_passage,
        "cos_sentence": cos_sentence,
        "log_words": np.log1p(np.asarray(words, dtype=float)),
        "bm25_pct": rank_percentile(bm25),
        "cos_passage_z": zscore(cos_passage),
        "cos_sentence_z": zscore(cos_sentence),
        "bm25_z": zscore(bm25),
        "cos_passage_pct": rank_percentile(cos_passage),
        "cos_sentence_pct": rank_percentile(cos_sentence),
    }
    return np.column_stack([np.asarray(columns[name], dtype=float) for name in FEATURES])


def levels_of(scores: Floats, cut_points: Sequence[float]) -> npt.NDArray[np.int64]:
    """Tier index of each score, 0 = most relevant: the first of the descending cut points it
    reaches, else the last tier (so: how many cut points lie above the score)."""
    cuts = np.asarray(cut_points, dtype=float)
    result: npt.NDArray[np.int64] = (np.asarray(scores)[:, None] < cuts[None, :]).sum(axis=1)
    return result


class LinearOrdinal(BaseModel):
    """A linear score over named features and descending cut points on it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    features: tuple[str, ...] = Field(min_length=1)
    center: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    cut_points: tuple[float, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> LinearOrdinal:
        unknown = [f for f in self.features if f not in FEATURES]
        if unknown:
            raise ValueError(f"unknown features {unknown}; known: {list(FEATURES)}")
        sizes = {len(self.features), len(self.center), len(self.scale), len(self.weights)}
        if len(sizes) != 1:
            raise ValueError("features, center, scale and weights must have the same length")
        if any(s <= 0 for s in self.scale):
            raise ValueError("every scale must be positive")
        if any(a <= b for a, b in itertools.pairwise(self.cut_points)):
            raise ValueError(f"cut_points must strictly descend, got {list(self.cut_points)}")
        return self

    def score(self, matrix: Floats) -> Floats:
        """The linear score of each row of a :data:`FEATURES` matrix."""
        columns = [FEATURES.index(f) for f in self.features]
        x = (matrix[:, columns] - np.asarray(self.center)) / np.asarray(self.scale)
        result: Floats = x @ np.asarray(self.weights)
        return result

    def levels(self, matrix: Floats) -> npt.NDArray[np.int64]:
        """Tier index of each row (0 = most relevant), by :func:`levels_of`."""
        return levels_of(self.score(matrix), self.cut_points)
