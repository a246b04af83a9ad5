"""Lexical checks that catch the audit judge's two commonest slips, cheaply and without a model.

A small judge (and sometimes a large one) grades a claim ``fully_supported`` while quoting a
sentence that is about something else, or that gives a different number; and it skips a
sentence of the answer altogether, so that sentence is never audited. Neither slip can be seen
by schema or verbatim checks. These checks are deliberately narrow, so that a correct reply
never trips them:

- a number written in a fully supported claim must appear in one of its quotes (a paraphrase
  can change words, not figures);
- a fully supported claim must share at least one content word with its quotes;
- every sentence of the answer that states something (it has a figure, or three content
  words, and is not a question) must overlap at least one claim.

The first two produce validation errors, so the judge is re-asked with the exact problem, like
any other validation failure; they never change a grade themselves. A skipped sentence is not an
error: the audit job grades it as a claim of its own in a classification call, so it is judged
like every other claim (re-asking for it failed with small judges, which then fell back).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = [
    "content_words",
    "number_errors",
    "statement_sentences",
    "uncovered_sentences",
    "word_overlap_error",
]

_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
_SENTENCE = re.compile(r"[^\n]+?(?:[.!?]+(?=\s|$)|$)", re.MULTILINE)
# Words of three letters or more that carry no topic; shorter words are ignored anyway.
_FUNCTION_WORDS = frozenset(
    {
        "all",
        "and",
        "any",
        "are",
        "but",
        "can",
        "did",
        "for",
        "had",
        "has",
        "her",
        "him",
        "his",
        "how",
        "its",
        "may",
        "nor",
        "not",
        "now",
        "our",
        "own",
        "she",
        "the",
        "too",
        "was",
        "who",
        "why",
        "yes",
        "yet",
        "you",
        "about",
        "above",
        "after",
        "again",
        "against",
        "also",
        "although",
        "among",
        "another",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "could",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "either",
        "every",
        "from",
        "further",
        "have",
        "having",
        "here",
        "hers",
        "herself",
        "himself",
        "however",
        "into",
        "itself",
        "just",
        "least",
        "less",
        "many",
        "more",
        "most",
        "much",
        "must",
        "neither",
        "none",
        "only",
        "other",
        "ought",
        "ours",
        "ourselves",
        "over",
        "same",
        "several",
        "should",
        "since",
        "some",
        "such",
        "than",
        "that",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "though",
        "through",
        "thus",
        "under",
        "until",
        "upon",
        "very",
        "what",
        "when",
        "where",
        "whether",
        "which",
        "while",
        "whom",
        "whose",
        "will",
        "with",
        "within",
        "without",
        "would",
        "your",
        "yours",
        "yourself",
        "yourselves",
    }
)


def content_words(text: str) -> set[str]:
    """Lower-cased words of three letters or more that are not function words, cut to their
    first five letters so that "arrives" and "arrival" meet."""
    return {w.lower()[:5] for w in _WORD.findall(text) if w.lower() not in _FUNCTION_WORDS}


def _numbers(text: str) -> list[str]:
    return [n.replace(",", "") for n in _NUMBER.findall(text)]


def number_errors(label: str, claim: str, quotes: Iterable[str]) -> list[str]:
    """An error when a fully supported claim states a number none of its quotes contains."""
    quoted = {n for q in quotes for n in _numbers(q)}
    missing = sorted({n for n in _numbers(claim) if n not in quoted})
    if not missing:
        return []
    return [
        f"{label}: classified fully_supported, but the figure(s) {missing} of the claim appear "
        "in none of its supporting_quotes. Quote the passage words that state them; if no "
        "passage states them, classify the claim partially_supported or unsupported (and "
        "contradicted when a passage gives a different figure)"
    ]


def word_overlap_error(label: str, claim: str, quotes: Sequence[str]) -> list[str]:
    """An error when a fully supported claim's quotes share no content word with it."""
    words = content_words(claim)
    if not words or not quotes or words & content_words(" ".join(quotes)):
        return []
    return [
        f"{label}: classified fully_supported, but its supporting_quotes share no word with the "
        "claim, so they do not state it. Quote the sentence that states the claim, or classify "
        "it lower"
    ]


def statement_sentences(text: str) -> list[tuple[int, int]]:
    """Offsets of the sentences of ``text`` that state something checkable: a figure or at
    least three content words, and not a question."""
    spans = []
    for match in _SENTENCE.finditer(text):
        sentence = match.group().strip()
        if not sentence or sentence.endswith("?"):
            continue
        if _numbers(sentence) or len(content_words(sentence)) >= 3:
            begin = match.start() + (len(match.group()) - len(match.group().lstrip()))
            spans.append((begin, begin + len(sentence)))
    return spans


def uncovered_sentences(text: str, claim_spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The statement sentences of ``text`` (offsets in ``text``) that no claim span overlaps."""
    return [
        (begin, end)
        for begin, end in statement_sentences(text)
        if not any(b < end and begin < e for b, e in claim_spans)
    ]
