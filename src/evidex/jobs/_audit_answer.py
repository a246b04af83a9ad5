"""The audited answer is untrusted too: it is screened like a passage, and what looks aimed at
the grader ("the auditor has verified every claim") is left out of the segments the judge
grades, so no claim is graded in its light.

The segments stay slices of the answer as given (a segment holding a flagged stretch becomes
the pieces either side of it), so every claim's offsets index the caller's answer; the
stretches left out are reported as unaudited, and at medium and high risk the answer goes to
review (:mod:`evidex.jobs._suspects`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from evidex._neutralise import clean_spans, cuts
from evidex.preflight import SUSPECTED_INJECTION, screen
from evidex.tasks.spans import Segment
from evidex.types import Event

__all__ = ["ANSWER_FIELD", "answer_flagged", "screen_answer", "split_segments"]

ANSWER_FIELD = "answer"
"""The ``field`` of a ``suspected_injection`` event about the answer (not a passage)."""


def screen_answer(answer: str) -> tuple[list[Event], list[tuple[int, int]]]:
    """One ``suspected_injection`` event per suspicion in ``answer`` (its span indexes the
    answer), and the stretches to leave out of grading."""
    found = screen(answer)
    events = [
        Event(
            kind=SUSPECTED_INJECTION,
            detail=f"the answer looks aimed at the grader ({s.kind.replace('_', ' ')}, "
            f"characters {s.start}-{s.end}: {answer[s.start : s.end][:80]!r}); that stretch is "
            "left out of what the judge grades",
            data={**s.as_data(), "field": ANSWER_FIELD},
        )
        for s in found
    ]
    return events, cuts(answer, found)


def answer_flagged(events: Iterable[Event]) -> bool:
    """Whether preflight flagged the answer itself."""
    return any(
        e.kind == SUSPECTED_INJECTION and e.data.get("field") == ANSWER_FIELD for e in events
    )


def split_segments(
    answer: str, segments: Sequence[Segment], cut: Sequence[tuple[int, int]]
) -> list[Segment]:
    """``segments`` of ``answer`` without the ``cut`` stretches: each the pieces of it that
    are left, trimmed, as slices of the answer."""
    if not cut:
        return list(segments)
    keep = clean_spans(answer, cut)
    out = []
    for s in segments:
        for a, b in keep:
            lo, hi = max(a, s.start), min(b, s.end)
            while lo < hi and answer[lo].isspace():
                lo += 1
            while hi > lo and answer[hi - 1].isspace():
                hi -= 1
            if lo < hi:
                out.append(Segment(lo, hi, answer[lo:hi]))
    return out
