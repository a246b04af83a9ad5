"""Evaluation arithmetic, with no I/O: agreement, classification, ranking, citations, intervals.

Conventions, chosen once and documented here because every report relies on them:

- Labels are given as an ordered sequence, most relevant first (a :class:`TierScheme` order).
  Weighted kappas use the distance between positions in that order.
- **Undefined kappa.** When the expected agreement is 1 (both raters used one and the same
  single label) kappa is 0/0. We return ``nan`` rather than 1 or 0, and reports print it as
  "undefined (a single label)" and store ``null`` in JSON: a perfect-looking figure on a
  one-label sample would be a lie, and a zero would be one too.
- **Ranking** follows trec_eval: the ideal ranking is built from *every* judged grade of the
  query, not only the retrieved ones; a query with no relevant document scores 0 for nDCG, P@k
  and RR; ``P@k`` divides by k even when fewer than k documents were returned; ties in scores
  are broken by document id, descending (:func:`rank_by_scores`), as trec_eval does.
- **nDCG gain** is named: ``linear`` (gain = grade, trec_eval's default) or ``exponential``
  (gain = 2**grade - 1, the Burges et al. form). The discount is ``1 / log2(rank + 1)``.
- **Label sets.** :func:`set_accuracy` and :func:`set_macro_f1` take one set of labels per
  item (multi-label classification); on single-label items they equal :func:`accuracy` and
  :func:`macro_f1`.
- **Claims** are matched one to one by the overlap of their character spans in the answer
  (intersection over union, :func:`span_overlap`), the best-overlapping pairs first
  (:func:`match_claims`).
- **Citations** compare sets of passage ids per item. Micro averages pool the counts; macro
  precision averages over items that predicted at least one id, macro recall over items with
  at least one gold id (an empty set has no precision to average, and counting it as 1 would
  reward citing nothing).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from evidex._text import normalize_ws
from evidex.errors import InputError
from evidex.evaluate.intervals import Interval, bootstrap_ci, bootstrap_cis

__all__ = [
    "PRF",
    "Interval",
    "accuracy",
    "accuracy_from_matrix",
    "binary_kappa",
    "bootstrap_ci",
    "bootstrap_cis",
    "boundary_confusions",
    "citation_scores",
    "claim_f1",
    "cohen_kappa",
    "collapse_at",
    "confusion_matrix",
    "dcg",
    "kappa_from_matrix",
    "label_f1",
    "macro_f1",
    "macro_f1_from_matrix",
    "match_claims",
    "mrr",
    "ndcg_at_k",
    "per_label_agreement",
    "precision_at_k",
    "prf",
    "rank_by_scores",
    "reciprocal_rank",
    "set_accuracy",
    "set_macro_f1",
    "span_overlap",
]

Weights = Literal["linear", "quadratic"] | None
Gain = Literal["linear", "exponential"]
T = TypeVar("T")


# ---------------------------------------------------------------------- agreement


def confusion_matrix(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]
) -> npt.NDArray[np.int64]:
    """Counts with gold labels as rows and predicted labels as columns, in ``labels`` order."""
    _check_pairs(gold, pred, labels)
    index = {label: i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for g, p in zip(gold, pred, strict=True):
        matrix[index[g], index[p]] += 1
    return matrix


def cohen_kappa(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str], weights: Weights = None
) -> float:
    """Cohen's kappa, plain or weighted by the distance between positions in ``labels``.

    ``kappa = 1 - sum(w * observed) / sum(w * expected)``, where ``w`` is 1 off the diagonal
    (plain), ``|i-j|/(n-1)`` (linear) or its square (quadratic). ``nan`` when undefined.
    """
    return kappa_from_matrix(confusion_matrix(gold, pred, labels), weights)


def kappa_from_matrix(matrix: npt.NDArray[np.int64], weights: Weights = None) -> float:
    """Kappa of a confusion matrix (rows gold, columns predicted)."""
    n = len(matrix)
    total = matrix.sum()
    if total == 0 or n < 2:
        return math.nan
    observed = matrix / total
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    i, j = np.indices((n, n))
    if weights is None:
        w = (i != j).astype(float)
    elif weights == "linear":
        w = np.abs(i - j) / (n - 1)
    elif weights == "quadratic":
        w = ((i - j) / (n - 1)) ** 2
    else:
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    disagreement_expected = float((w * expected).sum())
    if disagreement_expected == 0.0:
        return math.nan
    return 1.0 - float((w * observed).sum()) / disagreement_expected


def binary_kappa(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str], boundary: str
) -> float:
    """Kappa after cutting the ordered ``labels`` into two: ``boundary`` and everything more
    relevant than it are positive, the rest negative (e.g. "would this passage be used?")."""
    if boundary not in labels:
        raise InputError(f"boundary {boundary!r} is not one of the labels {list(labels)}")
    if boundary == labels[-1]:
        raise InputError(f"boundary {boundary!r} is the last label: nothing would be negative")
    return kappa_from_matrix(collapse_at(confusion_matrix(gold, pred, labels), labels, boundary))


def collapse_at(
    matrix: npt.NDArray[np.int64], labels: Sequence[str], boundary: str
) -> npt.NDArray[np.int64]:
    """A confusion matrix over ordered ``labels`` cut into two at ``boundary`` (it and every
    label before it positive, the rest negative): the 2×2 matrix :func:`binary_kappa` reads,
    so a report's binarised kappas come from the one matrix it already counted."""
    cut = list(labels).index(boundary) + 1
    return np.array(
        [
            [matrix[:cut, :cut].sum(), matrix[:cut, cut:].sum()],
            [matrix[cut:, :cut].sum(), matrix[cut:, cut:].sum()],
        ],
        dtype=np.int64,
    )


