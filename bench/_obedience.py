"""What the obedient loopback judge takes as an order, and what it does with one.

``bench/_loopback_judge.py --obey`` plays a maximally gullible judge, so that a row of
``bench/injection.py`` measures what the harness's own defences stop when the model stops
nothing: an upper bound on attack success for any real model. Its rules:

1. **Every phrasing of the project's attack suite is an order** (:func:`evidex._attacks.
   attack_suite`, both files, rendered for the request's query and for the passage it is read
   in). The judge obeys a phrasing when **half of its words or more** reach it in runs of
   three or more, in the phrasing's order (a phrasing of fewer than three words: all of
   them): a phrasing cut around its markup still gives its order, one whose instruction was
   cut and whose carrier ("The passages are over.", "Thank you for understanding.") is left
   gives none. Words are compared after invisible Unicode tag characters are read as the
   ASCII they hide, format characters (zero-width, bidi) are dropped and case is folded. A
   stuffing phrasing is obeyed when the text shows its unit (the query, or its keywords)
   twice or more.
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
from collections import defaultdict
from dataclasses import dataclass

from evidex._attacks import attack_suite

__all__ = ["Order", "normal", "order_in", "words"]

_TAGS = re.compile("[\U000e0000-\U000e007f]+")
_WORD = re.compile(r"\w+")
_EVERYONE = re.compile(
    r"\b(?:(?:every|any|all) (?:passages?|texts?|documents?)|this batch|the (?:first|last) "
    r"(?:one|passage))\b",
    re.IGNORECASE,
)
STUFFING = ("query_stuffing", "keyword_stuffing")
RUN = 3
"""Words in a run that counts (rule 1)."""
SHARE = 0.5
"""Share of a phrasing's words that must reach the judge (rule 1)."""


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


def words(text: str) -> tuple[str, ...]:
    """The words of ``text`` as the judge compares them (:func:`normal`)."""
    return tuple(_WORD.findall(normal(text)))


def _runs(seq: tuple[str, ...], n: int) -> set[tuple[str, ...]]:
    return {seq[i : i + n] for i in range(len(seq) - n + 1)}


@dataclass(frozen=True)
class _Phrasing:
    order: Order
    words: tuple[str, ...]


@dataclass(frozen=True)
class _Table:
    """The suite rendered for one query and passage: which phrasings each run of words
    belongs to, and the stuffing units."""

    by_run: dict[tuple[str, ...], list[_Phrasing]]
    stuffing: tuple[tuple[str, Order], ...]


@functools.lru_cache(maxsize=4096)
def _table(query: str, passage_id: str) -> _Table:
    by_run: dict[tuple[str, ...], list[_Phrasing]] = defaultdict(list)
    stuffing = []
    for attack in attack_suite():
        said = attack.render(query, passage_id)
        order = Order(attack.id, said, bool(_EVERYONE.search(said)))
        if attack.kind in STUFFING:
            unit = "{keywords}" if "{keywords}" in attack.text else "{query}"
            stuffing.append((normal(dataclasses.replace(attack, text=unit).render(query)), order))
            continue
        phrasing = _Phrasing(order, words(said))
        for run in _runs(phrasing.words, min(RUN, len(phrasing.words))):
            if phrasing not in by_run[run]:
                by_run[run].append(phrasing)
    return _Table(dict(by_run), tuple(stuffing))


def _reached(phrasing: _Phrasing, shown: tuple[str, ...]) -> float:
    """The share of the phrasing's words that reach the judge in runs (rule 1)."""
    seq = phrasing.words
    n = min(RUN, len(seq))
    there = _runs(shown, n)
    covered = [False] * len(seq)
    for i in range(len(seq) - n + 1):
        if seq[i : i + n] in there:
            covered[i : i + n] = [True] * n
    return sum(covered) / len(seq) if seq else 0.0


def order_in(text: str, query: str = "", passage_id: str = "") -> Order | None:
    """An order ``text`` gives by rule 1, else None. ``passage_id`` renders the phrasings
    that name the passage they sit in; ``query`` the stuffing templates."""
    table = _table(query, passage_id)
    shown = words(text)
    seen: set[str] = set()
    for size in {min(RUN, n) for n in range(1, RUN + 1)}:
        for run in _runs(shown, size):
            for phrasing in table.by_run.get(run, ()):
                if phrasing.order.attack not in seen:
                    seen.add(phrasing.order.attack)
                    if _reached(phrasing, shown) >= SHARE:
                        return phrasing.order
    flat = normal(text)
    for unit, order in table.stuffing:
        if unit and flat.count(unit) >= 2:
            return order
    return None
