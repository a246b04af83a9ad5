"""Classify in scoring mode: code picks and quotes the evidence, the model only says Yes or No.

A 1.5B model writing a whole classify reply token by token is slow (a median 80 s a call on
SciFact) and quotes inexactly, so a quarter of its replies fell back (docs/benchmarks.md,
classify_scifact). Here, as for the audit (:mod:`evidex.judges._qwen_audit`):

- the candidate evidence is the passage sentences the encoder finds closest to the input
  (:class:`~evidex.judges._claim_evidence.EvidencePicker`), quoted as they are, with their
  passage ids;
- one ``yes(input, evidence, label)`` call per label of the taxonomy gives the probability that
  the evidence shows the label's definition holds for the input (for ``local:qwen``: P(Yes)
  renormalised over Yes/No from its next-token distribution, :func:`model_yes`). The candidates
  are picked once per input, not once per label: the prompts then share everything but their
  last line (instructions, evidence, input), which a model keeping its KV cache evaluates once;
  definitions such as SciFact's describe how the evidence relates to the input, not a topic,
  so a per-label encoder query would pick the same sentences;
- code turns the probabilities into the reply (:meth:`ClassifyScorer.reply`) by a named cut
  point (:class:`ClassifyCuts`): the labels are the most probable one (single-label) or every
  one (multi-label) whose P(Yes) reaches the cut, else the input is unclassifiable.

Every rationale and reason starts with ``heuristic`` and carries the probabilities, so nobody
mistakes a label read from Yes/No probabilities for a written reading.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec

from evidex.judges._claim_evidence import MAX_EVIDENCE, MIN_COSINE, Evidence, EvidencePicker
from evidex.judges._qwen_score import model_reading
from evidex.judges._scorer import ModelScorer, scoring_version
from evidex.judging import ClassifyPayload, Message
from evidex.taxonomy import LabelDefinition

__all__ = [
    "CLASSIFY_SCORING_VERSION",
    "ClassifyCuts",
    "ClassifyScorer",
    "Probabilities",
    "Yes",
    "label_prompt",
    "model_yes",
    "prompted_yes",
]

_P = ParamSpec("_P")

Yes = Callable[[str, Sequence[Evidence], LabelDefinition], float]
"""``yes(input, evidence, label) -> P(the evidence shows the label holds for the input)``."""


@dataclass(frozen=True)
class ClassifyCuts:
    """How the per-label probabilities become labels. ``assign``: a label needs P(Yes) at
    least this. ``close``: in single-label mode, a runner-up whose P(Yes) is within this of the
    chosen label's is shown as counter-evidence. The default ``assign`` is the cut point of
    best macro-F1 (0.558, unclassifiable counted as NOT_ENOUGH_INFO) over 24 claims of the tune
    split of SciFact train graded by ``local:qwen`` (``bench/classify_scifact.py --split tune
    --option mode=score``); figures are reported on the other split (docs/benchmarks.md,
    classify_scifact_score). The 1.5B model gave SUPPORT the highest P(Yes) on all 24, so
    on SciFact the cut only separates SUPPORT from unclassifiable."""

    assign: float = 0.668
    close: float = 0.1


INSTRUCTIONS = (
    "You decide whether a label fits an input, using only the passages shown, not what you "
    "know. Answer Yes or No."
)


def label_prompt(text: str, evidence: Sequence[Evidence], label: LabelDefinition) -> list[Message]:
    """Chat messages whose reply is Yes or No. Instructions, passages and input come first and
    the label last, so the prompts of one input's labels share all but their last line."""
    lines = "\n".join(f"- {e.text}" for e in evidence) or "- (no passages)"
    user = (
        f"Passages:\n{lines}\n\nInput: {text}\n\n"
        f"Label {label.name}: {label.description.strip()}\n"
        "Do the passages show that this label fits the input?"
    )
    return [Message("system", INSTRUCTIONS), Message("user", user)]


Probabilities = Callable[[Sequence[Message], Sequence[str]], Mapping[str, float]]
"""``probabilities(messages, candidates) -> {candidate: probability}`` of a model's reply
(``QwenJudge.class_probabilities``)."""


def prompted_yes(
    prompt: Callable[_P, list[Message]], probabilities: Probabilities
) -> Callable[_P, float]:
    """A ``yes`` function asking ``prompt``'s Yes/No question: P(Yes) renormalised over Yes and
    No. Every scorer that reads a model's Yes/No through one prompt function asks it this way,
    so the candidates and their order are written once."""

    def yes(*args: _P.args, **kwargs: _P.kwargs) -> float:
        return float(probabilities(prompt(*args, **kwargs), ["Yes", "No"])["Yes"])

    return yes


