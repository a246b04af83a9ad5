"""Whitespace normalisation: what verbatim checks and duplicate detection compare."""

from __future__ import annotations

import pytest

from evidex._text import contains_verbatim, normalize_ws


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("  two\t\twords \n", "two words"),
        ("no\u00a0break\u2003em\u3000ideographic", "no break em ideographic"),
        ("record\x1cseparators\x1dcount\x1e\x1fas space", "record separators count as space"),
        ("line\u2028and\u2029paragraph separators", "line and paragraph separators"),
        ("\u201ccurly\u201d \u2018quotes\u2019", "\"curly\" 'quotes'"),
        ("", ""),
        (" \n\t ", ""),
    ],
)
def test_every_unicode_space_collapses_to_one_space(raw: str, normal: str) -> None:
    assert normalize_ws(raw) == normal


def test_a_snippet_matches_across_any_kind_of_space() -> None:
    assert contains_verbatim("Most adults\u00a0need 600\nIU a day.", "adults need 600 IU")


@pytest.mark.parametrize(
    ("passage", "snippet"),
    [
        ("the score ( FRQ ) rose", "the score (FRQ) rose"),
        ("Paris , France", "paris, france"),
        ("a 3 . 5 % rise", "a 3.5% rise"),
    ],
)
def test_spacing_beside_punctuation_does_not_break_a_verbatim_match(
    passage: str, snippet: str
) -> None:
    assert contains_verbatim(passage, snippet)


def test_words_that_differ_still_do_not_match() -> None:
    assert not contains_verbatim("the score ( FRQ ) rose", "the score (FRQ) fell")
    assert not contains_verbatim("ab cd", "abcd")
