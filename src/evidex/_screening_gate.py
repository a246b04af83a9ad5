"""Which screening rules can match a text, found in one pass, so the screen runs only those.

The screen's thirty-odd patterns each scan every passage with Python's backtracking ``re``:
about half a millisecond for a passage of 55 words, most of the service's CPU per request
(bench/service_load.py --profile). Nearly every passage matches none of them. RE2's
multi-pattern set (``google-re2``, in the ``service`` extra) says in one linear pass which
patterns match somewhere, and only those run in ``re`` to find their spans: the suspicions
are the same, found in a few microseconds for an honest passage.

"Matches somewhere" is the same question in both engines only where their character classes
agree. The rules use no lookaround, back-reference or multi-line anchor, so the one difference
left is the characters: Python's ``\\s``, ``\\w`` and case folding are Unicode, RE2's ASCII, and
Python counts ``\\v`` and ``\\x1c``-``\\x1f`` as space. So the gate answers only for text of
printable ASCII with tab, newline, carriage return and form feed; for any other text it says
nothing and every rule runs, as it does without ``google-re2``. An attacker cannot use the
difference: text that could be read apart by the two engines never reaches the gate.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["Gate"]

_OUTSIDE_PLAIN = re.compile(r"[^\t\n\r\f\x20-\x7e]")
"""A character for which RE2 and Python's ``re`` may disagree (see the module docstring)."""


MAX_MEM = 64 << 20
"""RE2's memory for the set's automaton. RE2 builds the DFA of a set as it reads and, unlike a
single pattern's, never gives up on a slow search; it fails only when the budget cannot hold a
few states, and a failed search reads as "nothing matched". Eight times the default keeps that
far away, and the canary (:class:`Gate`) checks the built set says what it should."""


class Gate:
    """The rules of a screen as one RE2 set (built on first use); :meth:`candidates` names
    the rules that may match a text, or None when every rule must run.

    ``canary``: a text and the rule that must be found in it. A set that does not find it
    (a build that failed without saying so) is not used."""

    def __init__(
        self,
        rules: Sequence[tuple[str, re.Pattern[str]]],
        canary: tuple[str, str] | None = None,
    ) -> None:
        self._rules = tuple(rules)
        self._canary = canary

    @functools.cached_property
    def _set(self) -> tuple[Any, tuple[str, ...]] | None:
        try:
            import re2
        except ImportError:  # an accelerator: without it every rule runs, with the same result
            return None
        options = re2.Options()
        options.max_mem = MAX_MEM
        options.never_capture = True
        options.log_errors = False
        found = re2.Set.SearchSet(options)
        names: list[str] = []
        for name, pattern in self._rules:
            if pattern.flags & ~(re.IGNORECASE | re.UNICODE):
                return None  # a flag RE2 is not given here: let every rule run
            source = ("(?i)" if pattern.flags & re.IGNORECASE else "") + pattern.pattern
            try:
                index = found.Add(source)
            except Exception:  # a pattern RE2 cannot hold: no gate rather than a wrong one
                return None
            assert index == len(names)
            names.append(name)
        found.Compile()
        if self._canary is not None:
            text, rule = self._canary
            if rule not in {names[i] for i in found.Match(text) or ()}:
                return None
        return found, tuple(names)

    def candidates(self, text: str) -> frozenset[str] | None:
        """The names of the rules that match somewhere in ``text`` (a superset is never
        needed: the set is exact for plain ASCII), or None when the gate cannot say."""
        built = self._set
        if built is None or _OUTSIDE_PLAIN.search(text):
            return None
        found, names = built
        return frozenset(names[i] for i in found.Match(text) or ())
