"""A candidate second reader for the injection screen, measured here and not shipped: a
sentence that *means* what one of the suite's tuned attacks says, in other words.

The patterns (:mod:`evidex._screening_rules`) find the phrasings they were written for and
few others: on the suite's frozen public held-out set they found about a third. An attacker
rephrases; an order to the grader stays an order to the grader. So each sentence of a field
that uses the graders' vocabulary is embedded by the shipped MiniLM encoder and compared with
the sentences of the suite's *tuned* phrasings (``split: tune`` in
``data/attacks/suite.jsonl``, the kinds written as prose or protocol); a sentence at least
:data:`THRESHOLD` cosine from one of them is flagged as that record's kind. Held-out
phrasings are never exemplars, so the benchmark's held-out figures stay out of set.

Two fitted constants, both fitted on the tuned phrasings and the LLMJudge passages only
(``bench/fit_meaning_screen.py``), and measured on TREC DL 2019 and the held-out phrasings
(``bench/injection_screen.py``):

- :data:`GRADER_STEMS`, the gate: a sentence is embedded only when it holds one of the stems
  of the tuned phrasings that honest LLMJudge sentences seldom use, so most of a passage
  costs no encoder run;
- :data:`THRESHOLD`, the least cosine (on a 0.05 grid) whose false positives on LLMJudge
  passages stay at most 0.2%.

Each sentence is encoded alone, so whether one sentence is flagged never depends on the
passages beside it, and a sentence met again comes from the encoder's cache.

Why it is not in ``evidex._screening``: besides its gains on the held-out phrasings, it flags
honest sentences that talk about passages and answers ("Read the passage below and answer the
questions that follow.", cosine 0.50), common on reading-comprehension pages and thin in the
benchmarks' corpora. A flagged passage is cut and held below the standard context, so such a
false positive demotes a relevant passage. Honest sentences as counter-examples (a sentence is
flagged only when it lies closer to an attack than to any of them), fitted and measured by
query groups, are the next step.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.resources
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from evidex._neutralise import _SENTENCE_END
from evidex._screening import Suspicion, SuspicionKind, screen

__all__ = [
    "EXEMPLAR_KINDS",
    "GRADER_STEMS",
    "MIN_WORDS",
    "THRESHOLD",
    "Exemplar",
    "Resemblance",
    "candidate_in_preflight",
    "candidate_suspicions",
    "cut_sentences",
    "exemplars",
    "gated",
    "llmjudge_sentences",
    "nearest",
    "resembling",
    "stems",
    "use_counter_examples",
    "with_meaning",
]

THRESHOLD = 0.45
"""The least cosine to a tuned phrasing's sentence that flags a sentence (fitted: see the
module docstring)."""

MIN_WORDS = 4
"""Shorter sentences are left to the patterns: three words say too little to compare."""

EXEMPLAR_KINDS = frozenset(
    {"note_to_grader", "answer_smuggling", "label_smuggling", "rank_first", "hidden_field"}
)
"""Attack kinds whose tuned phrasings are exemplars: the ones written as prose to the grader,
which an attacker can say in endless other words. Structure (a fake reply's JSON, a chat
template's tokens, a closed data block) is the patterns' job: honest JSON and markup lie close
to fake ones by meaning. Stuffing is the query's own words (the stuffing check reads it), and
hidden characters are not words at all."""

_STEMS = """
    above answer assist audito billin candid checke cite claim classi confid confir contra
    correc dear defini editor entire evalua excerp expect fact fully given grade grader
    gradin highly ignore input instru judge label list mark match messag must needs passag
    perfec placed please positi precis prefer previo put query questi rank ranker rated
    regard releva respon result search source statem text ticket tier topic treat verifi
    writte
"""
GRADER_STEMS = frozenset(_STEMS.split())
"""The gate (fitted: see the module docstring): a sentence is compared only when one of its
words starts with one of these six-letter stems."""

_WORD = re.compile(r"[^\W\d_]{3,}")
SENTENCE_END = _SENTENCE_END
"""Where the screen's cut ends a sentence (``evidex._neutralise``'s own pattern, not a copy),
so a flagged sentence is the stretch a cut would remove."""


def cut_sentences(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text`` as :data:`SENTENCE_END` ends them, the
    blanks around it left out."""
    out = []
    at = 0
    for end in [*(m.end() for m in SENTENCE_END.finditer(text)), len(text)]:
        start, stop = at, end
        while start < stop and text[start].isspace():
            start += 1
        while stop > start and text[stop - 1].isspace():
            stop -= 1
        if start < stop:
            out.append((start, stop))
        at = end
    return out


_PLACEHOLDERS = {"{passage_id}": "p1"}


def stems(text: str) -> set[str]:
    """The gate's view of ``text``: its words of three letters or more, lower-cased and cut to
    six letters."""
    return {w.lower()[:6] for w in _WORD.findall(text)}


def gated(sentence: str) -> bool:
    """Whether ``sentence`` is long enough and speaks the graders' vocabulary."""
    return len(sentence.split()) >= MIN_WORDS and not GRADER_STEMS.isdisjoint(stems(sentence))


@dataclass(frozen=True)
class Exemplar:
    """One sentence of a tuned phrasing of the suite."""

    record: str
    kind: str
    expect: str
    """The suspicion kind the record says a screen should report."""
    text: str


@dataclass(frozen=True)
class Resemblance:
    """A sentence of a field close to a tuned phrasing: its span and what it resembles."""

    start: int
    end: int
    cosine: float
    exemplar: Exemplar


