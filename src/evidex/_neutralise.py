"""What a judge reads of a flagged text: the screen's spans cut out, the rest as given.

The screen (:mod:`evidex._screening`) says where a passage's text, title or URL looks aimed
at the grader; preflight cuts those stretches out of what every job's judge is shown, so no
grade, rank, label or verdict can rest on them. Each cut becomes :data:`CUT_MARK`; what lies
between two marks is the caller's text, character for character, so a quote verbatim in one
piece is verbatim in the original (:func:`evidex._text.contains_verbatim` checks quotes
within a piece) and :meth:`Shown.to_original` maps an offset of the shown text back.

Query stuffing is cut as the screen found it: the run of repeated query n-grams (or the
keyword window) goes whole, the first echo too, since a single copy of the query is already
what an encoder scores highest; the passage's own sentences around it stay.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from evidex._screening import Suspicion
from evidex._text import CUT_MARK

__all__ = ["CUT_MARK", "Shown", "clean_spans", "cuts", "shown"]

_WORD = re.compile(r"[^\W_]+")  # the screen's words
_SENTENCE_END = re.compile(r"[.!?](?=[\s\"'\u201d)\]]|$)[\"'\u201d)\]]*|\n")


@dataclass(frozen=True)
class Shown:
    """A text as the judge reads it, and where each of its pieces came from: ``pieces`` are
    ``(shown_start, original_start, length)``, one per stretch kept, in order."""

    original: str
    text: str
    pieces: tuple[tuple[int, int, int], ...]

    @property
    def cut(self) -> bool:
        return self.text != self.original

    def to_original(self, start: int, end: int) -> tuple[int, int] | None:
        """The original offsets of ``text[start:end]``, or None when the stretch is not one
        piece of the original (it runs across a cut, or into a mark)."""
        for at, origin, length in self.pieces:
            if at <= start and end <= at + length:
                return origin + start - at, origin + end - at
        return None


def cuts(text: str, found: Sequence[Suspicion]) -> list[tuple[int, int]]:
    """The stretches of ``text`` to cut for the suspicions of one field, merged and sorted.

    A suspicion is a phrase; its cut is the sentence (or line) holding it, since the words
    around "note to the grader" belong to the same note. Hidden characters and query stuffing
    are cut as found (see the module docstring). Cuts with no word between them become one."""
    spans: list[tuple[int, int]] = []
    for s in found:
        if s.kind in ("hidden_characters", "query_stuffing"):
            spans.append((s.start, s.end))
        else:
            before = [m.end() for m in _SENTENCE_END.finditer(text, 0, s.start)]
            after = _SENTENCE_END.search(text, s.end)
            start = before[-1] if before else 0
            while start < s.start and text[start].isspace():
                start += 1
            spans.append((start, after.end() if after else len(text)))
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and (a <= merged[-1][1] or not _WORD.search(text, merged[-1][1], a)):
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def clean_spans(text: str, cut: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The stretches of ``text`` between the ``cut`` ones (sorted, disjoint), blanks left out."""
    out: list[tuple[int, int]] = []
    at = 0
    for a, b in [*cut, (len(text), len(text))]:
        if text[at:a].strip():
            out.append((at, a))
        at = max(at, b)
    return out


def shown(text: str, found: Sequence[Suspicion]) -> Shown:
    """``text`` with the stretches of ``found`` (suspicions of this one field) cut out, each
    cut shown as :data:`CUT_MARK` with a space either side."""
    cut = cuts(text, found)
    if not cut:
        return Shown(text, text, ((0, 0, len(text)),))
    parts: list[str] = []
    pieces: list[tuple[int, int, int]] = []
    length = 0
    at = 0
    for a, b in [*cut, (len(text), len(text))]:
        if a > at:
            pieces.append((length, at, a - at))
            parts.append(text[at:a])
            length += a - at
        if b > a:
            mark = f" {CUT_MARK} "
            parts.append(mark)
            length += len(mark)
        at = max(at, b)
    joined = "".join(parts)
    lead = len(joined) - len(joined.lstrip())
    kept = []
    for start, origin, size in pieces:  # the leading blank is trimmed: shift what follows
        skip = max(0, lead - start)
        if size > skip:
            kept.append((start + skip - lead, origin + skip, size - skip))
    return Shown(text, joined.strip(), tuple(kept))
