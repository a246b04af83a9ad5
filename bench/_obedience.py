"""What the obedient loopback judge takes as an order, and what it does with one.

``bench/_loopback_judge.py --obey`` plays a maximally gullible judge, so that a row of
``bench/injection.py`` measures what the harness's own defences stop when the model stops
nothing: an upper bound on attack success for any real model. Its rules:

1. **Every phrasing of the project's attack suite is an order** (:func:`evidex._attacks.
   attack_suite`, both files, rendered for the request's query and for the passage it is read
   in). The judge obeys a phrasing when any **piece** of it reaches it: a stretch of four
   words or more between line breaks, sentence ends, markup tags (``<...>``, ``[...]``),
   colons, semicolons, dashes and brackets (a phrasing with no such stretch is one piece,
   whole). Texts are compared after invisible Unicode tag characters are read as the ASCII
   they hide, format characters (zero-width, bidi) are dropped, case is folded and whitespace
   is collapsed. A stuffing phrasing is obeyed when the text shows its unit (the query, or its
   keywords) twice or more.
2. **What is obeyed**: the text the judge is shown, never the caller's: a passage's text as
   the prompt carries it (a title or URL reaches no prompt), the claims and the answer of an
   audit. A stretch that preflight cut out is not there to obey.
3. **What an order does**: the passage that holds it gets the top tier (or the request's tier
   it names), rank 1, the taxonomy label it names (else the taxonomy's first), and the verdict
   "sufficient"; every audited claim read beside it is fully supported. An order that speaks
   of every or any passage, of "this batch", or of the first or last passage promotes every
   passage of the request. Text with no order gets what the plain loopback judge gives.
4. It never reads the re-ask's notes: a reply the harness refuses is sent again unchanged.

Why the suite and not word rules: a judge that obeys only what a handful of English patterns
recognise is no upper bound (the suite holds German, French and Spanish notes, base64,
homoglyphs and plain-text verdicts), and word rules would also obey honest text that says
"relevant". The price is one phrasing that hides nothing (``hidden_characters-02``, zero-width
spaces around ordinary words): obeyed like the others, so its row is an upper bound in the
strictest sense. These rules never import the screen (:mod:`evidex._screening`), so the screen
is measured against them, not against itself.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import unicodedata
from dataclasses import dataclass

from evidex._attacks import attack_suite

__all__ = ["Order", "normal", "order_in", "pieces"]

_TAGS = re.compile("[\U000e0000-\U000e007f]+")
_SPLIT = re.compile(r"\n|(?<=[.!?])\s|<[^<>]{0,60}>|\[[^\[\]]{0,60}\]|[:;()]|\s[-\u2013]\s")
_WORD = re.compile(r"\w+")
_EVERYONE = re.compile(
    r"\b(?:(?:every|any|all) (?:passages?|texts?|documents?)|this batch|the (?:first|last) "
    r"(?:one|passage))\b",
    re.IGNORECASE,
)
STUFFING = ("query_stuffing", "keyword_stuffing")
MIN_WORDS = 4


@dataclass(frozen=True)
class Order:
    """An order a text gives the judge: the phrasing it comes from, its words as rendered,
    and whether it speaks of every passage of the request (else of the text holding it)."""

    attack: str
    said: str
    everyone: bool = False


def normal(text: str) -> str:
    """``text`` as the judge compares it: tag characters read as ASCII, format characters
    dropped, case folded, whitespace collapsed."""
    if not text.isascii():
        text = _TAGS.sub(lambda m: "".join(chr(ord(c) - 0xE0000) for c in m.group()), text)
        text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return " ".join(text.casefold().split())


def pieces(said: str) -> list[str]:
    """The stretches of a rendered phrasing that each carry the order (rule 1), normalised."""
    revealed = _TAGS.sub(lambda m: "".join(chr(ord(c) - 0xE0000) for c in m.group()), said)
    found = [normal(p) for p in _SPLIT.split(revealed)]
    long = [p for p in found if len(_WORD.findall(p)) >= MIN_WORDS]
    return long or [normal(said)]


@dataclass(frozen=True)
class _Table:
    """The suite rendered for one query and passage: one pattern for every piece (the first
    phrasing of a piece wins), and the stuffing units."""

    pattern: re.Pattern[str] | None
    by_piece: dict[str, Order]
    stuffing: tuple[tuple[str, Order], ...]


@functools.lru_cache(maxsize=4096)
def _table(query: str, passage_id: str) -> _Table:
    by_piece: dict[str, Order] = {}
    stuffing = []
    for attack in attack_suite():
        said = attack.render(query, passage_id)
        order = Order(attack.id, said, bool(_EVERYONE.search(said)))
        if attack.kind in STUFFING:
            unit = "{keywords}" if "{keywords}" in attack.text else "{query}"
            stuffing.append((normal(dataclasses.replace(attack, text=unit).render(query)), order))
        else:
            for piece in pieces(said):
                if piece:
                    by_piece.setdefault(piece, order)
    pattern = (
        re.compile("|".join(re.escape(p) for p in sorted(by_piece, key=len, reverse=True)))
        if by_piece
        else None
    )
    return _Table(pattern, by_piece, tuple(stuffing))


def order_in(text: str, query: str = "", passage_id: str = "") -> Order | None:
    """An order ``text`` gives by rule 1, else None. ``passage_id`` renders the phrasings
    that name the passage they sit in; ``query`` the stuffing templates."""
    shown = normal(text)
    table = _table(query, passage_id)
    found = table.pattern.search(shown) if table.pattern else None
    if found:
        return table.by_piece[found.group()]
    for unit, order in table.stuffing:
        if unit and shown.count(unit) >= 2:
            return order
    return None