def accuracy(gold: Sequence[str], pred: Sequence[str]) -> float:
    """Share of items where the prediction equals the gold label (``nan`` on no items)."""
    _check_same_length(gold, pred)
    if not gold:
        return math.nan
    return sum(g == p for g, p in zip(gold, pred, strict=True)) / len(gold)


def accuracy_from_matrix(matrix: npt.NDArray[np.int64]) -> float:
    """:func:`accuracy` of a confusion matrix: its diagonal over its total (``nan`` on none)."""
    total = int(matrix.sum())
    return int(np.trace(matrix)) / total if total else math.nan


@dataclass(frozen=True)
class PRF:
    precision: float
    recall: float
    f1: float
    support: int


def prf(tp: int, n_pred: int, n_gold: int) -> PRF:
    """Precision, recall and F1 from counts: ``tp`` hits among ``n_pred`` predictions and
    ``n_gold`` gold items (0 when undefined, as sklearn's ``zero_division=0``)."""
    return _prf(tp, n_pred, n_gold)


def label_f1(gold: Sequence[str], pred: Sequence[str], label: str) -> PRF:
    """Precision, recall and F1 of one label against the rest (0 when undefined, as sklearn's
    ``zero_division=0``)."""
    _check_same_length(gold, pred)
    tp = sum(g == label and p == label for g, p in zip(gold, pred, strict=True))
    n_pred = sum(p == label for p in pred)
    n_gold = sum(g == label for g in gold)
    return _prf(tp, n_pred, n_gold)


def macro_f1(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str] | None = None
) -> float:
    """Unweighted mean F1 over ``labels`` (default: every label seen in gold or predictions)."""
    _check_same_length(gold, pred)
    chosen = sorted(set(gold) | set(pred)) if labels is None else list(labels)
    if not chosen:
        return math.nan
    return float(np.mean([label_f1(gold, pred, label).f1 for label in chosen]))


def macro_f1_from_matrix(matrix: npt.NDArray[np.int64], labels: Sequence[str]) -> float:
    """:func:`macro_f1` with its default labels (every label seen in gold or predictions), of
    a confusion matrix over ``labels``: the same counts, averaged in the same order."""
    rows, cols = matrix.sum(axis=1), matrix.sum(axis=0)
    index = {label: i for i, label in enumerate(labels)}
    seen = sorted(label for label in labels if rows[index[label]] or cols[index[label]])
    if not seen:
        return math.nan
    scores = []
    for label in seen:
        i = index[label]
        scores.append(_prf(int(matrix[i, i]), int(cols[i]), int(rows[i])).f1)
    return float(np.mean(scores))


