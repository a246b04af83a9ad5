"""Justification flags: a heuristic that marks a ranking justification that is empty, or
shares no content word with its passage, so it cannot be pointing at what the passage says."""

from __future__ import annotations

import re

from evidex.types import Event

__all__ = ["content_words", "flag_event", "justification_flag"]

_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = """
    a an and are as at be been but by can could did do does for from had has have he her his
    how i if in into is it its itself may more most no not of on or other our out over same she
    should so some such than that the their them then there these they this those through to
    too under up very was we were what when where which while who why will with would you your
    passage passages query rank ranked ranking relevant relevance above below because more less
    information about answer answers question"""
_STOP = frozenset(_STOP_WORDS.split())


def content_words(text: str) -> set[str]:
    """Lower-case words of three or more characters that are not stop words."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOP}


def justification_flag(justification: str, passage_text: str) -> str | None:
    """``"empty"``, ``"generic"`` (no content word shared with the passage) or None.

    A heuristic, named as such wherever it is reported: a justification that shares no content
    word with its passage cannot be pointing at what the passage says.
    """
    if not justification.strip():
        return "empty"
    if not content_words(justification) & content_words(passage_text):
        return "generic"
    return None


def flag_event(passage_id: str, justification: str, passage_text: str) -> Event | None:
    """A ``justification_flag`` event for one ranked passage, or None when it looks fine."""
    flag = justification_flag(justification, passage_text)
    if flag is None:
        return None
    what = (
        "is empty"
        if flag == "empty"
        else f"shares no content word with the passage: {justification[:160]!r}"
    )
    return Event.about(
        passage_id,
        "justification_flag",
        f"heuristic: the justification of {passage_id} {what}",
        flag=flag,
    )