@functools.lru_cache(maxsize=1)
def exemplars() -> tuple[Exemplar, ...]:
    """The sentences of the suite's tuned phrasings of :data:`EXEMPLAR_KINDS`, in file order.
    Read from the data file itself: :mod:`evidex._attacks` builds on the screen, not the other
    way round."""
    raw = importlib.resources.files("evidex").joinpath("data/attacks/suite.jsonl")
    out = []
    for line in raw.read_text("utf-8").splitlines():
        row = json.loads(line) if line.strip() else None
        if not row or row.get("split", "tune") != "tune" or row["kind"] not in EXEMPLAR_KINDS:
            continue
        text = row["text"]
        for placeholder, value in _PLACEHOLDERS.items():
            text = text.replace(placeholder, value)
        for a, b in cut_sentences(text):
            if len(text[a:b].split()) >= MIN_WORDS:
                out.append(Exemplar(row["id"], row["kind"], row["expect"][0], text[a:b]))
    return tuple(out)


_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


def _encoder_and_matrix() -> tuple[Any, Any]:
    """The shipped MiniLM encoder (the one ``local:minilm`` uses, shared per process) and the
    exemplars' embeddings, built on first use."""
    with _LOCK:
        if "encoder" not in _STATE:
            from evidex.judges.minilm import MiniLMJudge

            encoder = MiniLMJudge().encoder
            _STATE["matrix"] = _embed(encoder, [e.text for e in exemplars()])
            _STATE["encoder"] = encoder
        return _STATE["encoder"], _STATE["matrix"]


def _embed(encoder: Any, texts: list[str]) -> Any:
    """One row per text, each encoded alone (batch 1): a text's embedding is a function of the
    text, and the encoder's cache serves it when it comes again."""
    return encoder.encode(texts, batch_size=1)[0]


def nearest(sentences: list[str]) -> list[tuple[float, Exemplar]]:
    """For each sentence, its highest cosine to an exemplar and that exemplar."""
    return [(cosine, exemplar) for cosine, exemplar, _ in _scored(sentences)]


def _scored(sentences: list[str]) -> list[tuple[float, Exemplar, float]]:
    """For each sentence: its highest cosine to an exemplar, that exemplar, and its highest
    cosine to a counter-example (-1 without any)."""
    if not sentences:
        return []
    encoder, matrix = _encoder_and_matrix()
    honest = _STATE.get("counter")
    table = exemplars()
    out = []
    for vector in _embed(encoder, sentences):
        cosines = matrix @ vector  # one sentence at a time: the same sums whatever is beside it
        best = int(cosines.argmax())
        closest_honest = float((honest @ vector).max()) if honest is not None else -1.0
        out.append((float(cosines[best]), table[best], closest_honest))
    return out


def use_counter_examples(sentences: list[str] | None) -> int:
    """Honest sentences a flagged sentence must lie farther from than from its exemplar (the
    gated ones of ``sentences``; None drops them). Returns how many are kept."""
    with _LOCK:
        _STATE.pop("counter", None)
    kept = [s for s in sentences or [] if gated(s)]
    if kept:
        encoder, _ = _encoder_and_matrix()
        _STATE["counter"] = _embed(encoder, kept)
    return len(kept)


def resembling(value: str, threshold: float = THRESHOLD) -> list[Resemblance]:
    """The sentences of ``value`` that pass the gate and lie at least ``threshold`` from a
    tuned phrasing (and, with counter-examples, closer to it than to any of them)."""
    spans = [(a, b) for a, b in cut_sentences(value) if gated(value[a:b])]
    found = _scored([value[a:b] for a, b in spans])
    return [
        Resemblance(a, b, cosine, exemplar)
        for (a, b), (cosine, exemplar, honest) in zip(spans, found, strict=True)
        if cosine >= threshold and cosine > honest
    ]


def candidate_suspicions(
    text: str, title: str | None = None, url: str | None = None
) -> list[Suspicion]:
    """The candidate reader's findings in a passage's fields, as suspicions of the record kind
    each flagged sentence resembles."""
    return [
        Suspicion(
            cast(SuspicionKind, r.exemplar.expect),
            field,  # type: ignore[arg-type]
            r.start,
            r.end,
            f"resembles_{r.exemplar.kind}",
        )
        for field, value in (("text", text), ("title", title), ("url", url))
        for r in resembling(value or "")
    ]


def with_meaning(
    text: str, title: str | None = None, url: str | None = None, query: str | None = None
) -> list[Suspicion]:
    """The shipped screen's suspicions, then the candidate reader's."""
    return screen(text, title, url, query) + candidate_suspicions(text, title, url)


@contextlib.contextmanager
def candidate_in_preflight() -> Iterator[None]:
    """Every job's preflight, and the audit's screen of the answer, read by
    :func:`with_meaning` instead of the shipped screen: what the jobs would do with the
    candidate shipped (the cut, the hold and the review routing follow the suspicions)."""
    import evidex.jobs._audit_answer as answer
    import evidex.preflight as preflight

    keep = preflight.screen, vars(answer)["screen"]
    preflight.screen = with_meaning
    setattr(answer, "screen", with_meaning)  # noqa: B010 (not re-exported there)
    try:
        yield
    finally:
        preflight.screen = keep[0]
        setattr(answer, "screen", keep[1])  # noqa: B010


def llmjudge_sentences(data: Path) -> list[str]:
    """The sentences of LLMJudge's judged passages under ``data`` (the counter-examples'
    source: the fit data, never the out-of-set TREC DL 2019)."""
    root = data / "llmjudge"
    judged = {
        line.split()[2]
        for line in (root / "qrels_dev.txt").read_text(encoding="utf-8").splitlines()
        if len(line.split()) == 4
    }
    out = []
    with (root / "passages.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line) if line.strip() else None
            if row and str(row["docid"]) in judged:
                out += [row["doc"][a:b] for a, b in cut_sentences(row["doc"])]
    return out