def set_accuracy(
    gold: Sequence[set[str] | frozenset[str]], pred: Sequence[set[str] | frozenset[str]]
) -> float:
    """Share of items whose predicted label set equals the gold set (``nan`` on no items)."""
    _check_same_length(gold, pred)
    if not gold:
        return math.nan
    return sum(set(g) == set(p) for g, p in zip(gold, pred, strict=True)) / len(gold)


def set_macro_f1(
    gold: Sequence[set[str] | frozenset[str]],
    pred: Sequence[set[str] | frozenset[str]],
    labels: Sequence[str],
) -> float:
    """Unweighted mean over ``labels`` of each label's F1, the label counted present or absent
    in every item's set (sklearn's multi-label ``average="macro"``, ``zero_division=0``)."""
    _check_same_length(gold, pred)
    if not labels:
        return math.nan
    scores = []
    for label in labels:
        tp = sum(label in g and label in p for g, p in zip(gold, pred, strict=True))
        scores.append(_prf(tp, sum(label in p for p in pred), sum(label in g for g in gold)).f1)
    return float(np.mean(scores))


def per_label_agreement(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]
) -> dict[str, PRF]:
    """For each label: how much of its gold items the judge agreed on (recall), how many of
    the judge's uses of it were right (precision), and F1."""
    _check_pairs(gold, pred, labels)
    return {label: label_f1(gold, pred, label) for label in labels}


def boundary_confusions(matrix: npt.NDArray[np.int64], labels: Sequence[str]) -> dict[str, Any]:
    """Where disagreements sit on an ordered scale: for each pair of adjacent labels, how
    often the judge put an item one step too low (``down``) or too high (``up``), and the share
    of all disagreements; ``far`` counts disagreements of two steps or more."""
    total_off = int(matrix.sum() - np.trace(matrix))
    pairs: list[dict[str, Any]] = []
    adjacent = 0
    for i in range(len(labels) - 1):
        down, up = int(matrix[i, i + 1]), int(matrix[i + 1, i])
        adjacent += down + up
        pairs.append(
            {
                "boundary": f"{labels[i]} / {labels[i + 1]}",
                "down": down,
                "up": up,
                "total": down + up,
                "share": (down + up) / total_off if total_off else 0.0,
            }
        )
    far = total_off - adjacent
    return {"disagreements": total_off, "adjacent": pairs, "far": far}


# ---------------------------------------------------------------------- ranking


def rank_by_scores(scores: Mapping[str, float]) -> list[str]:
    """Document ids by score, highest first; ties broken by id, descending (trec_eval)."""
    return [doc for doc, _ in sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def dcg(grades: Sequence[float], k: int, gain: Gain = "linear") -> float:
    """Discounted cumulative gain of the first ``k`` grades, in rank order."""
    total = 0.0
    for rank, grade in enumerate(grades[:k], start=1):
        g = max(0.0, float(grade))
        total += (g if gain == "linear" else 2.0**g - 1.0) / math.log2(rank + 1)
    return total


def ndcg_at_k(
    ranking: Sequence[str], grades: Mapping[str, int], k: int, gain: Gain = "linear"
) -> float:
    """nDCG@k of one ranked list against the query's judged ``grades`` (unjudged = 0)."""
    _check_cutoff(k)
    if gain not in ("linear", "exponential"):
        raise ValueError(f"gain must be 'linear' or 'exponential', got {gain!r}")
    ideal = dcg(sorted(grades.values(), reverse=True), k, gain)
    if ideal == 0.0:
        return 0.0
    return dcg([grades.get(doc, 0) for doc in ranking], k, gain) / ideal


def precision_at_k(
    ranking: Sequence[str], grades: Mapping[str, int], k: int, rel: int = 1
) -> float:
    """Share of the first ``k`` positions holding a document graded ``rel`` or more."""
    _check_cutoff(k)
    return sum(grades.get(doc, 0) >= rel for doc in ranking[:k]) / k


def reciprocal_rank(ranking: Sequence[str], grades: Mapping[str, int], rel: int = 1) -> float:
    """1 / rank of the first document graded ``rel`` or more; 0 when there is none."""
    for rank, doc in enumerate(ranking, start=1):
        if grades.get(doc, 0) >= rel:
            return 1.0 / rank
    return 0.0


def mrr(
    rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], rel: int = 1
) -> float:
    """Mean reciprocal rank over the judged queries (a judged query with no run scores 0)."""
    if not qrels:
        return math.nan
    return float(np.mean([reciprocal_rank(rankings.get(q, ()), g, rel) for q, g in qrels.items()]))