def model_yes(probabilities: Probabilities) -> Yes:
    """The ``yes`` function of a model that rates candidate replies: P(Yes) renormalised over
    Yes and No after :func:`label_prompt`."""
    return prompted_yes(label_prompt, probabilities)


CLASSIFY_SCORING_VERSION = scoring_version(
    INSTRUCTIONS,
    label_prompt("", (), LabelDefinition(name="L", description="d"))[1].content,
    str(ClassifyCuts()),
    MAX_EVIDENCE,
    MIN_COSINE,
)
"""Changes with the prompt, the cut points or the evidence picking: a judge in scoring mode
puts it in its fingerprint, so the cache never serves labels made otherwise."""


class ClassifyScorer(ModelScorer[Yes, ClassifyCuts, ClassifyPayload]):
    """Answers a :class:`~evidex.judging.ClassifyPayload` with code and one ``yes`` call per
    label; the reply is JSON in the classify schema, validated like any judge's."""

    def default_cuts(self) -> ClassifyCuts:
        return ClassifyCuts()

    def evidence(self, payload: ClassifyPayload) -> list[Evidence]:
        """The candidate sentences of the input, best first."""
        return EvidencePicker(payload.passages, self._embed).pick(payload.input)

    def probabilities(
        self, payload: ClassifyPayload, evidence: Sequence[Evidence]
    ) -> dict[str, float]:
        """P(Yes) of each label, in taxonomy order (what the cut point is fitted on)."""
        return {lb.name: self.ask(payload.input, evidence, lb) for lb in payload.labels}

    def reply(self, payload: ClassifyPayload) -> dict[str, Any]:
        """The reply to one classify payload."""
        evidence = self.evidence(payload)
        if not evidence:
            return _unclassifiable(
                "heuristic: the context has no sentences, so no label can rest on evidence "
                "(no model call)",
                ["any passage text about the input"],
            )
        probs = self.probabilities(payload, evidence)
        return self.decide(payload, evidence, probs)

    def decide(
        self, payload: ClassifyPayload, evidence: Sequence[Evidence], probs: Mapping[str, float]
    ) -> dict[str, Any]:
        """The reply for given probabilities (pure: no model call)."""
        shown = ", ".join(f"{n} {p:.2f}" for n, p in probs.items())
        how = model_reading(
            self.name, "P(Yes) per label", shown, f"cut point {self.cuts.assign:g}", evidence
        )
        gaps = []
        if evidence[0].score < MIN_COSINE:
            gaps.append(
                f"a passage sentence close to the input (the best reaches cosine "
                f"{evidence[0].score:.2f}, below {MIN_COSINE:g})"
            )
        ranked = sorted(probs, key=lambda n: -probs[n])
        passing = [n for n in ranked if probs[n] >= self.cuts.assign]
        if not passing:
            return _unclassifiable(
                f"{how}: no label reaches the cut point",
                gaps or [f"a finding that settles one of {', '.join(ranked)}"],
            )
        total = sum(probs.values())
        chosen = passing if payload.multi_label else passing[:1]
        items = []
        for name in chosen:
            # single-label: the label's share of the labels' P(Yes); multi-label: its P(Yes)
            confidence = probs[name] if payload.multi_label else probs[name] / total
            counter = []
            if not payload.multi_label:
                rivals = [n for n in ranked[1:] if probs[name] - probs[n] <= self.cuts.close]
                counter = [
                    _quote(
                        evidence[0],
                        f"heuristic: the same best-matching sentence, read against {rival}, "
                        f"got P(Yes) {probs[rival]:.2f}, close to {name}'s {probs[name]:.2f}",
                    )
                    for rival in rivals[:1]
                ]
            items.append(
                {
                    "label": name,
                    "confidence": round(confidence, 4),
                    "supporting_evidence": [
                        _quote(
                            e,
                            f"{how}; candidate {i} of {len(evidence)} for {name} "
                            f"(cosine {e.score:.2f})",
                        )
                        for i, e in enumerate(evidence, 1)
                    ],
                    "counter_evidence": counter,
                }
            )
        return {
            "classifications": items,
            "unclassifiable": False,
            "unclassifiable_reason": None,
            "evidence_gaps": gaps,
        }


def _quote(e: Evidence, rationale: str) -> dict[str, str]:
    return {"passage_id": e.passage_id, "quoted_text": e.text, "rationale": rationale}


def _unclassifiable(reason: str, gaps: list[str]) -> dict[str, Any]:
    return {
        "classifications": [],
        "unclassifiable": True,
        "unclassifiable_reason": reason,
        "evidence_gaps": gaps,
    }
