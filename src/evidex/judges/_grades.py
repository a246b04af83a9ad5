"""From scores to replies, for the judges that score passages (``local:minilm``,
``local:cross-encoder``): sentences to quote, tiers by cut points, rankings.

The replies use the tasks' JSON shapes, so the harness validates them like any judge's. A tier
reply puts each passage in the first tier whose cut point its score reaches, else the last; its
``key_evidence_snippet`` is the passage's best-matching sentence, a verbatim slice found by
:func:`sentence_spans`, and its justification says which numbers decided (the judge words it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evidex._text import CUT_MARK, cut_whole
from evidex.errors import ConfigError
from evidex.types import TierScheme

__all__ = [
    "CutPoints",
    "PoolScore",
    "SentenceScore",
    "rerank_reply",
    "scores_reply",
    "sentence_spans",
    "spread_cut_points",
    "tier_reply",
]

_BOUNDARY = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)\]]))\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])"
    r"|\s*\n\s*"
)
_WORD = re.compile(r"\S+")


def sentence_spans(text: str, *, max_words: int = 60) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences of ``text``, so each is a verbatim slice.

    A sentence ends at ``.``/``!``/``?`` (and closing quotes) followed by space and a capital
    or digit, or at a line break. A run longer than ``max_words`` words (a list, a passage
    without punctuation) is cut into chunks of ``max_words`` words, so a snippet stays short.
    In a text preflight cut, a sentence never runs into :data:`~evidex._text.CUT_MARK`: a
    snippet holding the mark is verbatim in no piece of the passage, and would fail validation.
    """
    out: list[tuple[int, int]] = []
    at = 0
    for piece in text.split(CUT_MARK):
        out += [(at + s, at + e) for s, e in _piece_spans(piece, max_words)]
        at += len(piece) + len(CUT_MARK)
    return out


def _piece_spans(text: str, max_words: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    out: list[tuple[int, int]] = []
    for s, e in spans:
        words = [(w.start(), w.end()) for w in _WORD.finditer(text, s, e)]
        for i in range(0, len(words), max_words):
            chunk = words[i : i + max_words]
            out.append((chunk[0][0], chunk[-1][1]))
    return out


@dataclass(frozen=True)
class SentenceScore:
    """One sentence of a passage (a verbatim slice ``text[start:end]``) and its score."""

    text: str
    start: int
    end: int
    score: float


@dataclass(frozen=True)
class PoolScore:
    """A candidate's rerank score within its request's pool, and the words that explain it."""

    score: float
    justification: str


def spread_cut_points(cut_points: Sequence[float], count: int) -> tuple[float, ...]:
    """Cut points for a scheme of ``count`` tiers, from points made for another count.

    The points are used as they are when the scheme has one tier more than there are points
    (matched by position: most relevant first). Otherwise they are re-spread by one rule: cut
    point ``i`` (of ``n``) sits at relevance ``1 - (i + 1) / (n + 1)`` on a 0-1 axis; a
    ``count``-tier scheme needs its boundaries at ``1 - j / count`` (j = 1..count-1), read off
    the piecewise-linear curve through the points and extended linearly past its ends. Two
    tiers thus split at the middle cut point.
    """
    n = len(cut_points)
    if count == n + 1:
        return tuple(cut_points)
    if count < 2:
        raise ConfigError(f"a tier scheme needs at least two tiers, got {count}")
    positions = [1.0 - (i + 1) / (n + 1) for i in range(n)][::-1]  # ascending
    scores = list(cut_points)[::-1]
    wanted = [1.0 - j / count for j in range(1, count)]
    return tuple(_interp_linear(x, positions, scores) for x in wanted)


@dataclass(frozen=True)
class CutPoints:
    """Tier cut points given as they are (most relevant first), spread to any tier count."""

    points: tuple[float, ...]

    def for_tiers(self, count: int) -> tuple[float, ...]:
        """The cut points for a scheme of ``count`` tiers (:func:`spread_cut_points`)."""
        return spread_cut_points(self.points, count)


def _interp_linear(x: float, xs: Sequence[float], ys: Sequence[float]) -> float:
    if len(xs) == 1:
        return ys[0]
    if x <= xs[0]:
        i = 0
    elif x >= xs[-1]:
        i = len(xs) - 2
    else:
        i = max(k for k in range(len(xs) - 1) if xs[k] <= x)
    slope = (ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i])
    return ys[i] + slope * (x - xs[i])


