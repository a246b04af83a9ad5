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


def test_the_match_form_drops_exactly_the_spaces_beside_punctuation() -> None:
    """Against the rule written out: a space goes when a mark (neither a word character nor a
    space) stands on either side of it, and no other character changes."""
    import random
    import re

    from evidex._text import _match_form

    def by_rule(text: str) -> str:
        t = normalize_ws(text).casefold()
        mark = re.compile(r"[^\w\s]")
        return "".join(
            ch
            for i, ch in enumerate(t)
            if not (
                ch == " "
                and ((i > 0 and mark.match(t[i - 1])) or (i + 1 < len(t) and mark.match(t[i + 1])))
            )
        )

    rng = random.Random(7)
    alphabet = "aB c\u00e9,.(  )-'\"1_\u00fc ;:!?\t"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        assert _match_form(text) == by_rule(text), text


def test_an_exact_ascii_substring_is_verbatim_as_the_match_forms_say() -> None:
    """The exact-substring shortcut agrees with comparing match forms, on random ASCII text
    full of whitespace runs, punctuation and case, for every kind of cut."""
    import random

    from evidex._text import _match_form

    rng = random.Random(5)
    alphabet = ["a", "B", "c", " ", "  ", "\n", "\t", "(", ")", ".", ",", "-", "'", "1", "_"]
    for _ in range(3000):
        hay = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        start = rng.randint(0, len(hay))
        needle = hay[start : rng.randint(start, len(hay))]
        n = _match_form(needle)
        assert contains_verbatim(hay, needle) == (bool(n) and n in _match_form(hay)), (hay, needle)


def test_ascii_text_already_normal_comes_back_as_split_and_join_give_it() -> None:
    import random

    rng = random.Random(9)
    alphabet = ["a", "b", " ", "  ", ".", *"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f", "\x1b", "\x7f"]
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert normalize_ws(text) == " ".join(text.split()), repr(text)
