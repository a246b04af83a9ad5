"""The audit answered in scoring mode: code splits and quotes, the model only grades.

A 1.5B model writing a whole audit reply token by token is slow and gets the parts that code
checks wrong (inexact quotes, figures its quotes lack), so every such reply fell back. Here, as
in claim checkers such as MiniCheck:

- the claims are the answer's statement sentences (verbatim by construction,
  :func:`~evidex.judges._claim_evidence.split_claims`);
- each claim's candidate evidence is the passage sentences the encoder finds closest
  (:class:`~evidex.judges._claim_evidence.EvidencePicker`), quoted as they are;
- one ``grade(claim, evidence)`` call gives the probability of each :data:`CLASSES` (for
  ``local:qwen``: read from its next-token distribution after two short Yes/No prompts,
  :func:`model_grade`);
- a figure of the claim that the evidence gives otherwise for the same unit is a
  contradiction (:func:`figure_conflict`), found by code;
- code turns the probabilities into a grade by named cut points (:class:`Cuts`) and fills the
  rest of the reply. A fully supported grade whose quotes lack the claim's figures, or too
  many of its words (:attr:`Cuts.coverage`), is lowered to partially supported, and the
  explanation says so: the checks of the audit task are met by honest downgrades, never by
  changing what a quote says.

Every explanation starts with ``heuristic`` and carries the probabilities, so nobody mistakes
a grade read from four probabilities for a written reading.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evidex.judges._claim_evidence import (
    MAX_EVIDENCE,
    MIN_COSINE,
    Evidence,
    EvidencePicker,
    split_claims,
)
from evidex.judges._qwen_score import model_reading
from evidex.judges._scorer import ModelScorer, scoring_version
from evidex.judging import AuditPayload, ClaimsPayload, ExtractPayload, Message, Payload
from evidex.tasks.audit.checks import content_words, figures, number_errors, word_overlap_error

__all__ = [
    "AUDIT_PAYLOADS",
    "CLASSES",
    "SCORING_VERSION",
    "AuditScorer",
    "Cuts",
    "Grade",
    "figure_conflict",
    "grading_prompt",
    "model_grade",
    "unsupported_part",
    "word_coverage",
]

CLASSES: tuple[str, ...] = (
    "fully_supported",
    "partially_supported",
    "unsupported",
    "contradicted",
)
"""What the grade function rates; ``contradicted`` becomes ``unsupported`` with
``contradicted: true`` in the reply, as the audit schema has it."""

Grade = Callable[[str, Sequence[Evidence]], Mapping[str, float]]
"""``grade(claim, evidence) -> {class: probability}`` over :data:`CLASSES`."""

_WORD = re.compile(r"\S+")
_EDGE = " \t\n,;:.!?\"'()[]"


@dataclass(frozen=True)
class Cuts:
    """How probabilities become a grade, in this order: contradicted when P(contradicted)
    reaches ``contradicted``; fully supported when P(fully) reaches ``supported``; partially
    supported when P(fully) + P(partially) reaches ``partial``; else unsupported. A fully
    supported grade then also needs its quotes to contain at least ``coverage`` of the claim's
    content words (:func:`word_coverage`), or code lowers it to partially supported.

    The coverage cut is there because the 1.5B model's P(Yes) to "does the evidence state
    everything the claim says" separates supported WiCE claims from the rest only weakly (ROC
    AUC 0.71 on the tune split), and about as well as the share of the claim's words the quotes
    contain (0.73); the two together do a little better than either (in-sample F1 0.642,
    against 0.605 for the model and 0.628 for the coverage alone). The defaults are the cut
    points of best supported-vs-rest F1, then best 3-way macro-F1, over the 125 claims of the
    tune split of WiCE dev graded by ``local:qwen`` (``bench/fit_audit_cuts.py``); figures are
    reported on the other split (docs/benchmarks.md, audit_wice)."""

    supported: float = 0.35
    partial: float = 0.62
    contradicted: float = 0.5
    coverage: float = 0.5

    def level(self, probs: Mapping[str, float]) -> str:
        p = {c: float(probs.get(c, 0.0)) for c in CLASSES}
        if p["contradicted"] >= self.contradicted:
            return "contradicted"
        if p["fully_supported"] >= self.supported:
            return "fully_supported"
        if p["fully_supported"] + p["partially_supported"] >= self.partial:
            return "partially_supported"
        return "unsupported"


def word_coverage(claim: str, quotes: Sequence[str]) -> float:
    """The share of the claim's content words that its quotes contain (1.0 for a claim with
    none): what code can check of "the quotes state everything the claim says"."""
    words = content_words(claim)
    if not words:
        return 1.0
    return len(words & content_words(" ".join(quotes))) / len(words)


GRADING_INSTRUCTIONS = (
    "You check claims against evidence. Use only the evidence, not what you know. Answer Yes or No."
)
QUESTIONS: dict[str, str] = {
    "all": "Does the evidence state everything the claim says?",
    "part": "Does the evidence state at least part of what the claim says?",
}
"""The two questions :func:`model_grade` asks about each claim. Asked about the same claim and
evidence, they share all but their last words, so the second one costs a few tokens."""


def grading_prompt(claim: str, evidence: Sequence[Evidence], question: str) -> list[Message]:
    """Chat messages whose reply is Yes or No. The fixed instructions come first and the
    question last, so a model that keeps its KV cache evaluates what successive prompts
    share once."""
    lines = "\n".join(f"- {e.text}" for e in evidence) or "- (no evidence)"
    text = f"Evidence:\n{lines}\n\nClaim: {claim}\n\n{question}"
    return [Message("system", GRADING_INSTRUCTIONS), Message("user", text)]


Probabilities = Callable[[Sequence[Message], Sequence[str]], Mapping[str, float]]
"""``probabilities(messages, candidates) -> {candidate: probability}`` of a model's reply
(``QwenJudge.class_probabilities``)."""


def model_grade(probabilities: Probabilities) -> Grade:
    """The grade function of a model that rates candidate replies.

    A 1.5B model asked to pick one of four classes gave an almost flat distribution; asked a
    Yes/No question it separates support better (docs/benchmarks.md, audit_wice). So it is
    asked whether the evidence states all of the claim (``a`` = P(Yes)) and whether it states
    part of it (``b``), and the classes get ``fully_supported = a``, ``partially_supported =
    (1 - a) * b``, ``unsupported = (1 - a) * (1 - b)``. The model is not asked about
    contradiction: its P(Yes) to "does the evidence conflict with the claim" rose and fell
    with its P(Yes) to support; :class:`AuditScorer` finds conflicting figures by code.
    """

    def yes(claim: str, evidence: Sequence[Evidence], question: str) -> float:
        probs = probabilities(grading_prompt(claim, evidence, question), ["Yes", "No"])
        return float(probs["Yes"])

    def grade(claim: str, evidence: Sequence[Evidence]) -> dict[str, float]:
        a = yes(claim, evidence, QUESTIONS["all"])
        b = yes(claim, evidence, QUESTIONS["part"])
        return {
            "fully_supported": a,
            "partially_supported": (1 - a) * b,
            "unsupported": (1 - a) * (1 - b),
        }

    return grade


def figure_conflict(claim: str, evidence: Sequence[Evidence]) -> tuple[str, str, Evidence] | None:
    """A figure of the claim that no candidate states while one that shares a topic word with
    the claim states another figure with the same unit word after it (the claim's "60
    seconds", the passage's "30 seconds"): the claim's figure and unit, the passage's, and
    that sentence. A bound ("longer than 300 seconds", "at least 5 days") states no value and
    conflicts with none. None when there is no conflict."""
    quoted = {f for e in evidence for f in figures(e.text)}
    topic = content_words(claim)
    for number, unit in _figures_with_units(claim, bounds=False):
        if number in quoted:
            continue
        for e in evidence:
            if not (topic & content_words(e.text)) - content_words(unit):
                continue
            for other, other_unit in _figures_with_units(e.text, bounds=True):
                if other_unit == unit and other != number:
                    return f"{number} {unit}", f"{other} {other_unit}", e
    return None


_FIGURE_UNIT = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)*)\s+([^\W\d_]{2,})")
_BOUND = re.compile(
    r"\b(?:than|over|above|below|under|least|most|up to|within|exceed\w*|beyond)\s*$",
    re.IGNORECASE,
)


def _figures_with_units(text: str, *, bounds: bool) -> list[tuple[str, str]]:
    """``(figure, unit word)`` pairs of ``text``; with ``bounds=False`` not those written as a
    bound (the figure right after "than", "at least", "up to" ...)."""
    return [
        (m.group(1).replace(",", ""), m.group(2).lower())
        for m in _FIGURE_UNIT.finditer(text)
        if bounds or not _BOUND.search(text[max(0, m.start() - 12) : m.start()])
    ]


AUDIT_PAYLOADS: tuple[type[Payload], ...] = (ExtractPayload, ClaimsPayload, AuditPayload)
"""The payloads :class:`AuditScorer` answers."""


SCORING_VERSION = scoring_version(
    GRADING_INSTRUCTIONS, QUESTIONS, str(Cuts()), MAX_EVIDENCE, MIN_COSINE
)
"""Changes with the grading prompts, the cut points or the evidence picking: a judge in
scoring mode puts it in its fingerprint, so the cache never serves grades made otherwise."""


class AuditScorer(ModelScorer[Grade, Cuts, Payload]):
    """Answers the audit's payloads (extract, claims, one pass) with code and one ``grade``
    call per claim; the replies are JSON in the steps' schemas, validated like any judge's."""

    def default_cuts(self) -> Cuts:
        return Cuts()

    def reply(self, payload: Payload) -> dict[str, Any]:
        """The reply to one audit payload."""
        if isinstance(payload, ExtractPayload):
            return {"claims": [payload.answer[s:e] for s, e in split_claims(payload.answer)]}
        if isinstance(payload, ClaimsPayload):
            picker = EvidencePicker(payload.passages, self._embed)
            return {
                "claims": [
                    {"claim_id": c.claim_id, **self.graded(c.claim_text, picker.pick(c.claim_text))}
                    for c in payload.claims
                ]
            }
        if isinstance(payload, AuditPayload):
            picker = EvidencePicker(payload.passages, self._embed)
            spans = split_claims(payload.answer)
            claims = [payload.answer[s:e] for s, e in spans]
            return {
                "answer_id": payload.answer_id,
                "claims": [{"claim_text": c, **self.graded(c, picker.pick(c))} for c in claims],
            }
        raise TypeError(f"{self.name} scores audit payloads, not a {type(payload).__name__}")

    def graded(self, claim: str, evidence: Sequence[Evidence]) -> dict[str, Any]:
        """One claim's graded fields (everything but its id or text), given its candidate
        evidence (:meth:`EvidencePicker.pick`)."""
        if not evidence:
            return _item(
                "unsupported",
                explanation="heuristic: the context is empty, so nothing supports the claim "
                "(no grading call)",
            )
        conflict = figure_conflict(claim, evidence)
        if conflict is not None:
            mine, theirs, sentence = conflict
            return _item(
                "unsupported",
                explanation=f"heuristic, by code (no grading call): contradicted, the claim "
                f"says {mine!r} where {sentence.passage_id} says {theirs!r}; "
                f"{len(evidence)} candidate sentence(s) picked by MiniLM cosine",
                contradicted=True,
                contradicting_quote=sentence.text,
            )
        probs = self.ask(claim, evidence)
        level = self.cuts.level(probs)
        shown = ", ".join(f"{c} {float(p):.2f}" for c, p in probs.items())
        why = model_reading(
            self.name, "class probabilities", shown, f"cut points {self.cuts}", evidence
        )
        if level == "contradicted":
            best = evidence[0]
            return _item(
                "unsupported",
                explanation=f"{why}; the conflicting sentence is taken to be the best match, "
                f"in {best.passage_id}",
                contradicted=True,
                contradicting_quote=best.text,
            )
        if level == "unsupported":
            return _item("unsupported", explanation=why)
        quotes = _resting_quotes(claim, evidence)
        texts = [q.text for q in quotes]
        if level == "fully_supported":
            covered = word_coverage(claim, texts)
            if number_errors("", claim, texts):
                lacks = "figure(s) of the claim"
            elif word_overlap_error("", claim, texts) or covered < self.cuts.coverage:
                lacks = f"its words (they contain {covered:.0%} of the claim's content words)"
            else:
                return _item(
                    "fully_supported",
                    quotes,
                    explanation=f"{why}; quotes: the best matches, with {covered:.0%} of the "
                    "claim's content words",
                )
            level = "partially_supported"
            why += (
                f"; lowered from fully_supported to partially_supported by code: the quotes "
                f"lack {lacks}"
            )
        part = unsupported_part(claim, texts)
        if part is None:
            return _item(
                "unsupported",
                explanation=f"{why}; no part of the claim could be named as the unsupported "
                "one, so the claim counts as unsupported",
            )
        return _item(
            "partially_supported",
            quotes,
            explanation=f"{why}; the unsupported part is the longest run of claim words the "
            "quotes do not contain",
            unsupported_part=part,
        )


def _resting_quotes(claim: str, evidence: Sequence[Evidence]) -> list[Evidence]:
    """The candidates a supported grade rests on: the best match, the others that share a
    content word with the claim, and those carrying its figures."""
    words = content_words(claim)
    wanted = set(figures(claim))
    picked = [
        e
        for i, e in enumerate(evidence)
        if i == 0 or words & content_words(e.text) or wanted & set(figures(e.text))
    ]
    return picked


def unsupported_part(claim: str, quotes: Sequence[str]) -> str | None:
    """The words of ``claim`` its quotes do not back, as a verbatim span of it: the longest run
    of words whose content words and figures are absent from the quotes (function words may sit
    inside the run). None when every word is backed or the run would be the whole claim."""
    backed = content_words(" ".join(quotes))
    quoted_figures = {f for q in quotes for f in figures(q)}
    words = list(_WORD.finditer(claim))
    best: tuple[int, int] | None = None
    run_start: int | None = None
    run_end = 0
    for index, w in enumerate(words):
        token = w.group()
        own = content_words(token)
        nums = set(figures(token))
        unbacked = bool(own - backed) or bool(nums - quoted_figures)
        neutral = not own and not nums
        if unbacked:
            run_start = index if run_start is None else run_start
            run_end = index
        elif not neutral:
            run_start = None
        longer = best is None or run_end - (run_start or 0) > best[1] - best[0]
        if run_start is not None and unbacked and longer:
            best = (run_start, run_end)
    if best is None or (best[0] == 0 and best[1] == len(words) - 1):
        return None
    text = claim[words[best[0]].start() : words[best[1]].end()].strip(_EDGE)
    return text or None


def _item(
    classification: str,
    quotes: Sequence[Evidence] = (),
    *,
    explanation: str,
    unsupported_part: str | None = None,
    contradicted: bool = False,
    contradicting_quote: str | None = None,
) -> dict[str, Any]:
    return {
        "supporting_context_ids": list(dict.fromkeys(q.passage_id for q in quotes)),
        "supporting_quotes": [q.text for q in quotes],
        "explanation": explanation,
        "unsupported_part": unsupported_part,
        "contradicted": contradicted,
        "contradicting_quote": contradicting_quote,
        "classification": classification,
    }
