"""The scoring mode of the embedded LLM judges (``mode=score``): one Yes/No question per
passage, as pointwise LLM rerankers ask small models (monoT5's "true"/"false", the "Yes"/"No"
prompts of later pointwise rerankers), for the tier job and the pointwise rerank step.

Writing a tier batch's JSON (a justification and a quote per passage) is most of a
``mode=generate`` call on a CPU, and a 1.5B model's quotes are where its replies fail. Here each
passage gets a short prompt of its own (the instructions, the query, the passage, then
:data:`QUESTION`) and the judge reads how probable ``Yes`` and ``No`` are as the reply
(:mod:`evidex.judges._qwen_score`): one prompt evaluation per passage, the instructions and the
query shared by every passage of a request and so evaluated once, nothing generated.

- The passage's relevance score is ``s = p(Yes) / (p(Yes) + p(No))``, in [0, 1]. Pointwise
  rerank: ``relevance_score = s``. Tier: ``s`` is cut by :data:`CUT_POINTS` like the
  ``local:minilm`` score (:func:`evidex.judges._grades.tier_reply`: the first tier whose cut
  point ``s`` reaches, else the last; a scheme of another tier count gets them re-spread).
- Why a binary question, not the tier names: asked to continue ``{"tier": "`` with one of
  the four tier names, the shipped 1.5B model put 37 of 40 LLMJudge pairs in
  contextually-relevant (kappa 0.04; docs/benchmarks.md, qwen_modes_agreement, before this
  mode changed), and grade digits were as flat; the offline audit found the same with four
  classes and works with Yes/No questions (:mod:`evidex.judges._qwen_audit`).
- The model writes no text, so the rest of a tier reply is a named heuristic: the
  justification gives ``s`` and the cut point that decided, and ``key_evidence_snippet`` is
  the passage's best-matching sentence by ``local:minilm`` (a verbatim slice, see
  :meth:`evidex.judges.minilm.MiniLMJudge.match`), said to be one.
- A custom tier prompt (``prompt=``, ``EVIDEX_PROMPT_TIER``) is not read in this mode: the
  question is this module's, and its hash (with the cut points) is in the judge's
  fingerprint.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from evidex.judges import _grades
from evidex.judges._grades import CutPoints, PoolScore
from evidex.judges._qwen_score import CandidateScores
from evidex.judging import ScorePayload, TierPayload
from evidex.types import DEFAULT_TIERS

__all__ = [
    "CUT_POINTS",
    "GRADED_PAYLOADS",
    "GRADE_PROMPT_VERSION",
    "grade_messages",
    "grade_reply",
    "relevance",
    "score_reply",
    "tier_reply",
]

SYSTEM = "You judge whether a passage answers a search query. Answer Yes or No."
USER = "Query: [QUERY]\n\nPassage: [PASSAGE]\n\n[QUESTION]"
QUESTION = "Does the passage answer the query? Answer Yes or No."
ANSWERS = ("Yes", "No")

CUT_POINTS = CutPoints((0.801, 0.7952, 0.695))
"""The minimum ``s`` of directly-supporting, contextually-relevant and tangentially-related
(below the last: irrelevant). Fitted by ``bench/fit_qwen_cut_points.py``: the three cut
points that maximise Cohen's kappa against NIST (grades 3..0 as the four default tiers) over
LLMJudge dev pairs of queries outside the bench samples (docs/benchmarks.md,
qwen_cut_points)."""

GRADE_PROMPT_VERSION = hashlib.sha256(
    f"{SYSTEM}\n--\n{USER}\n--\n{QUESTION}\n--\n{CUT_POINTS.points}".encode()
).hexdigest()[:12]
"""Hash of the question and the cut points, in the judge's fingerprint: editing either changes
the cache key."""

GRADED_PAYLOADS = (TierPayload, ScorePayload)
"""The requests score mode answers: a tier batch and a pointwise rerank score batch."""

Score = Callable[[list[dict[str, str]], list[str], str], CandidateScores]
"""``(messages, candidates, reply_prefix) -> CandidateScores``: the judge's
:meth:`~evidex.judges._qwen.LlamaJudge.candidate_scores`."""
Match = Callable[[str, Sequence[str]], Sequence[Any]]
"""``(query, texts) -> matches`` with ``.sentence.text`` and ``.sentence.score``:
:meth:`evidex.judges.minilm.MiniLMJudge.match`."""


def grade_messages(query: str, passage: str) -> list[dict[str, str]]:
    """The question about one passage. Everything before the passage is the same for every
    passage of a request, so the KV cache of the previous prompt covers it."""
    user = USER.replace("[QUERY]", query).replace("[QUESTION]", QUESTION)
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": user.replace("[PASSAGE]", passage)},
    ]


def relevance(score: Score, query: str, passage: str) -> float:
    """``s = p(Yes) / (p(Yes) + p(No))`` for one passage (the candidates are renormalised)."""
    return score(grade_messages(query, passage), list(ANSWERS), "").probabilities["Yes"]


def grade_reply(
    judge_id: str, payload: TierPayload | ScorePayload, score: Score, match: Match
) -> tuple[dict[str, Any], int]:
    """The reply to a tier or score request, and the prompt tokens read: one question per
    passage, in order, so consecutive prompts share the instructions and the query."""
    values = []
    read = 0
    for passage in payload.passages:
        scores = score(grade_messages(payload.query, passage.text), list(ANSWERS), "")
        values.append(scores.probabilities["Yes"])
        read += scores.prompt_tokens
    ids = [p.passage_id for p in payload.passages]
    if not isinstance(payload, TierPayload):
        return score_reply(judge_id, ids, values), read
    tiers = [t.name for t in (payload.tiers or DEFAULT_TIERS.tiers)]
    matches = match(payload.query, [p.text for p in payload.passages])
    snippets = [(m.sentence.text, m.sentence.score) for m in matches]
    return tier_reply(judge_id, ids, values, snippets, tiers), read


def _words(judge_id: str, s: float) -> str:
    return (
        f"{judge_id} s = p(Yes)/(p(Yes)+p(No)) = {s:.3f} to {QUESTION!r} "
        "(read from the model's next-token distribution, mode=score)"
    )


def tier_reply(
    judge_id: str,
    ids: Sequence[str],
    values: Sequence[float],
    snippets: Sequence[tuple[str, float]],
    tiers: Sequence[str],
    cut_points: CutPoints = CUT_POINTS,
) -> dict[str, Any]:
    """A tier reply: each passage in the first tier whose cut point its ``s`` reaches, else
    the last. ``snippets`` are each passage's best-matching sentence and its cosine (the
    heuristic quoted as evidence); ``tiers`` are most relevant first."""

    def explain(i: int, spread: str, verdict: str) -> str:
        return (
            f"{_words(judge_id, values[i])} {verdict}{spread}; snippet: best-matching "
            f"sentence (heuristic: MiniLM cosine {snippets[i][1]:.2f}), not quoted by the model"
        )

    return _grades.tier_reply(
        cut_points.points, ids, values, [s for s, _ in snippets], tiers, explain
    )


def score_reply(judge_id: str, ids: Sequence[str], values: Sequence[float]) -> dict[str, Any]:
    """The pointwise score step's reply: each passage's ``s``."""
    return _grades.scores_reply(ids, [PoolScore(s, _words(judge_id, s)) for s in values])
