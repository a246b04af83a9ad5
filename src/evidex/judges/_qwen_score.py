"""Read a judgment from the next-token distribution of the embedded LLM, without generating.

A 1.5B model on two CPU cores writes about 18 tokens/s but reads a prompt about 45 tokens/s,
and most of a generated reply is justification that a code check could produce anyway. So
where a judgment is one choice among a few known answers (a grade ``0``..``3``, a class word
such as ``supported``), evaluate the prompt once and read how probable each answer is as the
reply's continuation: one prompt evaluation, no sampling, no grammar, a distribution instead of
one draw. The KV cache of the previous prompt is kept, so prompts that share their beginning
(the instructions and the query, then one passage each) pay for the shared part once.

Each candidate is scored by its **full sequence log-probability**, by the chain rule: the
first token's from the prompt's logits, each further token's after evaluating the tokens
before it (then the cache is rolled back to the prompt), so ``unsupported`` and ``supported``
compete as whole words even where they share or split tokens. The probabilities returned are
renormalised over the candidates; :attr:`CandidateScores.mass` keeps how much of the model's
probability the candidates held before that (a low mass says the prompt did not make the model
expect one of them, and the distribution means little).

Use it through :meth:`evidex.judges._qwen.QwenJudge.class_probabilities` (thread-safe, takes
the model lock), not by calling :func:`score_candidates` on a model someone else may be using.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evidex.judges._qwen_decode import ConstrainedDecoder

__all__ = ["CandidateScores", "model_reading", "score_candidates"]


def model_reading(name: str, read: str, shown: str, cuts: str, evidence: Sequence[Any]) -> str:
    """How a score-mode grade was reached, for its explanation: the model ``name`` gave the
    probabilities ``shown`` (``read``: of what) rather than a written reading, the ``cuts``
    decided, on candidate sentences code picked (``evidence``, best first, each with its
    cosine ``score``). The audit and classify scorers say it alike, so a reviewer reads one
    wording for one method."""
    return (
        f"heuristic ({name} {read} read from next-token distributions, not a written "
        f"reading): {shown}; {cuts}; {len(evidence)} candidate sentence(s) picked by MiniLM "
        f"cosine (best {evidence[0].score:.2f})"
    )


@dataclass(frozen=True)
class CandidateScores:
    """The distribution over a set of candidate continuations of one prompt."""

    probabilities: dict[str, float]
    """Each candidate's probability, renormalised over the candidates (they add up to 1)."""
    log_probs: dict[str, float]
    """Each candidate's full sequence log-probability under the model (natural log, not
    renormalised)."""
    mass: float
    """The model's probability of the candidates together before renormalising, in [0, 1]."""
    prompt_tokens: int
    prompt_evaluated: int
    """Prompt tokens evaluated; the rest came from the KV cache of the previous prompt."""
    seconds: float
    """Prompt evaluation and candidate scoring, inside llama.cpp."""

    def best(self) -> str:
        """The most probable candidate (the first one given, on a tie)."""
        return max(self.probabilities, key=lambda c: self.probabilities[c])


def score_candidates(
    llama: Any, decoder: ConstrainedDecoder, prompt: Sequence[int], candidates: Sequence[str]
) -> CandidateScores:
    """Evaluate ``prompt`` (token ids, chat template applied) and score each candidate as its
    continuation. The caller holds the model's lock. ``candidates`` are tokenized as the start
    of the reply (no leading space); duplicates and empty strings are errors."""
    names = list(candidates)
    if not names or any(not c for c in names) or len(set(names)) != len(names):
        raise ValueError(f"candidates must be distinct non-empty strings, got {names!r}")
    started = time.perf_counter()
    prompt = list(prompt)
    evaluated = decoder.evaluate(prompt)
    first = _log_softmax(decoder.logits(-1))
    log_probs: dict[str, float] = {}
    for name in names:
        tokens: list[int] = llama.tokenize(name.encode("utf-8"), add_bos=False, special=False)
        total = float(first[tokens[0]])
        if len(tokens) > 1:
            try:
                decoder.extend(tokens[:-1])
                for row, token in enumerate(tokens[1:]):
                    total += float(_log_softmax(decoder.logits(row))[token])
            finally:
                decoder.truncate(len(prompt))
        log_probs[name] = total
    top = max(log_probs.values())
    weights = {n: math.exp(lp - top) for n, lp in log_probs.items()}
    norm = sum(weights.values())
    return CandidateScores(
        probabilities={n: w / norm for n, w in weights.items()},
        log_probs=log_probs,
        mass=min(1.0, math.exp(top) * norm),
        prompt_tokens=len(prompt),
        prompt_evaluated=evaluated,
        seconds=time.perf_counter() - started,
    )


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max()
    out: np.ndarray = shifted - np.log(np.exp(shifted).sum())
    return out
