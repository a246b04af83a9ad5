"""Claims and their candidate evidence, found by code so that both are verbatim by construction.

A small model quotes inexactly and skips sentences; code does neither. The claims of an answer
are its statement sentences (:func:`split_claims`: the same sentences the audit's coverage
check looks for, so no sentence is left without a claim), and a claim's candidate evidence is
the passage sentences closest to it (:func:`candidate_evidence`): slices of the passages with
their offsets, ranked by the encoder's cosine, with the sentences that carry the claim's
figures kept in (a fully supported claim's figures must appear in its quotes). The model then
only grades; what it grades is what the reply quotes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from evidex.judges.minilm import sentence_spans
from evidex.judging import PassageText
from evidex.tasks.audit.checks import content_words, figures, statement_sentences

__all__ = ["Embed", "Evidence", "EvidencePicker", "split_claims"]

Embed = Callable[[Sequence[str]], npt.NDArray[np.float32]]
"""Unit vectors of texts, one row per text (``MiniLMJudge.embed``)."""

MAX_EVIDENCE = 4
"""Candidate sentences per claim: enough for a claim that joins two facts, few enough that the
grading prompt stays short (its length is most of a grading call)."""
MIN_COSINE = 0.2
"""Sentences below this cosine are not candidates unless they carry one of the claim's figures
or are the best there is (the grade of a claim with no close sentence is then unsupported)."""


def split_claims(answer: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the claims of ``answer``: its statement sentences, verbatim slices."""
    return statement_sentences(answer)


@dataclass(frozen=True)
class Evidence:
    """A sentence of a passage: ``passage.text[start:end] == text``."""

    passage_id: str
    text: str
    start: int
    end: int
    score: float
    """Cosine with the claim (the encoder's)."""


class EvidencePicker:
    """The candidate evidence of claims against one context; the context's sentences are
    embedded once, every claim then costs one more embedding."""

    def __init__(self, passages: Sequence[PassageText], embed: Embed) -> None:
        self._embed = embed
        self.sentences: list[Evidence] = []
        for passage in passages:
            for start, end in sentence_spans(passage.text) or [(0, len(passage.text))]:
                text = passage.text[start:end]
                if text.strip():
                    self.sentences.append(Evidence(passage.passage_id, text, start, end, 0.0))
        self._vectors = embed([s.text for s in self.sentences]) if self.sentences else None
        # what every claim's ranking reads of a sentence, worked out once per context
        self._words = [content_words(s.text) for s in self.sentences]
        self._figures = [set(figures(s.text)) for s in self.sentences]

    def pick(self, claim: str, k: int = MAX_EVIDENCE) -> list[Evidence]:
        """The claim's candidate sentences, best first: the ``k`` closest at or above
        :data:`MIN_COSINE` (at least the closest one), plus the closest sentence carrying each
        figure of the claim that the picked ones lack."""
        if self._vectors is None:
            return []
        cosines = self._vectors @ self._embed([claim])[0]
        words = content_words(claim)
        # a shared content word breaks near-ties towards the sentence that names the topic
        ranked = sorted(
            range(len(self.sentences)),
            key=lambda i: -(float(cosines[i]) + 0.02 * len(words & self._words[i])),
        )
        chosen = [i for i in ranked[:k] if cosines[i] >= MIN_COSINE] or ranked[:1]
        wanted = set(figures(claim))
        have = {f for i in chosen for f in self._figures[i]}
        for i in ranked:
            missing = wanted - have
            if not missing:
                break
            carried = missing & self._figures[i]
            if i not in chosen and carried:
                chosen.append(i)
                have |= carried
        return [dataclasses.replace(self.sentences[i], score=float(cosines[i])) for i in chosen]