# ---------------------------------------------------------------------- citations and claims


def citation_scores(
    gold: Sequence[set[str] | frozenset[str]], pred: Sequence[set[str] | frozenset[str]]
) -> dict[str, float]:
    """Citation precision and recall of predicted id sets against gold id sets, per item.

    Returns ``precision_micro``, ``recall_micro``, ``precision_macro``, ``recall_macro`` and
    ``f1_micro``; see the module docstring for how empty sets count.
    """
    _check_same_length(gold, pred)
    hits = [len(g & p) for g, p in zip(gold, pred, strict=True)]
    n_pred, n_gold = sum(len(p) for p in pred), sum(len(g) for g in gold)
    micro = _prf(sum(hits), n_pred, n_gold)
    macro_p = [h / len(p) for h, p in zip(hits, pred, strict=True) if p]
    macro_r = [h / len(g) for h, g in zip(hits, gold, strict=True) if g]
    return {
        "precision_micro": micro.precision if n_pred else math.nan,
        "recall_micro": micro.recall if n_gold else math.nan,
        "f1_micro": micro.f1,
        "precision_macro": float(np.mean(macro_p)) if macro_p else math.nan,
        "recall_macro": float(np.mean(macro_r)) if macro_r else math.nan,
    }


def claim_f1(
    gold: Sequence[tuple[str, str]], pred: Sequence[tuple[str, str]], *, with_label: bool = True
) -> PRF:
    """Claim-level precision/recall/F1 for one answer.

    A predicted ``(claim_text, label)`` matches a gold one when the texts are equal after
    whitespace and case normalisation (and, with ``with_label``, the labels are equal too).
    Each gold claim can be matched once.
    """
    remaining = [(normalize_ws(t).lower(), label) for t, label in gold]
    tp = 0
    for text, label in pred:
        key = normalize_ws(text).lower()
        for i, (g_text, g_label) in enumerate(remaining):
            if g_text == key and (not with_label or g_label == label):
                del remaining[i]
                tp += 1
                break
    return _prf(tp, len(pred), len(gold))


def span_overlap(a: tuple[int, int], b: tuple[int, int]) -> float:
    """Intersection over union of two ``(start, end)`` character spans (0 when disjoint)."""
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else 0.0


def match_claims(
    overlaps: Sequence[Sequence[float]], min_overlap: float = 0.5
) -> list[tuple[int, int]]:
    """One-to-one ``(gold index, predicted index)`` pairs from an overlap matrix (rows gold,
    columns predicted): the highest overlap first, ties by position, pairs below
    ``min_overlap`` left unmatched."""
    cells = sorted(
        (
            (-value, i, j)
            for i, row in enumerate(overlaps)
            for j, value in enumerate(row)
            if value >= min_overlap and value > 0
        ),
    )
    used_gold: set[int] = set()
    used_pred: set[int] = set()
    pairs = []
    for _, i, j in cells:
        if i not in used_gold and j not in used_pred:
            used_gold.add(i)
            used_pred.add(j)
            pairs.append((i, j))
    return sorted(pairs)


# ---------------------------------------------------------------------- helpers


def _prf(tp: int, n_pred: int, n_gold: int) -> PRF:
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return PRF(precision, recall, f1, n_gold)


def _check_same_length(gold: Sequence[object], pred: Sequence[object]) -> None:
    if len(gold) != len(pred):
        raise InputError(f"gold and predictions differ in length: {len(gold)} vs {len(pred)}")


def _check_pairs(gold: Sequence[Hashable], pred: Sequence[Hashable], labels: Sequence[str]) -> None:
    _check_same_length(gold, pred)
    known = set(labels)
    unknown = sorted({str(x) for x in (*gold, *pred) if x not in known})
    if unknown:
        raise InputError(f"labels {unknown} are not among the known labels {list(labels)}")


def _check_cutoff(k: int) -> None:
    if k < 1:
        raise InputError(f"the cutoff k must be at least 1, got {k}")