Explain = Callable[[int, str, str], str]
"""``(index, spread note, verdict) -> justification`` for one passage of a tier reply: the
note is ``" (cut points re-spread)"`` or empty, the verdict names the cut point that decided."""


NOTHING_LEFT = (
    "nothing left to grade: preflight cut all of this passage's text as aimed at the grader"
)


def _nothing_left(passage_id: str, bottom: str) -> dict[str, Any]:
    """The grade of a passage preflight cut whole: the last tier, with no snippet to quote."""
    return {
        "passage_id": passage_id,
        "tier": bottom,
        "justification": NOTHING_LEFT,
        "key_evidence_snippet": None,
    }


def tier_reply(
    cut_points: Sequence[float],
    ids: Sequence[str],
    scores: Sequence[float],
    snippets: Sequence[str],
    tiers: Sequence[str],
    explain: Explain,
) -> dict[str, Any]:
    """Each passage in the first tier whose cut point its score reaches, else the last.

    ``cut_points`` are re-spread to the scheme's tier count (:func:`spread_cut_points`);
    ``snippets`` are each passage's best-matching sentence, quoted as its evidence.
    """
    cuts = spread_cut_points(cut_points, len(tiers))
    spread = "" if len(cuts) == len(cut_points) else " (cut points re-spread)"
    items = []
    for i, (pid, score, snippet) in enumerate(zip(ids, scores, snippets, strict=True)):
        if cut_whole(snippet):  # no sentence was left to match: the snippet is the whole text
            items.append(_nothing_left(pid, tiers[-1]))
            continue
        level = next((k for k, c in enumerate(cuts) if score >= c), len(cuts))
        if level < len(cuts):
            verdict = f"≥ {cuts[level]:.2f} cut point for {tiers[level]}"
        else:
            verdict = f"< {cuts[-1]:.2f} cut point for {tiers[-2]}"
        items.append(
            {
                "passage_id": pid,
                "tier": tiers[level],
                "justification": explain(i, spread, verdict),
                "key_evidence_snippet": snippet,
            }
        )
    counts = {TierScheme.count_key(t): 0 for t in tiers}
    for item in items:
        counts[TierScheme.count_key(str(item["tier"]))] += 1
    return {"classifications": items, "tier_summary": counts}


def _clipped(score: float) -> float:
    return round(min(1.0, max(0.0, score)), 4)


def rerank_reply(ids: Sequence[str], pool: Sequence[PoolScore]) -> dict[str, Any]:
    """Ranked by pool score (ties keep input order); ``relevance_score`` is that score
    clipped to [0, 1], and each justification names its neighbours' scores."""
    order = sorted(range(len(ids)), key=lambda i: (-pool[i].score, i))
    ranked = []
    for rank, i in enumerate(order, 1):
        around = []
        if rank > 1:
            above = order[rank - 2]
            around.append(f"below {ids[above]} ({pool[above].score:.2f})")
        if rank < len(order):
            below = order[rank]
            around.append(f"above {ids[below]} ({pool[below].score:.2f})")
        ranked.append(
            {
                "rank": rank,
                "passage_id": ids[i],
                "relevance_score": _clipped(pool[i].score),
                "justification": pool[i].justification
                + (f"; {', '.join(around)}" if around else ""),
            }
        )
    return {"ranked_passages": ranked}


def scores_reply(ids: Sequence[str], pool: Sequence[PoolScore]) -> dict[str, Any]:
    """The pointwise score step's reply: one unclipped score per passage, in input order."""
    return {
        "scores": [
            {"passage_id": pid, "relevance_score": p.score, "justification": p.justification}
            for pid, p in zip(ids, pool, strict=True)
        ]
    }
