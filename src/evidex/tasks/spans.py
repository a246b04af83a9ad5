"""Verbatim spans with offsets, and sentence-aligned segments of a long text.

The audit needs more than :func:`evidex._text.contains_verbatim`: a claim must be found *in
place*, so its offsets in the original answer can be returned. Matching forgives the same
things the verbatim check forgives (runs of whitespace, curly quotes, NFKC forms), and maps the
match back to the caller's original characters.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Segment", "find_span", "segment_text"]

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n\s*\n")


def _normalised(text: str) -> tuple[str, list[int]]:
    """``text`` normalised like :func:`evidex._text.normalize_ws`, and for each character of
    the result the index of the original character it came from."""
    chars: list[str] = []
    origin: list[int] = []
    after_space = True
    for index, char in enumerate(text):
        for c in unicodedata.normalize("NFKC", char).translate(_QUOTES):
            if c.isspace():
                if after_space:
                    continue
                c, after_space = " ", True
            else:
                after_space = False
            chars.append(c)
            origin.append(index)
    while chars and chars[-1] == " ":
        chars.pop()
        origin.pop()
    return "".join(chars), origin


def find_span(text: str, needle: str, start: int = 0) -> tuple[int, int] | None:
    """Offsets ``(begin, end)`` of the first occurrence of ``needle`` in ``text`` at or after
    ``start``, after whitespace and quote normalisation; ``None`` when it does not occur."""
    norm_text, origin = _normalised(text)
    norm_needle, _ = _normalised(needle)
    if not norm_needle:
        return None
    from_index = next((i for i, o in enumerate(origin) if o >= start), len(origin))
    found = norm_text.find(norm_needle, from_index)
    if found < 0:
        return None
    return origin[found], origin[found + len(norm_needle) - 1] + 1


@dataclass(frozen=True)
class Segment:
    """A slice ``text[start:end]`` of a longer text."""

    start: int
    end: int
    text: str


def segment_text(text: str, budget: int, count_tokens: Callable[[str], int]) -> list[Segment]:
    """Cut ``text`` into consecutive segments of at most ``budget`` tokens, at sentence ends
    where possible and at spaces otherwise. Together the segments cover every non-blank
    character of ``text``: nothing is dropped, only divided."""
    pieces: list[tuple[int, int]] = []
    begin = 0
    for match in _SENTENCE_END.finditer(text):
        pieces.append((begin, match.end()))
        begin = match.end()
    if begin < len(text):
        pieces.append((begin, len(text)))

    segments: list[Segment] = []
    current: tuple[int, int] | None = None
    for piece in _split_long(text, pieces, budget, count_tokens):
        if current is not None and count_tokens(text[current[0] : piece[1]]) <= budget:
            current = (current[0], piece[1])
            continue
        if current is not None:
            segments.append(_trimmed(text, *current))
        current = piece
    if current is not None:
        segments.append(_trimmed(text, *current))
    return [s for s in segments if s.text]


def _split_long(
    text: str, pieces: list[tuple[int, int]], budget: int, count_tokens: Callable[[str], int]
) -> list[tuple[int, int]]:
    """Pieces over the budget (a run-on sentence) are cut at the last space that fits."""
    out: list[tuple[int, int]] = []
    for begin, end in pieces:
        while count_tokens(text[begin:end]) > budget:
            lo, hi = begin + 1, end
            while lo < hi:  # the longest prefix within the budget
                mid = (lo + hi + 1) // 2
                if count_tokens(text[begin:mid]) <= budget:
                    lo = mid
                else:
                    hi = mid - 1
            space = text.rfind(" ", begin + 1, lo)
            cut = space + 1 if space > begin + (lo - begin) // 2 else lo
            out.append((begin, cut))
            begin = cut
        if begin < end:
            out.append((begin, end))
    return out


def _trimmed(text: str, begin: int, end: int) -> Segment:
    while begin < end and text[begin].isspace():
        begin += 1
    while end > begin and text[end - 1].isspace():
        end -= 1
    return Segment(begin, end, text[begin:end])
